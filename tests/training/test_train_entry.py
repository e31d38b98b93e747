"""train.py end to end on tiny data, through the real Hydra entry point and Lightning Trainer."""
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

from conftest import REPO, run_entry_point, tiny_run_test_logits, tiny_train_args, wandb_dirs
from stir.provenance import file_sha256
from stir.training.runs import load_state_dict


def read_csv(run: Path) -> list:
    rows = []
    for f in sorted(run.glob("csv/version_*/metrics.csv")):
        rows += list(csv.DictReader(open(f)))
    return rows


@pytest.mark.parametrize(
    "loss, model, expected",
    [
        ("vanilla", "resnet18", "cifar10/resnet18-w4/vanilla/seed0"),
        ("at", "vgg16", "cifar10/vgg16-w4/at-it2/seed0"),
        ("trades", "resnet34", "cifar10/resnet34-w4/trades-it2/seed0"),
        ("mart", "vgg19", "cifar10/vgg19-w4/mart-it2/seed0"),
    ],
)
def test_every_loss_and_family_trains_into_its_run_folder(loss, model, expected, cifar10_root, tmp_path, monkeypatch):
    run_entry_point("train", tiny_train_args(cifar10_root, tmp_path, f"loss={loss}", f"model={model}"), monkeypatch)
    run = tmp_path / expected
    assert {"config.yaml", "last.ckpt", "weights.pt", "metrics.json"} <= {p.name for p in run.iterdir()}
    metrics = json.loads((run / "metrics.json").read_text())
    assert 0 <= metrics["test/acc"] <= 1 and 0 <= metrics["test/robust_acc"] <= 1
    assert metrics["config"]["loss"]["name"] == loss and metrics["seed"] == 0
    assert metrics["versions"]["torch"] == torch.__version__
    assert metrics["weights_sha256"] == file_sha256(run / "weights.pt")
    logged = {k for row in read_csv(run) for k, v in row.items() if v}
    assert {"train/loss", "val/acc", "val/robust_acc", "test/acc", "test/robust_acc"} <= logged


def test_cifar100_and_seed_and_train_size(cifar100_root, tmp_path, monkeypatch):
    args = tiny_train_args(cifar100_root, tmp_path, "data=cifar100", "seed=3", "data.train_size=100")
    run_entry_point("train", args, monkeypatch)
    run = tmp_path / "cifar100/resnet18-w4/vanilla-n100/seed3"
    state = load_state_dict(str(run))
    assert state["fc.weight"].shape == (100, 32)
    assert json.loads((run / "metrics.json").read_text())["train_indices_count"] == 100


def test_finished_run_is_skipped_and_a_different_recipe_is_refused(cifar10_root, tmp_path, monkeypatch, capfd):
    args = tiny_train_args(cifar10_root, tmp_path)
    run_entry_point("train", args, monkeypatch)
    metrics = tmp_path / "cifar10/resnet18-w4/vanilla/seed0/metrics.json"
    stamp = metrics.stat().st_mtime_ns
    capfd.readouterr()
    run_entry_point("train", args, monkeypatch)
    assert metrics.stat().st_mtime_ns == stamp and "is finished; skipping" in "".join(capfd.readouterr())
    (tmp_path / "cifar10/resnet18-w4/vanilla/seed0/metrics.json").unlink()  # pretend it never finished
    with pytest.raises(ValueError, match=r"different recipe \(optim.lr: 0.1 -> 0.05\).*retrain=true"):
        run_entry_point("train", args + ["optim.lr=0.05"], monkeypatch)
    run_entry_point("train", args + ["optim.lr=0.05", "retrain=true"], monkeypatch)
    assert metrics.is_file()
    assert list(tmp_path.glob("cifar10/resnet18-w4/vanilla/seed0.replaced-*/config.yaml"))  # old run kept


