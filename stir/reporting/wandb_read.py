"""Read an offline W&B run file (``run-<id>.wandb``) back: config, summary, history, tables, artifacts.

wandb offline keeps a run only in this binary file until ``wandb sync``; wandb 0.31 no longer ships
a Python reader for it (the old ``wandb.sdk.internal.datastore``). The format is LevelDB's log
format: a 7-byte header (``:W&B``, magic 0xBEE1, version 0), then 32 KiB blocks of chunks
``crc32 (4) | length (2, little endian) | type (1: full, 2: first, 3: middle, 4: last) | data``;
each reassembled record is a ``wandb_internal_pb2.Record`` protobuf. Used by the tests and by
``stir.reporting.dashboard`` to check that the keys the dashboard plots exist.
"""
from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Union

_HEADER = b":W&B"
_BLOCK = 32768
_CHUNK_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def records(path: Union[str, os.PathLike]) -> Iterator[Any]:
    """Every ``Record`` protobuf of a run file, in order (a truncated last record is dropped)."""
    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    if data[:4] != _HEADER:
        raise ValueError(f"{path} is not a W&B run file (header {data[:4]!r})")
    pos, pending = 7, b""
    while pos + _CHUNK_HEADER <= len(data):
        left_in_block = _BLOCK - pos % _BLOCK
        if left_in_block < _CHUNK_HEADER:  # block trailer padding
            pos += left_in_block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + _CHUNK_HEADER])
        chunk = data[pos + _CHUNK_HEADER:pos + _CHUNK_HEADER + length]
        pos += _CHUNK_HEADER + length
        if kind == 0 and length == 0:  # zero padding at the end of a file being written
            continue
        if kind in (_FULL, _FIRST):
            pending = chunk
        else:
            pending += chunk
        if kind in (_FULL, _LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record
            pending = b""


@dataclass
class OfflineRun:
    """What one offline run file says, decoded."""

    run_id: str = ""
    name: str = ""
    group: str = ""
    job_type: str = ""
    tags: List[str] = field(default_factory=list)
    config: Dict[str, Any] = field(default_factory=dict)
    summary: Dict[str, Any] = field(default_factory=dict)
    history: List[Dict[str, Any]] = field(default_factory=list)  # one dict per logged step
    artifacts: List[Dict[str, str]] = field(default_factory=list)  # {"name", "type"}

    @property
    def history_keys(self) -> set:
        return {k for row in self.history for k in row}


def _value(json_text: str) -> Any:
    try:
        return json.loads(json_text)
    except ValueError:
        return json_text


def _key(item: Any) -> str:
    return item.key if item.key else "/".join(item.nested_key)


def read_run(path: Union[str, os.PathLike]) -> OfflineRun:
    """Decode a ``run-<id>.wandb`` file (or the offline-run folder holding one)."""
    path = Path(path)
    if path.is_dir():
        (path,) = path.glob("run-*.wandb")
    run = OfflineRun()
    for record in records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            run.run_id, run.name, run.group, run.job_type = r.run_id, r.display_name, r.run_group, r.job_type
            run.tags = list(r.tags)
            for item in r.config.update:
                run.config[_key(item)] = _value(item.value_json)
        elif kind == "config":
            for item in record.config.update:
                run.config[_key(item)] = _value(item.value_json)
        elif kind == "history":
            run.history.append({_key(i): _value(i.value_json) for i in record.history.item})
        elif kind == "summary":
            for item in record.summary.update:
                run.summary[_key(item)] = _value(item.value_json)
        elif kind == "artifact":
            run.artifacts.append({"name": record.artifact.name, "type": record.artifact.type})
    # wandb stores each config value as {"value": v, "desc": ...}
    run.config = {k: v.get("value", v) if isinstance(v, dict) and "value" in v else v for k, v in run.config.items()}
    return run
