"""No import cycle among the modules of stir: what two modules share sits in a lower module, so each
module imports whole in any order (not only through a package ``__init__``'s import order, as
``paper.at_iris -> paper.parts -> paper.table2 -> paper.at_iris`` once did).

The imports counted are the module-level ones (inside a top-level ``if`` or ``try`` too, not under
``if TYPE_CHECKING:``); an import inside a function runs when it is called and is left out.
``from pkg import name`` counts as an import of ``pkg.name`` where that is a module, else of ``pkg``.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Set

STIR = Path(__file__).resolve().parents[1] / "stir"


def modules(root: Path) -> Dict[str, Path]:
    """{dotted module name: its file} of the package at ``root`` (a package's name for its __init__.py)."""
    out = {}
    for path in root.rglob("*.py"):
        parts = (root.name,) + path.relative_to(root).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _top_level(body: List[ast.stmt]) -> Iterator[ast.stmt]:
    for node in body:
        if isinstance(node, ast.If):
            if "TYPE_CHECKING" not in ast.unparse(node.test):
                yield from _top_level(node.body)
                yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody):
                yield from _top_level(block)
        else:
            yield node


def imports(name: str, path: Path, known: Set[str]) -> Set[str]:
    """The modules of ``known`` that module ``name`` (at ``path``) imports when it is imported."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in _top_level(ast.parse(path.read_text(encoding="utf-8")).body):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                out.add(target if target in known else base)
    return (out & known) - {name}


def cycles(root: Path) -> List[List[str]]:
    """Every import cycle (a strongly connected set of more than one module), each sorted."""
    known = modules(root)
    edges = {name: imports(name, path, set(known)) for name, path in known.items()}
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    found: List[List[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_module_of_stir_imports_itself_through_others():
    assert cycles(STIR) == []


def test_the_check_finds_a_cycle_and_leaves_out_deferred_and_type_checking_imports(tmp_path):
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    files = {"__init__.py": "", "sub/__init__.py": "from pkg.sub import a\n",
             "sub/a.py": "from .b import x\n", "sub/b.py": "try:\n    from pkg.sub import c\nexcept ImportError:\n    c = None\n",
             "sub/c.py": "from .. import sub\nfrom . import a\n",
             "d.py": "def f():\n    from pkg import e\n", "e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.d\n"}
    for rel, text in files.items():
        (root / rel).write_text(text)
    assert cycles(root) == [["pkg.sub", "pkg.sub.a", "pkg.sub.b", "pkg.sub.c"]]
    (root / "sub" / "c.py").write_text("X = 1\n")
    assert cycles(root) == []
