"""The layout is the architecture: each package imports only what docs/architecture.md allows it.

The rule is read from the document itself (its layer table and the table "What each package may
import"), so the guard and the document cannot drift apart. Every import form counts, wherever it
stands (at module level or inside a function): ``import stir.x``, ``from stir.x import y``,
``from stir import x, y`` (each name one package), and relative imports resolved against the
module's own package (``from . import y``, ``from ..x import y``).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

REPO = Path(__file__).resolve().parents[1]
STIR = REPO / "stir"
ARCHITECTURE = REPO / "docs" / "architecture.md"
ROOT_MODULES = ("__init__", "__main__")  # stir/__init__.py, stir/__main__.py: the package root itself


# ---------------------------------------------------------------------------------------------
# The rule, read from docs/architecture.md


def _rows(text: str, header: str) -> List[List[str]]:
    """The body rows (cells) of the first Markdown table whose header row starts with ``header``."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.lstrip().startswith("|") and cells[: len(header)] == header:
            rows = []
            for body in lines[i + 2:]:
                if not body.lstrip().startswith("|"):
                    break
                rows.append([c.strip() for c in body.strip().strip("|").split("|")])
            return rows
    raise AssertionError(f"docs/architecture.md has no table with the header {header}")


def _names(cell: str) -> List[str]:
    """The stir packages a cell names: `stir.x` -> x, `x` -> x, `stir/__init__.py` -> __init__."""
    out = []
    for code in re.findall(r"`([^`]+)`", cell):
        m = re.fullmatch(r"stir/(__\w+__)\.py|(?:stir\.)?(\w+)", code)
        if m:
            out.append(m.group(1) or m.group(2))
    return out


def layers(text: str) -> Dict[str, int]:
    """{package: layer} of the layer table (``| layer | package | its job |``)."""
    out: Dict[str, int] = {}
    for layer, packages, _job in _rows(text, ["layer", "package"]):
        for cell_name in re.findall(r"`([^`]+)`", packages):
            m = re.fullmatch(r"stir\.(\w+)|stir/(__\w+__)\.py", cell_name)
            if m:  # train.py and evaluate.py are no part of the package
                out[m.group(1) or m.group(2)] = int(layer)
    return out


def allowed(text: str) -> Dict[str, Set[str]]:
    """{package: the other packages it may import}, from ``| package | may import from stir | why |``.

    The middle column is a comma-separated list of items: ``nothing``, a package (`x`), ``layer N``
    or ``layers N-M`` (every package of those layers, from the layer table).
    """
    layer_of = layers(text)
    out: Dict[str, Set[str]] = {}
    for packages, may, _why in _rows(text, ["package", "may import from stir"]):
        targets: Set[str] = set()
        for item in (i.strip() for i in may.split(",")):
            if item == "nothing":
                continue
            span = re.fullmatch(r"layers? (\d+)(?:-(\d+))?", item)
            if span:
                low, high = int(span.group(1)), int(span.group(2) or span.group(1))
                targets |= {p for p, layer in layer_of.items() if low <= layer <= high}
            elif re.fullmatch(r"`\w+`", item):
                targets.add(item.strip("`"))
            else:
                raise AssertionError(f"docs/architecture.md: {may!r} ({packages}): say 'nothing', `package`, "
                                     "'layer N' or 'layers N-M'")
        for package in _names(packages):
            assert package not in out, f"docs/architecture.md: {package} has two rows"
            out[package] = targets - {package}
    unknown = {t for ts in out.values() for t in ts} - set(layer_of)
    assert not unknown, f"docs/architecture.md allows packages that the layer table does not list: {unknown}"
    return out


# ---------------------------------------------------------------------------------------------
# The imports, read from the source


