"""Execute the tutorial notebooks: by default into copies, with --update into the stored files, whose
outputs the documentation site shows.

    python docs/tutorials/execute.py                # every notebook here, executed copies in build/tutorials/
    python docs/tutorials/execute.py NAME.ipynb     # one
    python docs/tutorials/execute.py --out DIR      # the copies in DIR
    python docs/tutorials/execute.py --update       # the outputs stored in the tracked notebooks, in place

Each notebook runs top to bottom in a fresh kernel of this Python (nbclient), with this checkout's
``stir`` first on the path, from its own folder (the notebooks change to the repository root
themselves). They read the CIFAR-10 copy that STIR_CIFAR10 names (docs/tutorials/index.md). A failing
cell stops it with the cell's error and writes nothing. Copies by default, so that trying the notebooks
leaves the checkout as it was (build/ is ignored by git); --update is for a change that should show on
the site. tests/test_tutorials.py runs the same function on every notebook (in .ci/run).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import List, Optional

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
OUT = REPO / "build" / "tutorials"  # ignored by git (.gitignore)
CELL_TIMEOUT = 600  # seconds; the longest cell (your_own_model's inversion) takes about a minute on one CPU thread

log = logging.getLogger("tutorials")


def notebooks() -> List[Path]:
    return sorted(HERE.glob("*.ipynb"))


def execute(path: Path, timeout: int = CELL_TIMEOUT) -> nbformat.NotebookNode:
    """The notebook at ``path`` with every cell executed (a ``CellExecutionError`` at the first that
    fails); the file is not written."""
    book = nbformat.read(path, as_version=4)
    client = NotebookClient(book, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    client.execute(env=kernel_env())  # passed to the kernel manager
    return book


def kernel_env() -> dict:
    """This process's environment, with this checkout's ``stir`` first on PYTHONPATH and a relative
    STIR_CIFAR10 made absolute from where this runs (the kernel starts in the notebook's folder)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    if os.environ.get("STIR_CIFAR10"):
        env["STIR_CIFAR10"] = os.path.abspath(os.path.expanduser(os.environ["STIR_CIFAR10"]))
    return env


def destination(path: Path, out: Optional[Path]) -> Path:
    """Where the executed ``path`` is written: ``out/NAME.ipynb``, or ``path`` itself when ``out`` is None
    (--update). A copy is never the notebook itself: the stored outputs change only with --update."""
    if out is None:
        return path
    target = out / path.name
    if target.resolve() == path.resolve():
        raise ValueError(f"--out {out} is the notebooks' own folder: give another, or --update to store the outputs")
    return target


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python docs/tutorials/execute.py", description=__doc__.split("\n\n", 1)[0],
        epilog="The notebooks read the CIFAR-10 copy named by the environment variable STIR_CIFAR10 "
               "(default: ../shared/data/cifar10-jpg.tar.gz beside the clone).")
    p.add_argument("names", nargs="*", metavar="NAME.ipynb", help="notebooks of docs/tutorials (default: every one)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, default=OUT, metavar="DIR",
                       help=f"folder for the executed copies (default: {os.path.relpath(OUT, REPO)}/, ignored by git)")
    where.add_argument("--update", action="store_true",
                       help="write the outputs into the tracked notebooks in place (what the site shows)")
    return p


def main(argv: List[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    p = parser()
    args = p.parse_args(argv)
    paths = [HERE / a for a in args.names] or notebooks()
    for path in paths:
        if not path.is_file():
            p.error(f"{path} is not a notebook; the tutorials are {', '.join(n.name for n in notebooks())}")
    out = None if args.update else args.out
    try:
        targets = [destination(path, out) for path in paths]
    except ValueError as err:
        p.error(str(err))
    for path, target in zip(paths, targets):
        start = time.perf_counter()
        book = execute(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(book, target)
        log.info("%s executed in %.0f s, %s", path.name, time.perf_counter() - start,
                 "outputs stored in place" if target == path else f"copy written to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
