"""A results store: one JSON file per finished measurement, written atomically the moment it is done.

Layout: ``<root>/<kind>/<key>.json`` where ``kind`` names the unit of work ("direction",
"similarity") and ``key`` is the sha256 of a canonical JSON of everything that fixes the result
(``ResultStore.key``). Each file holds::

    {"kind", "key", "store_version", "result": <the caller's payload>,
     "versions": library_versions(), "timestamp": ISO-8601 UTC, "record": <caller's provenance>}

A run killed mid-experiment leaves every finished measurement on disk and no partial file
(``stir.atomic.write_json``: temp file + rename), so the rerun recomputes only what is missing. A
file that fails to parse or to validate (its parser checks the entry's own consistency: a value
inside its interval, a mean equal to the mean of its values, no missing number) is logged in one
line, moved aside to ``<key>.json.corrupt`` (``.corrupt-2``, ... beside an earlier one, never
replacing it) and treated as missing: recomputed, never trusted.

``cached(kind, parts, compute, parse)`` is the one way results enter the store, for every kind of
measurement: the key is derived from ``parts``; a stored entry is parsed and returned; otherwise
the key's file lock (``<root>/.locks/<kind>/<key>.lock``) is taken, the store looked at again (another
process may have stored it meanwhile: then that entry is returned) and only then is ``compute()``
called and its result stored. Two processes that need the same missing result therefore compute
it once: the second waits on the lock, then reads the first one's entry.

**Shipped results.** ``shipped`` names a read-only store of the same layout, committed with the
models it measured (``zoo/store``, filled by ``python -m stir.zoo.ship_results``): on a miss, an
entry of the same key there is copied, unchanged (its provenance says where and when it was
computed), into this store and served (``shipped_hits``). Its keys are content hashes of the models
(weights and code), the images and every setting that fixes the result, so a shipped entry is served
only for the very measurement it holds; an unusable shipped entry is logged and ignored, never moved.
Before the first shipped entry is served, every file of the shipped store is checked against the
manifest that pins it (``stir.manifest``: ``<shipped>/../MANIFEST.sha256``): an edited, unlisted or
missing file refuses the evaluation (``ManifestError``, one line naming the file and the fix).
A copy of a shipped entry in this store is compared with the pinned shipped entry each time it is
served; one that differs (edited here) is moved aside and the shipped one served again.
Without it (``zoo.shipped_results=false``) everything is computed here.

**A store written before its fingerprints were listed** (no ``fingerprints/INDEX``) is refused until it
is migrated: ``python -m stir.store reindex OUT_DIR`` writes the INDEX from the fingerprint files
there, only when every file is intact and every model identity its results name is accounted for (a
fingerprint file of its own, or a behaviour variant of one; the shipped fingerprints count).
"""
from __future__ import annotations

import hashlib
import json
import logging
import argparse
import os
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, TypeVar, Union

from filelock import FileLock, Timeout

from stir import manifest
from stir.atomic import move_aside as set_aside, write_json, write_text as atomic_write_text
from stir.models.behaviour import INDEX, Fingerprints, variant_identities
from stir.provenance import library_versions

log = logging.getLogger(__name__)

# Bump when what a stored result means changes (definitions, fields, algorithm, keys). 2: the published
# inversion by default, difficulty walked from x, the convergence record, NaN for failed inversions.
# 3: models keyed by one content hash of their state dict (stir.models.identity), inversion settings
# by InversionConfig.key_settings (the inversion cache's own description), results with calibration.
# 4: models keyed by what they compute, weights and code (stir.models.identity, issue 30): a version-3
# store may hold one model's results under the identity of another with the same weights.
STORE_VERSION = 4

_REQUIRED = ("kind", "key", "store_version", "result", "versions", "timestamp")

R = TypeVar("R")
FINGERPRINTS = "fingerprints"  # <root>/fingerprints: what each model computed (stir.models.behaviour)


class UnsafeStoreFolder(ValueError):
    """A folder of the results store (or the inversion cache) is a symbolic link."""


class NotStored(LookupError):
    """A read-only store (``ResultStore.as_read_only``) was asked for a measurement it does not hold."""

    def __init__(self, kind: str, key: str):
        super().__init__(f"{kind}/{key[:12]} is not in the results store (read-only: nothing is measured)")
        self.kind, self.key = kind, key

# What each store version changed, for the message that explains why an older store is not reused.
VERSION_CHANGES = {3: "models are keyed by the content hash of their state dict, inversion settings by the "
                      "inversion cache's own description, and every STIR carries its floor, ceiling and interval",
                  4: "models are keyed by what they compute (their weights and their code), not by their weights "
                     "alone: two models with the same weights and another forward shared results before"}


