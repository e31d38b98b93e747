"""Items 2 and 3 of issue 21: a full disk never destroys the resume point; a truncated last.ckpt does
not block every rerun. Through the real train.py (in this process) and the real Lightning Trainer."""
import csv
import errno
import json
import os

import pytest
import torch

from faultkit import RUN, exit_of, full_disk, train, truncate
from conftest import tiny_train_args
from stir.training.runs import point_epoch


def test_a_full_disk_during_a_checkpoint_write_keeps_the_previous_one_and_the_rerun_resumes(
        cifar10_root, tmp_path, monkeypatch, capfd):
    runs = tmp_path / "runs"
    seen = full_disk(monkeypatch, "last.ckpt", after=1)  # epoch 0 writes its checkpoint, epoch 1 finds the disk full
    with pytest.raises(OSError) as err:
        train(cifar10_root, runs, monkeypatch, "trainer.max_epochs=3")
    run = runs / RUN.format(seed=0)
    assert err.value.errno == errno.ENOSPC and str(run / "last.ckpt") in str(err.value)  # names the file
    assert seen["failed"] == 1
    assert point_epoch(run / "last.ckpt") == 0  # the previous checkpoint, whole
    assert not list(run.glob(".last.ckpt.*.tmp")) and not (run / "metrics.json").exists()

    monkeypatch.undo()  # space again
    capfd.readouterr()
    train(cifar10_root, runs, monkeypatch, "trainer.max_epochs=3")
    said = "".join(capfd.readouterr())
    assert f"resuming from {run / 'last.ckpt'}" in said
    metrics = torch.load(run / "last.ckpt", weights_only=False)
    assert metrics["epoch"] == 2 and (run / "metrics.json").is_file()


def test_the_full_disk_is_one_line_with_the_file_and_exit_2(cifar10_root, tmp_path, monkeypatch):
    full_disk(monkeypatch, "last.ckpt")
    code, stderr = exit_of("train", tiny_train_args(cifar10_root, tmp_path, "trainer.robust_val_every_n_epochs=0"),
                           monkeypatch)
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in stderr
    assert "No space left on device" in lines[0] and "last.ckpt" in lines[0]


def test_a_truncated_last_ckpt_is_moved_aside_and_the_run_restarts_saying_so(cifar10_root, tmp_path, monkeypatch,
                                                                              capfd):
    runs = tmp_path / "runs"
    run = train(cifar10_root, runs, monkeypatch)
    (run / "metrics.json").unlink()  # an unfinished run ...
    (run / "weights.pt").unlink()
    truncate(run / "last.ckpt", 290_816 / 435_205)  # ... whose checkpoint a full disk cut short (the sizes)
    capfd.readouterr()
    train(cifar10_root, runs, monkeypatch)
    said = "".join(capfd.readouterr())
    assert "last.ckpt does not load" in said and "moved to last.ckpt.corrupt" in said
    assert "no earlier checkpoint" in said and "training restarts from epoch 0" in said
    assert (run / "last.ckpt.corrupt").is_file() and (run / "metrics.json").is_file()
    assert point_epoch(run / "last.ckpt") == 0


def test_a_truncated_last_ckpt_falls_back_to_the_previous_good_checkpoint(cifar10_root, tmp_path, monkeypatch, capfd):
    runs = tmp_path / "runs"
    run = train(cifar10_root, runs, monkeypatch, "trainer.max_epochs=2")
    (run / "metrics.json").unlink()
    (run / "weights.pt").unlink()
    good = run / "hpc_ckpt_1.ckpt"  # an older good state (Lightning's requeue checkpoint)
    good.write_bytes((run / "last.ckpt").read_bytes())
    os.utime(good, ns=(1, 1))  # older than last.ckpt
    truncate(run / "last.ckpt")
    capfd.readouterr()
    train(cifar10_root, runs, monkeypatch, "trainer.max_epochs=2")
    said = "".join(capfd.readouterr())
    assert f"resuming from the previous good checkpoint {good}" in said
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["resumed_from_epoch"] == 2 and metrics["epochs"] == 2  # from the good state's end


def test_the_csv_log_survives_a_full_disk_whole(cifar10_root, tmp_path, monkeypatch):
    """Every file training writes is atomic: the CSV log's second save meets a full disk, and the file
    is still the first save's complete log (Lightning appends in place: a torn last row)."""
    runs = tmp_path / "runs"
    full_disk(monkeypatch, "metrics.csv", after=1)
    with pytest.raises(OSError, match="metrics.csv"):
        train(cifar10_root, runs, monkeypatch, "trainer.max_epochs=3")
    (log,) = (runs / RUN.format(seed=0)).glob("csv/version_0/metrics.csv")
    rows = list(csv.reader(log.open()))
    assert len(rows) > 1 and all(len(r) == len(rows[0]) for r in rows) and log.read_text().endswith("\n")
    assert not list(log.parent.glob(".metrics.csv.*.tmp"))
