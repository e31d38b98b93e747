"""Read an offline W&B run file (``run-<id>.wandb``) back: config, summary, history, tables, artifacts.

    python -m stir.reporting.wandb_read RUN [RUN ...] [--table NAME] [--history]

prints what each run holds (RUN: a ``run-*.wandb`` file or its ``offline-run-*`` folder), or one
logged table as rows.

wandb offline keeps a run only in this binary file until ``wandb sync``; wandb 0.31 no longer ships
a Python reader for it (the old ``wandb.sdk.internal.datastore``). The format is LevelDB's log
format: a 7-byte header (``:W&B``, magic 0xBEE1, version 0), then 32 KiB blocks of chunks
``crc32 (4) | length (2, little endian) | type (1: full, 2: first, 3: middle, 4: last) | data``;
each reassembled record is a ``wandb_internal_pb2.Record`` protobuf. Used by the tests and by
``stir.reporting.dashboard`` to check that the keys the dashboard plots exist.
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

_HEADER = b":W&B"
_BLOCK = 32768
_CHUNK_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def records(path: Union[str, os.PathLike]) -> Iterator[Any]:
    """Every ``Record`` protobuf of a run file, in order.

    A file still being written (wandb's service flushes it after ``wandb.finish`` returns) ends in
    a chunk cut short or not yet filled in: that last record is dropped. A chunk whose crc32 (of its
    type byte and data) is wrong with written data after it is a corrupt file: ValueError."""
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
        crc, length, kind = struct.unpack("<IHB", data[pos:pos + _CHUNK_HEADER])
        if kind == 0 and length == 0:  # zero padding at the end of a file being written
            pos += _CHUNK_HEADER
            continue
        end = pos + _CHUNK_HEADER + length
        if end > len(data):  # the last chunk, still being written
            return
        chunk = data[pos + _CHUNK_HEADER:end]
        if zlib.crc32(bytes([kind]) + chunk) & 0xFFFFFFFF != crc:
            if data[end:].strip(b"\0"):
                raise ValueError(f"{path} is corrupt: the chunk at byte {pos} fails its crc32 and data follows it")
            return  # the last chunk, its data not yet written in full
        pos = end
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
    complete: bool = False  # its exit record was read (False: a run still running, or being flushed)
    path: Optional[Path] = None  # the run file read

    @property
    def history_keys(self) -> set:
        return {k for row in self.history for k in row}

    @property
    def tables(self) -> Dict[str, Dict[str, Any]]:
        """{table key: its summary entry (path of the table file in the run's files/, nrows, ncols)}."""
        out: Dict[str, Dict[str, Any]] = {}
        for key, value in self.summary.items():
            if key.endswith("/_type") and value == "table-file":
                name = key[: -len("/_type")]
                out[name] = {k[len(name) + 1:]: v for k, v in self.summary.items() if k.startswith(name + "/")}
        return out

    def table(self, name: str) -> Dict[str, Any]:
        """One logged table as {"columns": [...], "data": [[...], ...]}, read from the run's files/ folder."""
        if name not in self.tables:
            raise KeyError(f"no table {name!r} in {self.path}; tables: {sorted(self.tables)}")
        if self.path is None:
            raise ValueError("this run was not read from a file")
        entry = self.tables[name]
        file = self.path.parent / "files" / str(entry.get("path", ""))
        if not file.is_file():
            raise FileNotFoundError(f"table {name!r}: {file} is not there (the run's files/ folder holds the table files)")
        table = json.loads(file.read_text())
        return {"columns": table.get("columns", []), "data": table.get("data", [])}


def _value(json_text: str) -> Any:
    try:
        return json.loads(json_text)
    except ValueError:
        return json_text


def _key(item: Any) -> str:
    return item.key if item.key else "/".join(item.nested_key)


def read_run(path: Union[str, os.PathLike], wait_s: float = 0.0) -> OfflineRun:
    """Decode a ``run-<id>.wandb`` file (or the offline-run folder holding one). ``wait_s``: read it
    again, for up to that many seconds, until its exit record is there (wandb's service may still be
    flushing a run that ``wandb.finish`` has returned from)."""
    deadline = time.monotonic() + wait_s
    while True:
        run = _read_run(path)
        if run.complete or time.monotonic() >= deadline:
            return run
        time.sleep(0.2)


def _read_run(path: Union[str, os.PathLike]) -> OfflineRun:
    path = Path(path)
    if path.is_dir():
        (path,) = path.glob("run-*.wandb")
    run = OfflineRun(path=path)
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
        elif kind == "exit":
            run.complete = True
    # wandb stores each config value as {"value": v, "desc": ...}
    run.config = {k: v.get("value", v) if isinstance(v, dict) and "value" in v else v for k, v in run.config.items()}
    return run


def describe(run: OfflineRun) -> str:
    """A few readable lines: name, job type, group, tags, config keys, summary values, tables, artifacts."""
    scalars = {k: v for k, v in run.summary.items() if isinstance(v, (int, float)) and not k.startswith("_")}
    tables = ", ".join(f"{k} ({v.get('nrows', '?')} rows)" for k, v in sorted(run.tables.items()))
    lines = [f"{run.path}: {run.name or run.run_id} (job_type {run.job_type or '-'}, group {run.group or '-'}, "
             f"tags {', '.join(run.tags) or '-'})",
             f"  config: {len(run.config)} keys ({', '.join(sorted(run.config)[:12])}{', ...' if len(run.config) > 12 else ''})",
             f"  history: {len(run.history)} rows, keys {', '.join(sorted(run.history_keys)) or '-'}",
             f"  tables: {tables or '-'}",
             f"  artifacts: {', '.join(a['name'] + ':' + a['type'] for a in run.artifacts) or '-'}",
             "  summary:"]
    lines += [f"    {k} = {v:.6g}" if isinstance(v, float) else f"    {k} = {v}" for k, v in sorted(scalars.items())]
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stir.reporting.wandb_read",
                                     description="What offline W&B runs hold, without the network.")
    parser.add_argument("runs", nargs="*", type=Path, help="run-*.wandb files or offline-run-* folders")
    parser.add_argument("--table", help="print this logged table (tab-separated)")
    parser.add_argument("--history", action="store_true", help="print every logged history row")
    args = parser.parse_args(argv)
    if not args.runs:
        print("error: give a run: python -m stir.reporting.wandb_read results/<report>/wandb/offline-run-* "
              "(or a run-*.wandb file)", file=sys.stderr)
        return 2
    for given in args.runs:
        try:
            run = read_run(given)
        except (ValueError, FileNotFoundError) as err:
            print(f"error: {given}: {err}", file=sys.stderr)
            return 2
        if args.table:
            try:
                table = run.table(args.table)
            except (KeyError, FileNotFoundError) as err:
                print(f"error: {err.args[0]}", file=sys.stderr)
                return 2
            print("\t".join(map(str, table["columns"])))
            for row in table["data"]:
                print("\t".join(map(str, row)))
        else:
            print(describe(run))
            if args.history:
                for row in run.history:
                    print("   ", json.dumps(row, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