def canonical_json(obj: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, tuples as lists."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=list)


class ResultStore:
    """Finished measurements under ``root``; ``hits`` / ``misses`` count ``get`` outcomes."""

    def __init__(self, root: Union[str, os.PathLike], shipped: Optional[Union[str, os.PathLike]] = None,
                 read_only: bool = False):
        self.root = Path(root)
        self.shipped = Path(shipped) if shipped is not None else None
        self.read_only = read_only  # a miss in cached() raises NotStored instead of computing
        self.hits = 0
        self.misses = 0
        self.shipped_hits = 0  # of the hits, those copied from the shipped store
        self._shipped_checked = False
        self._shipped_pinned = False
        self._fingerprints: Optional[Fingerprints] = None
        self._version_checked = False

    def _check_version(self) -> None:
        """Say once, clearly, why results of an older store version are recomputed (their keys differ).

        ``<root>/VERSION`` names the store version that wrote the folder; a folder with entries and
        no marker was written before version 3.
        """
        if self._version_checked:
            return
        self._version_checked = True
        marker = self.root / "VERSION"
        old = marker.read_text().strip() if marker.is_file() else ("2 or earlier" if any(self.root.glob("*/*.json")) else None)
        if old is not None and old != str(STORE_VERSION):
            log.warning("results store %s was written by store version %s; this is version %d (%s): its results "
                        "are not reused and every measurement asked for is computed again (the old files stay; "
                        "delete them to reclaim space)", self.root, old, STORE_VERSION, VERSION_CHANGES[STORE_VERSION])
        if old != str(STORE_VERSION):
            self.root.mkdir(parents=True, exist_ok=True)
            atomic_write_text(marker, f"{STORE_VERSION}\n")
            index = self.root / FINGERPRINTS / INDEX  # from its first result on, a store's fingerprints are listed
            if not index.is_file():
                index.parent.mkdir(exist_ok=True)
                atomic_write_text(index, "")

    def as_read_only(self) -> "ResultStore":
        """The same store (and shipped results) where a missing measurement raises ``NotStored``."""
        return ResultStore(self.root, self.shipped, read_only=True)

    @staticmethod
    def key(**parts: Any) -> str:
        """sha256 hex of the canonical JSON of ``parts`` plus ``STORE_VERSION``.

        Callers pass everything that fixes the result (model identities, taps, measure, image-set
        hash, n, k, iri kind, result-relevant inversion settings, seed base); ``stir.measure.plan``
        builds these parts for STIR (``direction_parts``, ``similarity_parts``).
        """
        return hashlib.sha256(canonical_json({"store_version": STORE_VERSION, **parts}).encode()).hexdigest()

    def fingerprints(self) -> Fingerprints:
        """The behaviour fingerprints of the models this store holds results of (``<root>/fingerprints``),
        after the shipped models' (``<shipped>/../fingerprints``, checked against the manifest first):
        ``stir.models.behaviour``. One object per store: its files are read as needed."""
        if self._fingerprints is None:
            shipped = None
            if self.shipped is not None:
                if not self._shipped_checked:
                    self._shipped_checked = True
                    self._check_shipped_version()
                if self.shipped is not None and (self.shipped.parent / FINGERPRINTS).is_dir():
                    manifest.verify(self.shipped.parent, FINGERPRINTS)
                    shipped = self.shipped.parent / FINGERPRINTS
            self._fingerprints = Fingerprints(self.root / FINGERPRINTS, shipped, self.holds_results)
        return self._fingerprints

    def holds_results(self) -> bool:
        """Whether any result is stored here (``<root>/<kind>/*.json``): its fingerprints then matter."""
        if not self.root.is_dir():
            return False
        return any(folder.is_dir() and folder.name != FINGERPRINTS and not folder.name.startswith(".")
                   and next(folder.glob("*.json"), None) is not None for folder in self.root.iterdir())

    def path(self, kind: str, key: str) -> Path:
        """``<root>/<kind>/<key>.json``; ``UnsafeStoreFolder`` when ``<root>/<kind>`` is a symbolic link
        (results are never read or written through one, as reports are not: ``check_report_dir``)."""
        folder = self.root / kind
        if folder.is_symlink():
            raise UnsafeStoreFolder(f"results store folder {folder} is a symbolic link (to {os.readlink(folder)}); no "
                                    "result is read or written through one: remove the link (or copy its files "
                                    "there) and run again")
        return folder / f"{key}.json"

    def get(self, kind: str, key: str, validate: Optional[Callable[[Dict[str, Any]], Any]] = None,
            recheck: bool = False) -> Optional[Dict[str, Any]]:
        """The stored entry (a dict with ``result`` and provenance), or None when there is none.

        ``validate(entry["result"])`` (e.g. ``DirectionResult.from_dict``) runs on a found entry;
        if it raises, or the file does not parse or lacks a required field, the file is moved aside
        and None is returned (counted as a miss).

        ``recheck=True``: the lookup under ``lock`` after a counted miss; a found entry (stored by
        another process meanwhile) turns that miss into a hit, a missing one counts nothing.
        """
        self._check_version()
        entry = self._load(self.path(kind, key), kind, key, validate)
        if entry is not None and self.shipped is not None:
            entry = self._unedited_copy(kind, key, entry, validate)
        if entry is None:
            entry = self._from_shipped(kind, key, validate)
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
        self._check_version()
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

    def cached(self, kind: str, parts: Mapping[str, Any], compute: Callable[[], R],
               parse: Callable[[Dict[str, Any]], R], record: Optional[Dict[str, Any]] = None) -> R:
        """The stored result of ``kind`` keyed by ``parts``, or ``compute()`` stored the moment it is done.

        ``parse(entry["result"])`` turns a stored payload into the result (and validates it); the
        computed result must have ``to_dict()``. ``record`` (provenance) is stored beside it.
        Missing results are computed under the key's lock, after a second look (module docstring).
        """
        key = self.key(kind=kind, **parts)
        entry = self.get(kind, key, validate=parse)
        if entry is not None:
            return parse(entry["result"])
        if self.read_only:
            raise NotStored(kind, key)
        with self.lock(kind, key):
            entry = self.get(kind, key, validate=parse, recheck=True)
            if entry is not None:  # another process stored it while we waited
                return parse(entry["result"])
            result = compute()
            self.put(kind, key, result.to_dict(), record)
        return result

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

    def _check_shipped_version(self) -> None:
        """Stop using the shipped store (one warning) when it is of another store version."""
        marker = self.shipped / "VERSION"
        version = marker.read_text().strip() if marker.is_file() else None
        if version != str(STORE_VERSION):
            if self.shipped.is_dir():
                log.warning("shipped results %s are of store version %s, this is version %d: they are not used "
                            "(ship them again: python -m stir.zoo.ship_results STORE)", self.shipped, version,
                            STORE_VERSION)
            self.shipped = None

    def _shipped_ready(self) -> bool:
        """Whether shipped entries may be served: the shipped store's version (read once) and every
        shipped file the pinned one (checked once, before the first is served)."""
        if self.shipped is None:
            return False
        if not self._shipped_checked:
            self._shipped_checked = True
            self._check_shipped_version()
        if self.shipped is None:
            return False
        if not self._shipped_pinned:
            manifest.verify(self.shipped.parent, self.shipped.name)
            self._shipped_pinned = True
        return True

    def _unedited_copy(self, kind: str, key: str, entry: Dict[str, Any], validate) -> Optional[Dict[str, Any]]:
        """``entry`` (this store's), or None where it is a copy of a shipped entry that differs from the
        pinned one (edited in this store after it was served): moved aside, the shipped one served again."""
        path = self.shipped / kind / f"{key}.json" if self.shipped is not None else None
        if path is None or not path.is_file() or not self._shipped_ready():
            return entry
        shipped = self._load(path, kind, key, validate, move_aside=False)
        if shipped is None or json.dumps(shipped, sort_keys=True) == json.dumps(entry, sort_keys=True):  # NaN-safe
            return entry
        aside = set_aside(self.path(kind, key))
        log.warning("result store entry %s differs from the shipped entry %s that %s pins; moved to %s, serving the "
                    "shipped one", self.path(kind, key), path, self.shipped.parent / manifest.MANIFEST, aside.name)
        return None

    def _from_shipped(self, kind: str, key: str, validate) -> Optional[Dict[str, Any]]:
        """The shipped store's entry of ``kind``/``key``, copied unchanged into this store; None if none."""
        if not self._shipped_ready():
            return None
        path = self.shipped / kind / f"{key}.json"
        entry = self._load(path, kind, key, validate, move_aside=False)
        if entry is None:
            return None
        write_json(self.path(kind, key), entry)
        self.shipped_hits += 1
        log.info("result served from the shipped store: %s (computed %s, torch %s)", path, entry.get("timestamp"),
                 entry.get("versions", {}).get("torch"))
        return entry

    def _load(self, path: Path, kind: str, key: str, validate, move_aside: bool = True) -> Optional[Dict[str, Any]]:
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
            if not move_aside:  # a read-only (shipped) store: leave the file, compute here
                log.warning("shipped result %s is unusable (%s: %s); computing it here", path, type(err).__name__, err)
                return None
            aside = set_aside(path)  # <key>.json.corrupt, .corrupt-2, ...: an earlier copy is never replaced
            log.warning("result store entry %s is unusable (%s: %s); moved to %s, recomputing",
                        path, type(err).__name__, err, aside.name)
            return None
        return entry


def reindex(root: Union[str, os.PathLike]) -> List[str]:
    """Write ``<store>/fingerprints/INDEX`` for a store written before it was kept (``root``: the store or
    the out_dir holding it): the static identities of the fingerprint files there, sorted. ``ValueError``
    (one line, nothing written) when the store already has one, a file is damaged, or a result names a
    model identity that no fingerprint file, here or shipped, accounts for (its file was lost)."""
    from stir.untrusted import load_plain

    store = Path(root) / "store" if (Path(root) / "store" / FINGERPRINTS).is_dir() else Path(root)
    folder, aside = store / FINGERPRINTS, f"move {store} aside to measure again"
    if not folder.is_dir():
        raise ValueError(f"{folder} is missing: there are no fingerprints to list; {aside}")
    if (folder / INDEX).is_file():
        raise ValueError(f"{folder / INDEX} exists: the store needs no reindex (a file it lists and that is missing "
                         f"was lost: restore it, or {aside})")
    shipped = manifest.SHIPPED_ZOO / FINGERPRINTS

    def held(path: Path) -> Dict[str, list]:
        try:
            data = load_plain(path)
            if not (isinstance(data, dict) and all(isinstance(v, list) and all(isinstance(f, dict) for f in v)
                                                   for v in data.values())):
                raise ValueError("not {probe key: [fingerprint, ...]}")
            return data
        except Exception as err:  # noqa: BLE001 - any damage refuses, in one line
            raise ValueError(f"fingerprint file {path} is damaged ({type(err).__name__}: {err}); INDEX is not "
                             f"written: {aside}") from None

    if shipped.is_dir():
        manifest.verify(shipped.parent, FINGERPRINTS)
    local = {p.stem: held(p) for p in sorted(folder.glob("*.pt"))}
    theirs = {p.stem: held(p) for p in sorted(shipped.glob("*.pt"))} if shipped.is_dir() else {}
    known = set()
    for static in set(local) | set(theirs):
        merged = {k: [*theirs.get(static, {}).get(k, []), *local.get(static, {}).get(k, [])]
                  for k in set(theirs.get(static, {})) | set(local.get(static, {}))}
        known |= variant_identities(static, merged)
    for path in sorted(store.glob("*/*.json")):
        if path.parent.name.startswith(".") or (manifest.SHIPPED_ZOO / "store" / path.parent.name / path.name).is_file():
            continue  # a copy of a shipped entry: its models are the shipped ones
        try:
            result = json.loads(path.read_text(encoding="utf-8")).get("result", {})
        except (OSError, ValueError, AttributeError):
            continue  # an unusable entry is moved aside when it is read
        for identity in (result.get("ref_id"), result.get("target_id")) if isinstance(result, dict) else ():
            if isinstance(identity, str) and identity not in known:
                raise ValueError(f"{path} holds a result of model identity {identity[:12]}... whose fingerprints are "
                                 f"in no file of {folder} nor of the shipped ones: a file was lost and INDEX is not "
                                 f"written; {aside}")
    atomic_write_text(folder / INDEX, "".join(f"{s}\n" for s in sorted(local)))
    return sorted(local)


def main(argv: Optional[List[str]] = None) -> None:
    """``python -m stir.store reindex OUT_DIR``: ``reindex``, one line either way (exit status 2 refused)."""
    from stir.cli import EXPECTED_ERRORS, one_line_errors

    parser = argparse.ArgumentParser(prog="python -m stir.store", description="Migrate a results store.")
    parser.add_argument("command", choices=["reindex"], help="reindex: write fingerprints/INDEX of a store "
                        "written before it was kept")
    parser.add_argument("out_dir", type=Path, help="an evaluation's out_dir (or its store folder)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with one_line_errors(*EXPECTED_ERRORS):
        listed = reindex(args.out_dir)
        log.info("%s: INDEX lists %d fingerprint file(s); the store is served again", args.out_dir, len(listed))


if __name__ == "__main__":
    main()
