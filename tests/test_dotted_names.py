"""Every ``stir.x.y`` that the code, the configs and the docs name exists (a module, or a name defined in one).

Read without importing anything: the longest prefix that is a module file or package of stir/, then
the next part must be a submodule or a name the module defines (def, class, assignment, import).
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from functools import lru_cache
from pathlib import Path
from typing import List, Optional, Set

REPO = Path(__file__).resolve().parents[1]
DOTTED = re.compile(r"(?<![\w./-])stir(?:\.[A-Za-z_]\w*)+")


def _module_file(parts: List[str]) -> Optional[Path]:
    path = REPO.joinpath(*parts)
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return None


@lru_cache(maxsize=None)
def _defined(file: Path) -> Set[str]:
    out: Set[str] = set()
    tree = ast.parse(file.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and file.name == "__init__.py":
            out.add(node.value)  # the lazy re-exports' table
    return out


def missing(name: str) -> bool:
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        file = _module_file(parts[:end])
        if file is not None:
            return end < len(parts) and parts[end] not in _defined(file)
    return True


def _files():
    yield from (REPO / "stir").rglob("*.py")
    yield from (REPO / "configs").rglob("*.yaml")
    yield from (REPO / "docs").rglob("*.md")
    yield from REPO.glob("*.py")
    yield from (p for p in REPO.glob("*.md") if p.name != "CHANGELOG.md")  # the changelog names what was removed


def _lines(file: Path):
    """(line, text) where a dotted name is prose: the whole of a YAML or Markdown file, the strings and
    comments of a Python one (its code is checked by importing it; ``stir`` may be a variable there)."""
    text = file.read_text(encoding="utf-8")
    if file.suffix != ".py":
        yield from enumerate(text.splitlines(), 1)
        return
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.STRING, tokenize.COMMENT):
            for offset, line in enumerate(tok.string.splitlines()):
                yield tok.start[0] + offset, line


def test_every_dotted_stir_name_exists():
    wrong = []
    for file in _files():
        for lineno, line in _lines(file):
            for m in DOTTED.finditer(line):
                name = m.group(0).rstrip(".")
                if missing(name):
                    wrong.append(f"{file.relative_to(REPO)}:{lineno}: {name}")
    assert not wrong, "\n".join(wrong)


def test_a_stale_name_is_found():
    assert missing("stir.measure.keys") and missing("stir.config.evaluate_schema.EvaluateConfig")
    assert not missing("stir.measure.plan.direction_parts") and not missing("stir.evaluate_pair")