def module_name(root: Path, path: Path) -> Tuple[str, ...]:
    """("stir", "measure", "pair") for stir/measure/pair.py; ("stir", "measure") for its __init__.py."""
    parts = (root.name,) + path.relative_to(root).with_suffix("").parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def imported_modules(root: Path, path: Path) -> Iterator[Tuple[int, str]]:
    """(line, dotted module) of every module ``path`` imports, anywhere in it, relative ones resolved.

    ``from stir import x, y`` yields ``stir.x`` and ``stir.y`` (a name of a package is that package;
    a name that is no module, such as ``__version__``, falls on ``stir`` itself).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    name = module_name(root, path)
    package = name if path.name == "__init__.py" else name[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level > len(package):
                    raise AssertionError(f"{path}:{node.lineno}: relative import above the package")
                base = ".".join(package[: len(package) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if module == root.name:
                for alias in node.names:
                    is_module = (root / alias.name).is_dir() or (root / f"{alias.name}.py").is_file()
                    yield node.lineno, f"{module}.{alias.name}" if is_module else module
            else:
                yield node.lineno, module


def package_of(root: Path, path: Path) -> str:
    """The top-level package (or module) of ``root`` that ``path`` belongs to."""
    rel = path.relative_to(root)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def violations(root: Path, rule: Dict[str, Set[str]]) -> List[str]:
    """Every import in the package at ``root`` (a directory named like the package) that ``rule`` forbids."""
    wrong = []
    top = {package_of(root, p) for p in root.rglob("*.py")} | set(rule)
    for path in sorted(root.rglob("*.py")):
        package = package_of(root, path)
        rel = path.relative_to(root.parent)
        if package not in rule:
            wrong.append(f"{rel}: its package {package} has no row in docs/architecture.md")
            continue
        for line, module in imported_modules(root, path):
            parts = module.split(".")
            if parts[0] != root.name or len(parts) == 1:
                continue
            target = parts[1]
            if target == package or (package in ROOT_MODULES and target in ROOT_MODULES):
                continue
            if target not in top:
                wrong.append(f"{rel}:{line} imports {module}, which does not exist")
            elif target not in rule[package]:
                wrong.append(f"{rel}:{line} ({package}) imports {module}: docs/architecture.md does not allow "
                             f"{package} -> {target}")
    return wrong


def test_every_import_is_allowed_by_the_architecture_table():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    wrong = violations(STIR, allowed(text))
    assert not wrong, "\n".join(wrong)


def test_every_package_is_in_both_tables():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    present = {package_of(STIR, p) for p in STIR.rglob("*.py")}
    assert present == set(layers(text)), "the layer table of docs/architecture.md and stir/ differ"
    assert present == set(allowed(text)), "the table 'What each package may import' and stir/ differ"


def test_no_package_imports_one_above_it():
    """The second table agrees with the first: nothing is allowed to import its own layer's or a higher one's
    packages except where the table names them."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    layer_of = layers(text)
    upward = [(p, t) for p, ts in allowed(text).items() for t in ts if layer_of[t] > layer_of[p]]
    assert not upward, upward


# ---------------------------------------------------------------------------------------------
# The guard itself: a forbidden import of each form is found

RULE = {"low": set(), "peer": set(), "high": {"low"}, "__init__": {"low", "peer", "high"}}


def _tree(tmp_path: Path, files: Dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, source in {"__init__.py": "", "low/__init__.py": "", "low/a.py": "X = 1\n", "peer/__init__.py": "",
                        "peer/b.py": "", "high/__init__.py": "", "high/sub/__init__.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(source)
    return root


def test_allowed_imports_pass(tmp_path):
    root = _tree(tmp_path, {"high/c.py": "import pkg.low.a\nfrom pkg.low import a\nfrom pkg import low\n"
                                         "from . import sub\nfrom .sub import x\nfrom ..low import a\n",
                            "high/sub/d.py": "from ... import low\nfrom ..c import y\n"})
    assert violations(root, RULE) == []


@pytest.mark.parametrize("source", [
    "import pkg.high\n",  # absolute
    "import pkg.high.sub as s\n",
    "from pkg.high.sub import x\n",
    "from pkg import high\n",  # a package by name
    "from pkg import a, high\n",
    "from ..high import x\n",  # relative
    "from .. import high\n",
    "def f():\n    from pkg.high import x\n",  # lazy, in a function
    "class C:\n    def f(self):\n        from ..high.sub import x\n",
    "from pkg import peer\n",  # the same layer, not allowed by the table
])
def test_a_forbidden_import_of_each_form_is_found(tmp_path, source):
    root = _tree(tmp_path, {"low/planted.py": source})
    wrong = violations(root, RULE)
    assert len(wrong) == 1 and "pkg/low/planted.py" in wrong[0], wrong


def test_a_planted_import_in_the_real_tree_is_found(tmp_path):
    """``from stir import experiments`` in stir/measure/pair.py (the issue's example) fails the real rule."""
    import shutil

    copy = tmp_path / "stir"
    shutil.copytree(STIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    rule = allowed(ARCHITECTURE.read_text(encoding="utf-8"))
    assert violations(copy, rule) == violations(STIR, rule)
    plants = {"measure/pair.py": "from stir import experiments\n", "models/taps.py": "from .. import zoo\n",
              "similarity/cka.py": "def f():\n    import stir.store\n", "config/help.py": "from stir.cli import Command\n"}
    for rel, source in plants.items():
        path = copy / rel
        path.write_text(path.read_text(encoding="utf-8") + "\n" + source)
    found = "\n".join(violations(copy, rule))
    for rel in plants:
        assert f"stir/{rel}" in found, (rel, found)


def test_unknown_package_and_missing_row_are_reported(tmp_path):
    root = _tree(tmp_path, {"low/x.py": "from pkg.nowhere import y\n", "extra.py": ""})
    wrong = violations(root, RULE)
    assert any("pkg.nowhere, which does not exist" in w for w in wrong)
    assert any("pkg/extra.py: its package extra has no row" in w for w in wrong)


def test_reporting_renders_plain_data():
    """reporting knows no measurement, model or experiment type: it writes what it is handed."""
    rule = allowed(ARCHITECTURE.read_text(encoding="utf-8"))
    assert not rule["reporting"] & {"measure", "zoo", "experiments", "inversion", "models", "store"}
