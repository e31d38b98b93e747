"""Training under DDP: two gloo processes on the CPU, at tiny sizes, against one process.

What must hold (issue 33): ``data.batch_size`` is the global batch (the ranks' step-i batches together
are the one-process run's step-i batch); epoch metrics are means over every rank's images; test
accuracy and the robust subset are those one process measures of the same weights (each image counted
once, the subset by its index in the split); one train.log writer; a folder is never skipped or
resumed under another process count; a killed DDP run resumes to the uninterrupted weights.
"""
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import REPO, refused, run_entry_point, tiny_run_test_logits, tiny_train_args
from stir.data import synthetic
from stir.training.runs import load_state_dict

DDP = ["trainer.accelerator=cpu", "trainer.devices=2", "trainer.strategy=ddp"]
ONE = ["trainer.accelerator=cpu", "trainer.devices=1"]
RUN = "cifar10/resnet18-w4/vanilla/seed0"


@pytest.fixture(scope="module")
def odd_cifar10(tmp_path_factory) -> Path:
    """A tiny CIFAR-10 whose 41 test images do not split evenly over two ranks (one padding image)."""
    root = tmp_path_factory.mktemp("cifar10_odd")
    synthetic.write_cifar10_python(root, n_train=160, n_test=41, seed=1)
    return root


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}


def _run(args, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, *map(str, args)], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done


def _steps(out: Path, ranks: int) -> list:
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(ranks)]


def _test_split_correct(run: Path, data_root: Path) -> torch.Tensor:
    """(n,) bool: which test images the run's weights.pt classifies correctly, on one process."""
    logits, labels = tiny_run_test_logits(run, data_root)
    return logits.argmax(1) == labels


@pytest.mark.slow  # ~40 s: a one-process and a two-process training, each importing torch and Lightning
def test_two_processes_train_the_global_batch_and_report_what_one_process_measures(odd_cifar10, tmp_path):
    common = tiny_train_args(odd_cifar10, tmp_path, "data.augment=false", "trainer.robust_test_size=10",
                             "data.eval_batch_size=8")
    _run([REPO / "tests/training/ddp_steps.py", tmp_path / "one", *common, "runs_dir=" + str(tmp_path / "r1"), *ONE],
         tmp_path)
    _run([REPO / "tests/training/ddp_steps.py", tmp_path / "ddp", *common, "runs_dir=" + str(tmp_path / "r2"), *DDP],
         tmp_path)
    (one,), ranks = _steps(tmp_path / "one", 1), _steps(tmp_path / "ddp", 2)

    # The global batch: as many steps, each rank half of each batch, together the one-process batch.
    assert [s["batch"] for s in one] == [40, 40, 40]
    assert all([s["batch"] for s in rank] == [20, 20, 20] for rank in ranks)
    for i, step in enumerate(one):
        assert sorted(ranks[0][i]["images"] + ranks[1][i]["images"]) == sorted(step["images"]), f"step {i}"

    # The epoch's loss: the mean over both ranks' images, not rank 0's.
    run = tmp_path / "r2" / RUN
    rows = list(csv.DictReader(open(run / "csv/version_0/metrics.csv")))
    (epoch_loss,) = [float(r["train/epoch_loss"]) for r in rows if r.get("train/epoch_loss")]
    steps = [s for rank in ranks for s in rank]
    assert epoch_loss == pytest.approx(sum(s["loss"] * s["batch"] for s in steps) / sum(s["batch"] for s in steps),
                                       rel=1e-5)

    # Test accuracy over the 41 images once each (one rank holds a padding image), the robust subset the
    # first 10 rows: what one process measures of the same weights.
    metrics = json.loads((run / "metrics.json").read_text())
    correct = _test_split_correct(run, odd_cifar10).float()
    assert metrics["test/acc"] == pytest.approx(correct.mean().item(), abs=1e-6)
    assert metrics["test/robust_subset_acc"] == pytest.approx(correct[:10].mean().item(), abs=1e-6)
    assert metrics["processes"] == 2 and json.loads((run / "recipe.json").read_text())["processes"] == 2

    # One writer of train.log.
    lines = (run / "train.log").read_text().splitlines()
    assert sum("data cifar10:" in line for line in lines) == 1, lines


def test_a_finished_or_killed_run_is_refused_under_another_process_count(cifar10_root, tmp_path, monkeypatch, capsys):
    """data.batch_size is the global batch; the process count is no key of the folder name, so the same
    folder is found, and refused with the command that continues it as it was (not skipped)."""
    args = tiny_train_args(cifar10_root, tmp_path)
    run_entry_point("train", args, monkeypatch)
    metrics = tmp_path / RUN / "metrics.json"
    stamp = metrics.stat().st_mtime_ns
    message = refused("train", args + DDP, monkeypatch, capsys)  # refused before any process is launched
    assert "finished run trained by 1 process(es)" in message and "this command trains with 2" in message
    assert f"`python train.py run_dir={tmp_path / RUN} " in message and "retrain=true" in message
    assert metrics.stat().st_mtime_ns == stamp
    metrics.unlink()  # as if killed after its checkpoint: not resumed under another count either
    assert "holds an unfinished run trained by 1 process(es)" in refused("train", args + DDP, monkeypatch, capsys)
    assert "must be a multiple of the 2" in refused("train", args + DDP + ["data.batch_size=39", "runs_dir=" + str(tmp_path / "b")],
                                       monkeypatch, capsys)
    assert not (tmp_path / "b").exists()


def test_sync_batchnorm_on_the_cpu_is_refused_before_anything_is_written(cifar10_root, tmp_path, monkeypatch, capsys):
    message = refused("train", tiny_train_args(cifar10_root, tmp_path / "runs", *ONE, "trainer.sync_batchnorm=true"),
                      monkeypatch, capsys)
    assert "trainer.sync_batchnorm=true needs CUDA" in message
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow  # ~60 s: three two-process trainings
def test_a_killed_ddp_run_resumes_to_the_uninterrupted_weights(cifar10_root, tmp_path, monkeypatch, capsys):
    """Both ranks SIGKILLed after the first epoch's checkpoint; one process may not resume it; the same DDP
    command does, to the weights of a DDP run never interrupted."""
    args = tiny_train_args(cifar10_root, tmp_path / "killed", "trainer.max_epochs=3", "data.batch_size=20", *DDP)

    def command(runs):
        return [sys.executable, str(REPO / "train.py"),
                *tiny_train_args(cifar10_root, runs, "trainer.max_epochs=3", "data.batch_size=20", *DDP)]

    run = tmp_path / "killed" / RUN
    proc = subprocess.Popen(command(tmp_path / "killed"), cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)  # rank 1 is rank 0's child
    deadline = time.time() + 240
    while not (run / "last.ckpt").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (run / "metrics.json").exists()
    killed_at = torch.load(run / "last.ckpt", weights_only=False)["epoch"]
    assert killed_at < 2

    one = [a for a in args if a not in DDP] + ONE
    message = refused("train", one, monkeypatch, capsys)
    assert "unfinished run trained by 2 process(es)" in message and "trainer.devices=2" in message

    done = subprocess.run(command(tmp_path / "killed"), cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    _run(command(tmp_path / "whole")[1:], tmp_path, timeout=600)
    resumed, reference = load_state_dict(str(run)), load_state_dict(str(tmp_path / "whole" / RUN))
    different = [k for k in reference if not torch.equal(resumed[k], reference[k])]
    assert not different, f"killed after epoch {killed_at}: {different[:5]}"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["resumed_from_epoch"] == killed_at + 1 and metrics["epochs"] == 3 and metrics["processes"] == 2
