"""stir.reporting.wandb_read on run files written here in W&B's log format (LevelDB's): a complete
run, one still being flushed (its last chunk cut short, or not yet filled in), and a corrupt one."""
import struct
import zlib

import pytest
from wandb.proto import wandb_internal_pb2

from stir.reporting.wandb_read import read_run, records

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)


def chunk(record) -> bytes:
    data = record.SerializeToString()
    return struct.pack("<IHB", zlib.crc32(bytes([1]) + data) & 0xFFFFFFFF, len(data), 1) + data  # type 1: full


def run_file(tmp_path, *chunks: bytes):
    path = tmp_path / "run-abc.wandb"
    path.write_bytes(HEADER + b"".join(chunks))
    return path


def history(step: int):
    r = wandb_internal_pb2.Record()
    item = r.history.item.add()
    item.key, item.value_json = "train/epoch_acc", str(0.1 * step)
    return r


def exit_record():
    r = wandb_internal_pb2.Record()
    r.exit.exit_code = 0
    return r


def test_a_complete_run_reads_every_record_and_says_it_is_complete(tmp_path):
    run = read_run(run_file(tmp_path, chunk(history(1)), chunk(history(2)), chunk(exit_record())))
    assert [h["train/epoch_acc"] for h in run.history] == [0.1, 0.2] and run.complete


def test_a_run_still_being_flushed_drops_its_last_record_and_is_not_complete(tmp_path):
    whole = chunk(exit_record())
    cut = read_run(run_file(tmp_path, chunk(history(1)), chunk(history(2))[:-3]))  # data cut short
    assert len(cut.history) == 1 and not cut.complete
    head = whole[:7] + b"\0" * (len(whole) - 7)  # header written, data not yet
    unfilled = read_run(run_file(tmp_path, chunk(history(1)), head))
    assert len(unfilled.history) == 1 and not unfilled.complete
    assert not read_run(run_file(tmp_path, chunk(history(1))), wait_s=0.3).complete  # waited, still no exit record


def test_a_chunk_failing_its_crc_with_data_after_it_is_a_corrupt_file(tmp_path):
    bad = bytearray(chunk(history(1)))
    bad[-1] ^= 0xFF
    with pytest.raises(ValueError, match="fails its crc32"):
        list(records(run_file(tmp_path, bytes(bad), chunk(history(2)))))
