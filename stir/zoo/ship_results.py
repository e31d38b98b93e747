"""Ship a results store's entries into the repository (``zoo/store``), beside the models they measured:

    python -m stir.zoo.ship_results results/store

An evaluation on a fresh clone then serves those measurements from the shipped store instead of
computing them (``stir.store.ResultStore``: ``zoo.shipped_results=true``, the default; ``false``
computes everything here). Entries are keyed by content (the models' weights and code, the images,
every setting that fixes the result), so a shipped entry is served only for the measurement it holds.

Each entry is copied unchanged (its provenance: versions, timestamp, record). Nothing is rewritten: an
entry whose file exists is left as it is (a recomputation elsewhere may differ by float rounding: the
first shipped value stays, and the count of differing ones is said). Entries of another store version,
and files that do not parse, are refused with their count. A bad input is one line and exit status 2.
"""
from __future__ import annotations

import argparse
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Optional, Sequence

from stir import atomic
from stir.cli import EXPECTED_ERRORS, one_line_errors
from stir.store import STORE_VERSION, canonical_json
from stir.zoo.shipped import DEFAULT_DIR

log = logging.getLogger(__name__)
STORE = "store"  # zoo/store: the shipped results


@dataclass
class Shipped:
    """What one ``ship_results`` did, per kind of measurement."""

    added: Dict[str, int] = field(default_factory=dict)
    present: Dict[str, int] = field(default_factory=dict)  # the same entry is shipped already
    differing: Dict[str, int] = field(default_factory=dict)  # another entry of the key is shipped: kept
    refused: Dict[str, int] = field(default_factory=dict)  # unparsable, foreign or of another store version

    def line(self) -> str:
        kinds = sorted(set(self.added) | set(self.present) | set(self.differing) | set(self.refused))
        return "; ".join(f"{k}: {self.added.get(k, 0)} added, {self.present.get(k, 0)} already shipped"
                         + (f", {self.differing[k]} kept as first shipped" if self.differing.get(k) else "")
                         + (f", {self.refused[k]} refused" if self.refused.get(k) else "") for k in kinds) or "nothing to ship"


def _valid(entry: object, kind: str, key: str) -> bool:
    return (isinstance(entry, dict) and entry.get("kind") == kind and entry.get("key") == key
            and entry.get("store_version") == STORE_VERSION and isinstance(entry.get("result"), dict))


def ship_results(store: Path, folder: Path = DEFAULT_DIR / STORE) -> Shipped:
    """Copy every valid entry of the results store ``store`` into the shipped store ``folder``."""
    store, folder = Path(store), Path(folder)
    if not store.is_dir():
        raise ValueError(f"{store} is not a results store folder (an evaluation's out_dir/store)")
    marker = store / "VERSION"
    version = marker.read_text().strip() if marker.is_file() else None
    if version != str(STORE_VERSION):
        raise ValueError(f"{store} is a store of version {version}, not {STORE_VERSION}: rerun its evaluation "
                         "with this checkout, then ship that store")
    done = Shipped()
    for kind_dir in sorted(p for p in store.iterdir() if p.is_dir() and not p.name.startswith(".")):
        kind = kind_dir.name
        for path in sorted(kind_dir.glob("*.json")):
            try:
                entry = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                entry = None
            if not _valid(entry, kind, path.stem):
                done.refused[kind] = done.refused.get(kind, 0) + 1
                continue
            target = folder / kind / path.name
            if target.exists():
                shipped = json.loads(target.read_text(encoding="utf-8")).get("result")
                same = canonical_json(shipped) == canonical_json(entry["result"])  # NaN fields compare equal
                counts = done.present if same else done.differing
                counts[kind] = counts.get(kind, 0) + 1
                continue
            atomic.write_json(target, entry)
            done.added[kind] = done.added.get(kind, 0) + 1
    if sum(done.added.values()) and not (folder / "VERSION").is_file():
        atomic.write_text(folder / "VERSION", f"{STORE_VERSION}\n")
    return done


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m stir.zoo.ship_results", description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path, help="a results store: an evaluation's out_dir/store")
    parser.add_argument("--into", type=Path, default=DEFAULT_DIR / STORE, help="the shipped store (default: zoo/store)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with one_line_errors(*EXPECTED_ERRORS):
        done = ship_results(args.store, args.into)
        log.info("shipped into %s: %s", args.into, done.line())


if __name__ == "__main__":
    main()
