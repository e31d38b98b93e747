"""Execute the tutorial notebooks and store their outputs, which the documentation site shows.

    python docs/tutorials/execute.py            # every notebook here, outputs written in place
    python docs/tutorials/execute.py NAME.ipynb # one

Each notebook runs top to bottom in a fresh kernel of this Python (nbclient), with this checkout's
``stir`` first on the path, from its own folder (the notebooks change to the repository root
themselves). A failing cell stops it with the cell's error and leaves the stored file as it was.
tests/test_tutorials.py runs the same function on every notebook (in .ci/run).
"""
from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import List

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CELL_TIMEOUT = 600  # seconds; the longest cell (your_own_model's inversion) takes about a minute on one CPU thread

log = logging.getLogger("tutorials")


def notebooks() -> List[Path]:
    return sorted(HERE.glob("*.ipynb"))


def execute(path: Path, timeout: int = CELL_TIMEOUT) -> nbformat.NotebookNode:
    """The notebook at ``path`` with every cell executed (a ``CellExecutionError`` at the first that
    fails); the file is not written."""
    book = nbformat.read(path, as_version=4)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    client = NotebookClient(book, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    client.execute(env=env)  # passed to the kernel manager: the kernel imports this checkout's stir
    return book


def main(argv: List[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    paths = [HERE / a for a in argv] or notebooks()
    for path in paths:
        start = time.perf_counter()
        book = execute(path)
        nbformat.write(book, path)
        log.info("%s executed in %.0f s, outputs stored", path.relative_to(REPO), time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