def test_init_from_warm_starts_a_model_update(cifar10_root, tmp_path, monkeypatch):
    run_entry_point("train", tiny_train_args(cifar10_root, tmp_path, "data.train_size=60"), monkeypatch)
    parent = tmp_path / "cifar10/resnet18-w4/vanilla-n60/seed0"
    args = tiny_train_args(cifar10_root, tmp_path, "data.train_size=120", f"init_from={parent}")
    run_entry_point("train", args, monkeypatch)
    sha = file_sha256(parent / "weights.pt")
    (child,) = tmp_path.glob(f"cifar10/resnet18-w4/vanilla-n120-from{sha[:8]}/seed0")
    assert json.loads((child / "metrics.json").read_text())["init_from_sha256"] == sha


def test_a_killed_run_resumes_from_its_last_checkpoint(cifar10_root, tmp_path):
    """SIGKILL after the first epoch's checkpoint; the same command then finishes the run."""
    args = tiny_train_args(cifar10_root, tmp_path, "trainer.max_epochs=40", "trainer.robust_val_every_n_epochs=0")
    cmd = [sys.executable, str(REPO / "train.py"), *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = tmp_path / "cifar10/resnet18-w4/vanilla/seed0"
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    while not (run / "last.ckpt").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (run / "last.ckpt").exists() and not (run / "metrics.json").exists()
    killed_at = torch.load(run / "last.ckpt", weights_only=False)["epoch"]
    assert killed_at < 39

    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming from" in done.stderr + done.stdout
    assert json.loads((run / "metrics.json").read_text())["epochs"] == 40
    assert len(list(run.glob("csv/version_*"))) == 2  # the first attempt's log is kept
    epochs = sorted({int(float(r["epoch"])) for r in read_csv(run) if r.get("val/acc")})
    assert epochs == list(range(40))  # every epoch validated exactly once across the two attempts


def test_the_command_line_logs_to_offline_wandb_and_csv(cifar10_root, tmp_path):
    """`python train.py ...` as a user runs it: the offline W&B run and the CSV log hold the metrics."""
    args = [a for a in tiny_train_args(cifar10_root, tmp_path) if not a.startswith("logger.wandb.mode")]
    env = {**os.environ, "OMP_NUM_THREADS": "1", **wandb_dirs(tmp_path)}
    done = subprocess.run([sys.executable, str(REPO / "train.py"), *args, "logger.wandb.mode=offline",
                           "logger.wandb.log_model=true"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    console = done.stdout + done.stderr
    for noise in ("Tip:", "TPU available", "anonymous setting", "exists and is not empty", "LeafSpec", "Total params"):
        assert noise not in console, noise  # nothing the user cannot act on
    run = tmp_path / "cifar10/resnet18-w4/vanilla/seed0"
    (wandb_file,) = run.glob("wandb/offline-run-*/run-*.wandb")
    blob = wandb_file.read_bytes()
    rows = read_csv(run)
    test_acc = next(r["test/acc"] for r in rows if r.get("test/acc"))
    # History items are stored as (key, JSON value) strings inside the binary record log.
    for key in (b"train/loss", b"val/acc", b"val/robust_acc", b"test/acc", b"test/robust_acc"):
        assert key in blob, key
    assert json.dumps(float(test_acc)).encode() in blob

    # Decoded: what a dashboard filters, groups and plots by.
    from stir.reporting.wandb_read import read_run

    wb = read_run(wandb_file, wait_s=30.0)
    assert wb.job_type == "train" and wb.name == "cifar10/resnet18-w4/vanilla/seed0"
    assert wb.group.startswith("cifar10/resnet18-w4/vanilla:") and "seed" not in wb.group
    assert set(wb.tags) == {"cifar10", "resnet18", "vanilla"}
    assert {k: wb.config[k] for k in ("loss", "arch", "width", "data", "train_size", "seed", "beta", "eps")} == {
        "loss": "vanilla", "arch": "resnet18", "width": 4, "data": "cifar10", "train_size": None, "seed": 0,
        "beta": None, "eps": None}
    assert wb.config["recipe"]["optim.lr"] == 0.1
    assert {"train/epoch_loss", "train/epoch_acc", "val/acc", "epoch", "test/acc", "test/robust_acc",
            "test/robust_subset_acc"} <= wb.history_keys
    assert wb.summary["test/acc"] == pytest.approx(float(test_acc))
    assert [a["type"] for a in wb.artifacts] == ["model"] and wb.artifacts[0]["name"] == wb.config["artifact"]
    from stir.reporting.dashboard import missing_keys

    assert missing_keys(wb) == []  # every training panel of the dashboard finds its keys


def test_bad_override_fails_on_the_command_line_before_any_work(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "train.py"), "model=resnet99", f"runs_dir={tmp_path}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "resnet99" in done.stderr and "resnet18" in done.stderr
    assert not (tmp_path / "cifar10").exists()


@pytest.mark.parametrize("change, key", [("optim.lr=0.05", "optim.lr"), ("data.batch_size=20", "data.batch_size")])
def test_a_finished_folder_is_not_reused_for_another_recipe(change, key, cifar10_root, tmp_path, monkeypatch):
    """The same folder name, a different recipe: refused with the keys, never 'finished; skipping'."""
    args = tiny_train_args(cifar10_root, tmp_path)
    run_entry_point("train", args, monkeypatch)
    run = tmp_path / "cifar10/resnet18-w4/vanilla/seed0"
    before = {p.name: p.stat().st_mtime_ns for p in run.iterdir() if p.is_file()}
    with pytest.raises(ValueError, match=rf"finished run of a different recipe \({key}: .*retrain=true"):
        run_entry_point("train", args + [change], monkeypatch)
    assert {p.name: p.stat().st_mtime_ns for p in run.iterdir() if p.is_file()} == before  # nothing touched


def test_another_data_source_is_another_recipe(tmp_path, monkeypatch):
    """data.source enters the recipe by content: another tree under the same path is refused."""
    from stir.data import synthetic

    source = tmp_path / "images"
    synthetic.write_image_folder(source, n_train=60, n_test=20, seed=0)
    args = tiny_train_args(tmp_path / "cache", tmp_path / "runs", f"data.source={source}", "data.holdout_size=20")
    run_entry_point("train", args, monkeypatch)
    recipe = json.loads((tmp_path / "runs/cifar10/resnet18-w4/vanilla/seed0/recipe.json").read_text())["recipe"]
    assert recipe["data.source"]["files"] == 80
    run_entry_point("train", args, monkeypatch)  # same content: reused
    import shutil

    shutil.rmtree(source)
    synthetic.write_image_folder(source, n_train=70, n_test=20, seed=1)
    with pytest.raises(ValueError, match=r"different recipe \(data.source: .*'files': 80.*'files': 90"):
        run_entry_point("train", args, monkeypatch)


def test_the_zoo_refuses_a_folder_of_another_recipe(cifar10_root, tmp_path, monkeypatch):
    from stir.zoo import Recipes

    args = tiny_train_args(cifar10_root, tmp_path / "runs")
    run_entry_point("train", args, monkeypatch)
    (tmp_path / "zoo.yaml").write_text("plain: [loss=vanilla]\n")
    common = [a for a in args if not a.startswith("runs_dir")]

    def zoo(*extra):
        return Recipes(tmp_path / "zoo.yaml", REPO / "configs", overrides=[*common, *extra], runs_dir=str(tmp_path / "runs"))

    assert zoo().resolve("plain", must_exist=True).run_dir == tmp_path / "runs/cifar10/resnet18-w4/vanilla/seed0"
    with pytest.raises(ValueError, match=r"zoo model 'plain'.*another recipe; optim.lr: 0.1 here, 0.05 asked"):
        zoo("optim.lr=0.05").resolve("plain", must_exist=True)


def test_init_from_of_another_architecture_is_named_and_leaves_nothing(cifar10_root, tmp_path, monkeypatch):
    run_entry_point("train", tiny_train_args(cifar10_root, tmp_path / "a", "model=vgg16"), monkeypatch)
    parent = tmp_path / "a/cifar10/vgg16-w4/vanilla/seed0"
    with pytest.raises(ValueError, match=r"checkpoint is vgg16/4, recipe is resnet18/4"):
        run_entry_point("train", tiny_train_args(cifar10_root, tmp_path / "b", f"init_from={parent}"), monkeypatch)
    assert not (tmp_path / "b").exists()


@pytest.mark.slow  # ~50 s: three train.py processes
def test_a_killed_and_resumed_run_ends_with_the_uninterrupted_weights(cifar10_root, tmp_path):
    """SIGKILL in epoch 2 of an AT run, resume: bit-identical weights to a run never interrupted.

    Needs the shuffle order and the augmentation / attack random streams restored, not restarted.
    """
    args = ["loss=at", "trainer.max_epochs=5", "trainer.robust_val_every_n_epochs=2", "trainer.robust_val_size=10"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def command(runs):
        return [sys.executable, str(REPO / "train.py"), *tiny_train_args(cifar10_root, runs, *args)]

    whole = subprocess.Popen(command(tmp_path / "whole"), cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    run = tmp_path / "killed/cifar10/resnet18-w4/at-it2/seed0"
    proc = subprocess.Popen(command(tmp_path / "killed"), cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while not (run / "last.ckpt").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (run / "metrics.json").exists()
    killed_at = torch.load(run / "last.ckpt", weights_only=False)["epoch"]
    assert killed_at < 4
    done = subprocess.run(command(tmp_path / "killed"), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert whole.wait(timeout=600) == 0, whole.stderr.read()[-3000:]
    resumed = load_state_dict(str(run))
    reference = load_state_dict(str(tmp_path / "whole/cifar10/resnet18-w4/at-it2/seed0"))
    assert resumed.keys() == reference.keys()
    different = [k for k in reference if not torch.equal(resumed[k], reference[k])]
    assert not different, f"killed after epoch {killed_at}: {different[:5]}"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["resumed_from_epoch"] == killed_at + 1 and metrics["epochs"] == 5


def test_a_second_process_on_the_same_recipe_waits_and_reuses_the_run(cifar10_root, tmp_path, monkeypatch):
    """While one process holds the run folder, train.py waits for it, then finds the run finished."""
    import shutil
    import threading

    from stir.training.runs import RunFolder

    run_entry_point("train", tiny_train_args(cifar10_root, tmp_path / "elsewhere"), monkeypatch)
    finished = tmp_path / "elsewhere/cifar10/resnet18-w4/vanilla/seed0"
    run = tmp_path / "runs/cifar10/resnet18-w4/vanilla/seed0"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with RunFolder(run).lock():  # "process 1" is training this recipe
        proc = subprocess.Popen([sys.executable, str(REPO / "train.py"), *tiny_train_args(cifar10_root, tmp_path / "runs")],
                                cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
        reader.start()
        deadline = time.time() + 120
        while not any("another process is training" in line for line in lines) and time.time() < deadline:
            assert proc.poll() is None, "".join(lines)[-3000:]  # must wait, not train on its own
            time.sleep(0.1)
        assert not run.exists()
        shutil.copytree(finished, run)  # process 1 finishes
    assert proc.wait(timeout=120) == 0
    reader.join(timeout=10)
    assert "is finished; skipping" in "".join(lines)
    assert sorted(p.name for p in run.glob("csv/version_*")) == ["version_0"]  # only process 1's attempt


def test_clean_accuracy_is_also_reported_on_the_attacked_subset(cifar10_root, tmp_path, monkeypatch):
    """test/robust_acc is over the first robust_test_size test images: clean accuracy on the same ones too."""
    run_entry_point("train", tiny_train_args(cifar10_root, tmp_path, "trainer.robust_test_size=15"), monkeypatch)
    run = tmp_path / "cifar10/resnet18-w4/vanilla/seed0"
    metrics = json.loads((run / "metrics.json").read_text())
    logits, labels = tiny_run_test_logits(run, cifar10_root)
    correct = (logits.argmax(1) == labels).float()
    assert metrics["test/robust_subset_acc"] == pytest.approx(correct[:15].mean().item(), abs=1e-6)
    assert metrics["test/acc"] == pytest.approx(correct.mean().item(), abs=1e-6)
