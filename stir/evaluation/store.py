"""A results store: one JSON file per finished measurement, written atomically the moment it is done.

Layout: ``<root>/<kind>/<key>.json`` where ``kind`` names the unit of work ("direction",
"similarity") and ``key`` is the sha256 of a canonical JSON of everything that fixes the result
(``ResultStore.key``). Each file holds::

    {"kind", "key", "store_version", "result": <the caller's payload>,
     "versions": library_versions(), "timestamp": ISO-8601 UTC, "record": <caller's provenance>}

A run killed mid-experiment leaves every finished measurement on disk and no partial file
(``stir.atomic.write_json``: temp file + rename), so the rerun recomputes only what is missing. A
file that fails to parse or to validate is logged, moved aside to ``<key>.json.corrupt`` and
treated as missing: recomputed, never trusted.

Two processes that need the same missing result do not both compute it: ``ResultStore.lock(kind,
key)`` is a file lock (``<root>/.locks/<kind>/<key>.lock``) that the second waits on, then finds
the first one's entry.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Union

from filelock import FileLock, Timeout

from stir.atomic import write_json
from stir.provenance import library_versions

log = logging.getLogger(__name__)

# Bump when what a stored result means changes (definitions, fields, algorithm). 2: the published
# inversion by default, difficulty walked from x, the convergence record, NaN for failed inversions.
STORE_VERSION = 2

_REQUIRED = ("kind", "key", "store_version", "result", "versions", "timestamp")


def canonical_json(obj: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, tuples as lists."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=list)


class ResultStore:
    """Finished measurements under ``root``; ``hits`` / ``misses`` count ``get`` outcomes."""

    def __init__(self, root: Union[str, os.PathLike]):
        self.root = Path(root)
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(**parts: Any) -> str:
        """sha256 hex of the canonical JSON of ``parts`` plus ``STORE_VERSION``.

        Callers pass everything that fixes the result (model identities, taps, measure, image-set
        hash, n, k, iri kind, result-relevant inversion settings, seed base); ``stir.evaluation.pair``
        builds these parts.
        """
        return hashlib.sha256(canonical_json({"store_version": STORE_VERSION, **parts}).encode()).hexdigest()

    def path(self, kind: str, key: str) -> Path:
        return self.root / kind / f"{key}.json"

    def get(self, kind: str, key: str, validate: Optional[Callable[[Dict[str, Any]], Any]] = None,
            recheck: bool = False) -> Optional[Dict[str, Any]]:
        """The stored entry (a dict with ``result`` and provenance), or None when there is none.

        ``validate(entry["result"])`` (e.g. ``DirectionResult.from_dict``) runs on a found entry;
        if it raises, or the file does not parse or lacks a required field, the file is moved aside
        and None is returned (counted as a miss).

        ``recheck=True``: the lookup under ``lock`` after a counted miss; a found entry (stored by
        another process meanwhile) turns that miss into a hit, a missing one counts nothing.
        """
        entry = self._load(self.path(kind, key), kind, key, validate)
        if entry is None:
            self.misses += 0 if recheck else 1
        else:
            self.hits += 1
            self.misses -= 1 if recheck else 0
            log.info("result store hit: %s/%s", kind, key)
        return entry

    def put(self, kind: str, key: str, result: Dict[str, Any], record: Optional[Dict[str, Any]] = None) -> Path:
        """Write ``result`` with provenance (versions, timestamp, ``record``) atomically; the path."""
        entry = {
            "kind": kind,
            "key": key,
            "store_version": STORE_VERSION,
            "result": result,
            "versions": library_versions(),
            "timestamp": datetime.now(timezone.utc).isoformat(),
            "record": record or {},
        }
        path = self.path(kind, key)
        write_json(path, entry)
        log.info("result stored: %s", path)
        return path

    @contextmanager
    def lock(self, kind: str, key: str) -> Iterator[None]:
        """Hold the lock of one measurement: look up again inside, compute and ``put`` only if still missing."""
        path = self.root / ".locks" / kind / f"{key}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(path))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            log.info("another process is computing %s/%s; waiting for its result", kind, key[:12])
            lock.acquire()
        try:
            yield
        finally:
            lock.release()

    def entries(self, kind: str, validate: Optional[Callable[[Dict[str, Any]], Any]] = None) -> List[Dict[str, Any]]:
        """Every valid entry of ``kind``, in file-name order; invalid files are moved aside."""
        folder = self.root / kind
        if not folder.is_dir():
            return []
        out = []
        for path in sorted(folder.glob("*.json")):
            entry = self._load(path, kind, path.stem, validate)
            if entry is not None:
                out.append(entry)
        return out

    def _load(self, path: Path, kind: str, key: str, validate) -> Optional[Dict[str, Any]]:
        if not path.exists():
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(entry, dict):
                raise ValueError("not a JSON object")
            missing = [name for name in _REQUIRED if name not in entry]
            if missing:
                raise ValueError(f"missing fields {missing}")
            if entry["kind"] != kind or entry["key"] != key:
                raise ValueError(f"holds {entry['kind']}/{entry['key']}, not {kind}/{key}")
            if entry["store_version"] != STORE_VERSION:
                raise ValueError(f"store version {entry['store_version']}, expected {STORE_VERSION}")
            if not isinstance(entry["result"], dict):
                raise ValueError("result is not a JSON object")
            if validate is not None:
                validate(entry["result"])
        except Exception as err:  # truncated, corrupt, foreign, outdated: recompute, never trust
            aside = path.with_name(path.name + ".corrupt")
            log.warning("result store entry %s is unusable (%s: %s); moved to %s, recomputing",
                        path, type(err).__name__, err, aside.name)
            os.replace(path, aside)
            return None
        return entry
