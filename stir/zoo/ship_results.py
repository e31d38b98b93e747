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

The store's behaviour fingerprints (``<store>/fingerprints``, ``stir.models.behaviour``) are shipped
beside its results (``zoo/fingerprints``): for each model, the first behaviour seen at each probe key
the shipped file lacks (a key of the run's own images, ``run_probe_key``: a fresh clone then checks a
shipped model on those images before serving it, not trusts its first use). A key shipped already is
never changed.

What is written is pinned in the zoo folder's manifest (``stir.manifest``: ``zoo/MANIFEST.sha256``, the
other pins unchanged); an evaluation serves no shipped file that differs from its pin.

One exception, asked for by name: ``--supersede-older-readings`` replaces a shipped entry whose result
lacks fields that the new entry of the same key has and has none the new one lacks (a measurement
stored before a reading was added, e.g. the chance-corrected STIR of issue 31, measured again). The
count is said; the replaced file stays in git history.
"""
from __future__ import annotations

import argparse
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Optional, Sequence, Set

from stir import atomic, manifest
from stir.cli import EXPECTED_ERRORS, one_line_errors
from stir.store import STORE_VERSION, canonical_json
from stir.zoo.shipped import DEFAULT_DIR

log = logging.getLogger(__name__)
STORE = "store"  # zoo/store: the shipped results
FINGERPRINTS = "fingerprints"  # zoo/fingerprints: what the shipped models computed (stir.models.behaviour)


@dataclass
class Shipped:
    """What one ``ship_results`` did, per kind of measurement."""

    added: Dict[str, int] = field(default_factory=dict)
    present: Dict[str, int] = field(default_factory=dict)  # the same entry is shipped already
    differing: Dict[str, int] = field(default_factory=dict)  # another entry of the key is shipped: kept
    refused: Dict[str, int] = field(default_factory=dict)  # unparsable, foreign or of another store version
    superseded: Dict[str, int] = field(default_factory=dict)  # replaced by the same key with more readings

    def line(self) -> str:
        kinds = sorted(set(self.added) | set(self.present) | set(self.differing) | set(self.refused) | set(self.superseded))
        return "; ".join(f"{k}: {self.added.get(k, 0)} added, {self.present.get(k, 0)} already shipped"
                         + (f", {self.superseded[k]} superseded (more readings)" if self.superseded.get(k) else "")
                         + (f", {self.differing[k]} kept as first shipped" if self.differing.get(k) else "")
                         + (f", {self.refused[k]} refused" if self.refused.get(k) else "") for k in kinds) or "nothing to ship"


def _valid(entry: object, kind: str, key: str) -> bool:
    return (isinstance(entry, dict) and entry.get("kind") == kind and entry.get("key") == key
            and entry.get("store_version") == STORE_VERSION and isinstance(entry.get("result"), dict))


def field_paths(obj: object, prefix: str = "") -> Set[str]:
    """Every key path of a JSON value ("calibration.stir.floor"; list items share "[]")."""
    if isinstance(obj, dict):
        out = {prefix} if prefix else set()
        for k, v in obj.items():
            out |= field_paths(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    if isinstance(obj, list):
        return set().union({prefix}, *(field_paths(v, f"{prefix}[]") for v in obj))
    return {prefix}


def has_more_readings(new: Dict[str, object], old: Dict[str, object]) -> bool:
    """Whether ``new`` holds every field path of ``old`` and at least one more."""
    a, b = field_paths(new), field_paths(old)
    return b < a


def ship_results(store: Path, folder: Path = DEFAULT_DIR / STORE, supersede_older_readings: bool = False) -> Shipped:
    """Copy every valid entry of the results store ``store`` into the shipped store ``folder``
    (``supersede_older_readings``: the module docstring's one exception)."""
    store, folder = Path(store), Path(folder)
    if not store.is_dir():
        raise ValueError(f"{store} is not a results store folder (an evaluation's out_dir/store)")
    marker = store / "VERSION"
    version = marker.read_text().strip() if marker.is_file() else None
    if version != str(STORE_VERSION):
        raise ValueError(f"{store} is a store of version {version}, not {STORE_VERSION}: rerun its evaluation "
                         "with this checkout, then ship that store")
    done = Shipped()
    written = []
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
                if not same and supersede_older_readings and has_more_readings(entry["result"], shipped):
                    atomic.write_json(target, entry)
                    written.append(target)
                    done.superseded[kind] = done.superseded.get(kind, 0) + 1
                    continue
                counts = done.present if same else done.differing
                counts[kind] = counts.get(kind, 0) + 1
                continue
            atomic.write_json(target, entry)
            written.append(target)
            done.added[kind] = done.added.get(kind, 0) + 1
    if sum(done.added.values()) and not (folder / "VERSION").is_file():
        atomic.write_text(folder / "VERSION", f"{STORE_VERSION}\n")
        written.append(folder / "VERSION")
    if written:  # what was shipped is pinned (stir.manifest: <zoo>/MANIFEST.sha256), nothing else re-pinned
        manifest.pin(folder.parent, written)
    return done


def ship_fingerprints(store: Path, folder: Path = DEFAULT_DIR / FINGERPRINTS) -> Dict[str, int]:
    """Add to the shipped fingerprints ``folder`` each probe key of the store's fingerprint files that the
    shipped file of the same model lacks, with its first behaviour (variant 0: what the results were
    measured with); {"files": files written, "keys": keys added}. Pinned like the results."""
    from stir.atomic import torch_save
    from stir.models.behaviour import INDEX
    from stir.untrusted import load_plain

    local = Path(store) / FINGERPRINTS
    if not (local / INDEX).is_file():
        raise ValueError(f"{local / INDEX} is missing: ship a store whose fingerprints are listed (python -m "
                         f"stir.store reindex {store} lists those of an older one)")
    written, keys = [], 0
    for static in (local / INDEX).read_text().split():
        mine = load_plain(local / f"{static}.pt")
        target = Path(folder) / f"{static}.pt"
        shipped = load_plain(target) if target.is_file() else {}
        new = {key: variants[:1] for key, variants in mine.items() if key not in shipped and variants}
        if new:
            target.parent.mkdir(parents=True, exist_ok=True)
            torch_save({**shipped, **new}, target)
            written.append(target)
            keys += len(new)
    if written:
        manifest.pin(Path(folder).parent, written)
    return {"files": len(written), "keys": keys}


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m stir.zoo.ship_results", description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path, help="a results store: an evaluation's out_dir/store")
    parser.add_argument("--into", type=Path, default=DEFAULT_DIR / STORE, help="the shipped store (default: zoo/store)")
    parser.add_argument("--supersede-older-readings", action="store_true",
                        help="replace a shipped entry whose result lacks readings the new entry of its key has")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with one_line_errors(*EXPECTED_ERRORS):
        done = ship_results(args.store, args.into, args.supersede_older_readings)
        log.info("shipped into %s: %s", args.into, done.line())
        prints = ship_fingerprints(args.store, args.into.parent / FINGERPRINTS)
        log.info("shipped into %s: %d probe key(s) of %d model(s)", args.into.parent / FINGERPRINTS, prints["keys"],
                 prints["files"])


if __name__ == "__main__":
    main()
