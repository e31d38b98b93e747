"""Decode once: keep a decoded :class:`Dataset` as a ``.pt`` file and reuse it while the source is unchanged.

The cache file's name carries a hash of the source's content (a file's sha256, as the run recipe's
``data identity`` has it; a folder's: of every file's relative path and sha256), so editing or
replacing the source starts a new cache file, even with the same size and modification time (a cache
keyed by path, size and mtime served the replaced file's stale images; issue 54). Hashing reads the
source once per load (the 19 MB CIFAR-10 JPEG tar: 0.02 s), far below decoding it; the same content
keeps one decode. Writes are atomic (``stir.atomic.torch_save``: temporary file + ``os.replace``), so concurrent processes
(DDP ranks) and interrupted runs never leave a half-written cache; a cache that cannot be read is
rebuilt with a warning.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Callable, Union


from stir.atomic import torch_save
from stir.provenance import file_sha256
from stir.untrusted import load_plain
from stir.data.dataset import Dataset

log = logging.getLogger(__name__)

PathLike = Union[str, os.PathLike]

CACHE_VERSION = 1  # bump when the decoding changes, so old cache files are not reused
CACHE_DIR = "stir-cache"  # under data.root
_FIELDS = ("train_images", "train_labels", "test_images", "test_labels")


def source_fingerprint(source: PathLike) -> str:
    """A hex digest of what the source holds: its files' bytes (their sha256), not where or when they were written."""
    path = Path(source).resolve()
    if path.is_dir():
        # every file's content: a folder's own mtime misses edits inside class folders, and a size or
        # an mtime can be kept by a replacement
        files = sorted((os.path.relpath(os.path.join(d, f), path).replace(os.sep, "/"), os.path.join(d, f))
                       for d, _, names in os.walk(path) for f in names)
        contents = [(rel, file_sha256(full)) for rel, full in files]
    else:
        contents = [file_sha256(path)]
    blob = json.dumps([CACHE_VERSION, contents]).encode()
    return hashlib.sha256(blob).hexdigest()


def cache_file(root: PathLike, source: PathLike) -> Path:
    """``root/stir-cache/<source name>-<16 hex digits>.pt`` for a source."""
    stem = Path(source).name
    for suffix in (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem) or "source"
    return Path(root) / CACHE_DIR / f"{stem}-{source_fingerprint(source)[:16]}.pt"


def _to_payload(data: Dataset, key: str) -> dict:
    return {"version": CACHE_VERSION, "key": key, "classes": list(data.classes),
            **{f: getattr(data, f) for f in _FIELDS}}


def _from_payload(payload: object, key: str) -> Dataset:
    """Rebuild the Dataset, or raise ValueError if the file is not one of ours for this key."""
    if not isinstance(payload, dict):
        raise ValueError(f"holds a {type(payload).__name__}, not a dict")
    if payload.get("version") != CACHE_VERSION or payload.get("key") != key:
        raise ValueError(f"version/key {payload.get('version')}/{payload.get('key')} do not match {CACHE_VERSION}/{key}")
    return Dataset(*(payload[f] for f in _FIELDS), classes=tuple(payload["classes"]))  # validates dtypes, shapes


def cached_dataset(source: PathLike, root: PathLike, build: Callable[[], Dataset]) -> Dataset:
    """Load the source's cache file under ``root`` if valid, else ``build()`` it and write the cache.

    A failure to write (read-only root, full disk) is logged and the built data returned anyway.
    """
    key = source_fingerprint(source)
    path = cache_file(root, source)
    if path.is_file():
        start = time.perf_counter()
        try:
            data = _from_payload(load_plain(path), key)
        except Exception as err:  # truncated zip, garbage, foreign file: all mean "rebuild"
            log.warning("ignoring unreadable data cache %s (%s: %s); decoding the source again",
                        path, type(err).__name__, err)
        else:
            log.info("loaded cached data set %s for %s (%.2f s)", path, source, time.perf_counter() - start)
            return data
    data = build()
    try:
        torch_save(_to_payload(data, key), path)  # temp file + fsync + os.replace
    except OSError as err:
        log.warning("could not write data cache %s (%s); the next run will decode again", path, err)
    else:
        log.info("wrote data cache %s", path)
    return data
