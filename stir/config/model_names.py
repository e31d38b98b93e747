"""How a model is named on the command line, checked without torch (issue 69: a misspelt name, a source
that does not exist or a real network whose weights are absent is one line before the heavy imports).

A name is a zoo name of the zoo file (``configs/zoo.yaml``: ``vanilla``, ``zoo:vanilla``), a run folder
or checkpoint that exists, or ``SOURCE:NAME`` of a registered model source (``stir.models.sources``).
The source prefixes are read from the sources' own registrations (``@SOURCES.register("timm")`` in
``stir/models/sources/*.py``, parsed, not imported: importing them imports torch), with how each
writes its names (its docstring's first line: --help's SOURCE:NAME line and docs/models.md's table);
a test holds them equal to the registry's ``names()``. ``stir.zoo.resolve`` gives the same one-line messages for the
names that reach it.
"""
from __future__ import annotations

import ast
import difflib
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Tuple

SOURCES_DIR = Path(__file__).resolve().parents[1] / "models" / "sources"
ZOO = "zoo"
REALNET = "realnet"
REALNETS_ENV = "STIR_REALNETS"  # stir.models.realnets.ENV_VAR
REALNETS_DEFAULT = Path(__file__).resolve().parents[2].parent / "shared" / "realnets"  # stir.models.realnets.DEFAULT_ROOT
REALNETS_DOC = "docs/models.md#getting-the-weights"
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".th", ".tar")


@lru_cache(maxsize=1)
def source_usages() -> Dict[str, str]:
    """{prefix: how a name of it is written} of every registered model source but ``zoo``, by prefix: the
    prefix is the string each source module passes to ``SOURCES.register`` (a literal or a module constant),
    the form the first ````...```` of its docstring's first line when that starts with ``prefix:``
    (``python:module.path:factory``), else ``prefix:NAME``. --help's SOURCE:NAME line is built from it."""
    found = {}
    for path in sorted(SOURCES_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        constants = {t.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                     and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                     for t in node.targets if isinstance(t, ast.Name)}
        first = ((ast.get_docstring(tree) or "").strip().splitlines() or [""])[0]
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "SOURCES" and node.args):
                arg = node.args[0]
                prefix = (arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                          else constants.get(arg.id) if isinstance(arg, ast.Name) else None)
                if prefix:
                    form = re.match(rf"``({re.escape(prefix)}:[^`]+)``", first)
                    found[prefix] = form.group(1) if form else f"{prefix}:NAME"
    return dict(sorted(found.items()))


def source_prefixes() -> Tuple[str, ...]:
    """Every registered model source prefix, ``zoo`` first, the others sorted (as ``stir.models.sources.names()``)."""
    return (ZOO, *source_usages())


def split_spec(spec: str) -> Tuple[str, str]:
    """'prefix:rest' -> (prefix, rest); ('', spec) when there is no prefix (``stir.models.sources.split_spec``)."""
    prefix, sep, rest = spec.partition(":")
    return (prefix, rest) if sep else ("", spec)


def close_matches(name: str, choices: Iterable[str]) -> str:
    """"; did you mean A or B?" for the nearest of ``choices`` (difflib), or a count of them."""
    choices = list(choices)
    near = difflib.get_close_matches(name, choices, n=3, cutoff=0.6)
    if near:
        return "; did you mean " + " or ".join(repr(n) for n in near) + "?"
    return f" ({len(choices)} names in the zoo file)"


def unknown_model_message(name: str, zoo_name: str, names: Iterable[str], zoo_file: Path) -> str:
    """One line for a name that is neither a zoo name nor an existing path: the close zoo names, or, for
    something that looks like a path, where it was looked for (never the whole list of names)."""
    path = Path(name)
    if "/" in name or path.suffix in CHECKPOINT_SUFFIXES:
        found = next((p for p in path.resolve().parents if p.exists()), None)  # the deepest folder that exists
        where = f" ({found} exists, {path.resolve().relative_to(found)} in it does not)" if found else ""
        return f"no run folder or checkpoint at {path.resolve()}{where}; give an existing run folder or weights file"
    return (f"unknown model {name!r}: not a zoo name of {zoo_file}{close_matches(zoo_name, names)} (nor a run folder or "
            f"checkpoint here, nor a source such as realnet:NAME)")


def unknown_source_message(prefix: str, name: str) -> str:
    return (f"unknown model source {prefix!r} in {name!r}; sources: {list(source_prefixes())} "
            f"(zoo:NAME or a bare zoo name for this project's models)")


def realnets_folder(root: Optional[str]) -> Tuple[Path, str]:
    """(the real networks' weights folder, where that path came from), as ``stir.models.realnets.weights_root``."""
    if root:
        return Path(root).expanduser(), "zoo.weights_root"
    if os.environ.get(REALNETS_ENV):
        return Path(os.environ[REALNETS_ENV]).expanduser(), f"${REALNETS_ENV}"
    return REALNETS_DEFAULT, "the default, beside the repository"


def missing_realnet(name: str, root: Optional[str]) -> Optional[str]:
    """One line when the weights of ``realnet:NAME`` are not on disk (``<folder>/NAME.pt``): where the weights
    come from and how to get them; None when the file is there (its sha256 is checked when it is loaded)."""
    folder, origin = realnets_folder(root)
    file = folder / f"{name}.pt"
    if file.is_file():
        return None
    where = f"no file {file}" if folder.is_dir() else f"no weights folder {folder}"
    return (f"realnet:{name}: {where} ({origin}); the real networks' weights are not part of the repository: they "
            f"are published releases (sources and licences in docs/models.md); how to get them: {REALNETS_DOC} (save "
            f"{name}.pt in one folder and give zoo.weights_root=PATH or ${REALNETS_ENV}=PATH)")


def problem(name: str, zoo: Dict[str, Any], zoo_file: Path, weights_root: Optional[str]) -> Optional[str]:
    """One line on what is wrong with model ``name`` (``zoo``: the zoo file's entries by name), or None when
    it names a zoo model, an existing path, or a registered source (with its weights, for real networks).
    What needs torch to tell (a checkpoint's contents, a library's model names) is left to the loader."""
    if name in zoo:
        entry = zoo[name]
        source = entry.get("source") if isinstance(entry, dict) else None
        if isinstance(source, str) and split_spec(source)[0] == REALNET and not entry.get("weights"):
            root = entry.get("weights_root") or weights_root
            return missing_realnet(split_spec(source)[1], root)
        return None
    if Path(name).exists():
        return None
    prefix, rest = split_spec(name)
    if prefix == REALNET and rest:
        return missing_realnet(rest, weights_root)
    if prefix and prefix != ZOO and prefix in source_prefixes():
        return None
    zoo_name = rest if prefix == ZOO else name
    if prefix and prefix != ZOO:
        return unknown_source_message(prefix, name)
    if zoo_name in zoo:
        return None
    return unknown_model_message(name, zoo_name, [k for k in zoo if isinstance(k, str)], zoo_file)
