"""The architecture names of ``stir.models``' registry, read from its source without importing it.

The command-line check of ``model.arch`` (``stir.config.validate``) imports no torch and no model, so
it cannot ask the registry (``stir.models.registry.names()``). It reads the same thing from the
source instead: every ``@register(NAME)`` decorator in the modules the registry collects (the
modules directly inside ``stir/models/``, private ones and ``registry.py`` left out, as
``stir.registry.import_package`` does). A new architecture is its ``@register`` line and nothing
else; ``tests/models/test_models.py`` keeps this list equal to the registry's.

``NAME`` is a string literal, or an f-string whose fields are loop variables over a module-level
literal: ``for depth in DEPTHS: _register(depth)`` with ``@register(f"cifar_resnet{depth}")`` inside
``_register`` (stir/models/cifar_resnet.py). Any other form is refused with the place and the fix.
"""
from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

MODELS = Path(__file__).resolve().parents[1] / "models"  # stir/models/: the registry's package
SKIP = ("registry",)  # as stir.models.registry.ARCHITECTURES(skip=...): modules that register nothing


@lru_cache(maxsize=None)
def arch_names(folder: Path = MODELS) -> Tuple[str, ...]:
    """Every architecture name ``@register``-ed in the modules directly inside ``folder``, sorted."""
    names: List[str] = []
    for path in sorted(folder.glob("*.py")):
        if path.stem.startswith("_") or path.stem in SKIP:
            continue
        names += registered_in(path)
    return tuple(sorted(names))


def registered_in(path: Path) -> List[str]:
    """The names of the ``@register(...)`` decorators of one module's source."""
    tree = ast.parse(path.read_text(), filename=str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    constants = _literals(tree)
    out: List[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call) and _called(deco.func) == "register" and len(deco.args) == 1:
                out += _values(deco.args[0], node, tree, parents, constants, path)
    return out


def _called(func: ast.expr) -> Optional[str]:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _literals(tree: ast.Module) -> Dict[str, object]:
    """{NAME: value} of the module-level ``NAME = <literal>`` assignments."""
    out: Dict[str, object] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            try:
                out[stmt.targets[0].id] = ast.literal_eval(stmt.value)
            except ValueError:
                pass
    return out


def _values(arg: ast.expr, decorated: ast.AST, tree: ast.Module, parents: dict, constants: dict,
            path: Path) -> List[str]:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    fields = [v for v in arg.values if isinstance(v, ast.FormattedValue)] if isinstance(arg, ast.JoinedStr) else []
    if (len(fields) == 1 and isinstance(fields[0].value, ast.Name) and fields[0].format_spec is None
            and fields[0].conversion == -1):
        values = list(_bindings(fields[0].value.id, decorated, tree, parents, constants))
        if values:
            return [_render(arg, value) for value in values]
    raise ValueError(f"{path.name}:{arg.lineno}: the architecture name of @register({ast.unparse(arg)}) cannot be "
                     "read without running the module (the torch-free check of model.arch reads it): write it as a "
                     "string literal, or an f-string of a loop variable over a module-level literal")


def _bindings(name: str, node: ast.AST, tree: ast.Module, parents: dict, constants: dict) -> Iterator[object]:
    """The values ``name`` takes where ``node`` runs: the loop over a literal that binds it, or, for a
    parameter of the enclosing function, the loop over a literal that calls that function with it."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and node.target.id == name:
            yield from _iterate(node.iter, constants)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = [a.arg for a in node.args.args]
            if name not in params:
                continue
            position = params.index(name)
            for loop in tree.body:
                if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)):
                    continue
                for call in ast.walk(loop):
                    if (isinstance(call, ast.Call) and _called(call.func) == node.name and len(call.args) > position
                            and isinstance(call.args[position], ast.Name) and call.args[position].id == loop.target.id):
                        yield from _iterate(loop.iter, constants)
            return


def _iterate(expr: ast.expr, constants: dict) -> Iterator[object]:
    if isinstance(expr, ast.Name) and expr.id in constants:
        yield from constants[expr.id]  # a dict gives its keys, as the loop does
        return
    try:
        yield from ast.literal_eval(expr)
    except ValueError:
        return


def _render(arg: ast.JoinedStr, value: object) -> str:
    return "".join(str(v.value) if isinstance(v, ast.Constant) else str(value) for v in arg.values)
