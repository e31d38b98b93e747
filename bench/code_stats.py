"""Lines of code per package and the functions longer than a threshold: how readable a tree is.

    python bench/code_stats.py [--root stir] [--over 60]

Lines are non-blank lines of ``.py`` files per top-level subpackage of ``--root`` (docstrings and
comments included: they are read too). A function's length is from its ``def`` line to its last
line (``ast``), nested functions counted in their own right as well.
"""
from __future__ import annotations

import argparse
import ast
import logging
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Tuple

log = logging.getLogger("code_stats")


def lines_per_package(root: Path) -> Dict[str, int]:
    """{package (first folder under root, or the module's own name): non-blank lines}."""
    out: Dict[str, int] = defaultdict(int)
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        package = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        out[package] += sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return dict(sorted(out.items()))


def long_functions(root: Path, over: int) -> List[Tuple[int, str]]:
    """[(lines, "file:function")] of every function longer than ``over`` lines, longest first."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > over:
                    found.append((length, f"{path.relative_to(root.parent)}:{node.name}"))
    return sorted(found, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="stir")
    parser.add_argument("--over", type=int, default=60)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    root = Path(args.root)
    packages = lines_per_package(root)
    log.info("| package | lines |\n|---|---|\n%s\n| total | %d |",
             "\n".join(f"| {p} | {n} |" for p, n in packages.items()), sum(packages.values()))
    functions = long_functions(root, args.over)
    log.info("\n%d functions over %d lines:\n%s", len(functions), args.over,
             "\n".join(f"  {n:4d}  {name}" for n, name in functions))


if __name__ == "__main__":
    main()
