"""Check or write the manifest that pins the shipped data (``stir.manifest``):

    python -m stir.zoo.manifest            check zoo/MANIFEST.sha256 against zoo/models and zoo/store
    python -m stir.zoo.manifest --write    pin every file of zoo/models and zoo/store as it is now

Write it after shipping by hand or merging branches that ship (``stir.zoo.ship`` and
``stir.zoo.ship_results`` pin what they write themselves). A failed check is one line naming the
first file that differs, and exit status 2.
"""
from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Optional, Sequence

from stir import manifest
from stir.cli import EXPECTED_ERRORS, one_line_errors
from stir.zoo.shipped import DEFAULT_DIR

log = logging.getLogger(__name__)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m stir.zoo.manifest", description=__doc__.split("\n\n")[0])
    parser.add_argument("zoo_dir", type=Path, nargs="?", default=DEFAULT_DIR, help="the shipped zoo folder (default: zoo/)")
    parser.add_argument("--write", action="store_true", help="pin every file as it is now")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with one_line_errors(*EXPECTED_ERRORS):
        if args.write:
            path = manifest.write(args.zoo_dir)
            log.info("%s pins %d files", path, len(manifest.read(args.zoo_dir) or {}))
            return
        for part in manifest.PARTS:
            manifest.verify(args.zoo_dir, part)
        log.info("%s: every file of %s is the pinned one", args.zoo_dir / manifest.MANIFEST,
                 ", ".join(f"{args.zoo_dir.name}/{p}" for p in manifest.PARTS))


if __name__ == "__main__":
    main()
