"""The zoo through Hydra's submitit launcher: config composition (fast) and a local sweep (slow).

SLURM itself is not here; ``hydra/launcher=submitit_local`` runs the same pickled jobs as local
subprocesses, through the real train.py / evaluate.py entry points.
"""
import csv
import json
import os
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from conftest import REPO, tiny_train_args

pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="the optional [cluster] extra")

TINY_ZOO = [  # tests/evaluation/test_evaluate_entry.py's zoo recipes: width 4, one epoch
    "data.download=false", "data.holdout_size=40", "data.batch_size=40", "model.width=4", "trainer.max_epochs=1",
    "attack.steps=2", "eval_attack.steps=2", "trainer.robust_test_size=10", "trainer.robust_val_every_n_epochs=0",
    "trainer.enable_progress_bar=false", "logger.wandb.mode=disabled",
]


@pytest.mark.parametrize("config_dir, name, overrides", [
    (REPO / "configs", "train", ["loss=at", "seed=1"]),
    (REPO / "configs/evaluate", "evaluate", ["experiment=architectures", "shard=3", "shards=4"]),
])
def test_the_slurm_launcher_config_composes(config_dir, name, overrides):
    from stir.experiments.config import register_evaluate_configs
    from stir.config.store import register_configs

    register_configs()
    register_evaluate_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            cfg = compose(name, overrides=["hydra/launcher=slurm", "hydra.launcher.partition=gpu", *overrides],
                          return_hydra_config=True)
    finally:
        GlobalHydra.instance().clear()
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert (launcher.partition, launcher.gpus_per_node, launcher.tasks_per_node) == ("gpu", 1, 1)
    assert launcher.timeout_min > 0 and launcher.max_num_timeout > 0 and launcher.signal_delay_s > 0
    assert str(cfg.hydra.sweep.dir).startswith(str(cfg.runs_dir if name == "train" else cfg.out_dir))


@pytest.mark.slow  # ~2 min: four submitit jobs and an assembling run, each importing torch
def test_a_local_sweep_trains_the_zoo_then_shards_evaluate_it(cifar10_root, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}  # the jobs import stir

    def run(script, *args):
        done = subprocess.run([sys.executable, str(REPO / script), *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
        return done

    runs = tmp_path / "runs"
    run("train.py", "-m", "hydra/launcher=submitit_local", "loss=vanilla,at", "profile=full",
        f"data.root={cifar10_root}", *TINY_ZOO, f"runs_dir={runs}")
    for folder in ("vanilla", "at-it2"):
        assert (runs / f"cifar10/resnet18-w4/{folder}/seed0/metrics.json").is_file(), folder

    quoted = ",".join(f'"{o}"' for o in [f"data.root={cifar10_root}", *TINY_ZOO])
    common = ["experiment=relative_robustness", "experiment.models=[at,vanilla]", f"zoo.overrides=[{quoted}]",
              f"zoo.runs_dir={runs}", f"out_dir={tmp_path / 'results'}", "n=12", "k=2", "inversion.steps=15",
              "inversion.tolerance=0.05", "iri_grid_images=4", "logger.wandb.mode=disabled"]
    run("evaluate.py", "-m", "hydra/launcher=submitit_local", "shard=range(2)", "shards=2", *common)
    store = tmp_path / "results/store"
    directions = {p: p.stat().st_mtime_ns for p in store.glob("direction/*.json")}
    assert len(directions) == 4  # the 2x2 matrix, split over the two shard jobs
    assert sorted(json.loads(p.read_text())["result"]["ref"] for p in directions) == ["at", "at", "vanilla", "vanilla"]
    assert not list((tmp_path / "results").glob("relative_robustness*/matrix_stir.csv"))

    run("evaluate.py", *common)  # the assembling run: from the store alone
    assert {p: p.stat().st_mtime_ns for p in store.glob("direction/*.json")} == directions
    matrix = list(csv.DictReader(open(tmp_path / "results/relative_robustness/matrix_stir.csv")))
    assert [r["m1 (ref) \\ m2 (target)"] for r in matrix] == ["at", "vanilla"]


def _submitit_tasks(folder) -> list:
    """PIDs of the submitit task processes (``python -m submitit.core._submit <folder>/...``) under ``folder``."""
    from pathlib import Path

    pids = []
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0") if proc.name.isdigit() else []
        except OSError:  # the process ended meanwhile
            continue
        if b"submitit.core._submit" in args and any(str(folder).encode() in a for a in args):
            pids.append(int(proc.name))
    return pids


@pytest.mark.slow  # ~70 s: a submitit_local job, its requeue, and a plain run beside it
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the job's process in /proc")
def test_a_requeued_submitit_job_resumes_to_the_uninterrupted_weights(cifar10_root, tmp_path):
    """SIGUSR2 (what SLURM sends before a time limit, and submitit_local at its own) after the first epoch's
    checkpoint: submitit requeues the job, the restarted train.py resumes from last.ckpt, and ends with the
    weights of a run never interrupted."""
    import signal
    import time

    import torch

    from stir.training.runs import load_state_dict

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    recipe = [f"data.root={cifar10_root}", *TINY_ZOO, "trainer.max_epochs=4"]
    runs = tmp_path / "runs"
    sweep = subprocess.Popen([sys.executable, str(REPO / "train.py"), "-m", "hydra/launcher=submitit_local", *recipe,
                              f"runs_dir={runs}"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    whole = subprocess.Popen([sys.executable, str(REPO / "train.py"), *recipe, f"runs_dir={tmp_path / 'whole'}"],
                             cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    run = runs / "cifar10/resnet18-w4/vanilla/seed0"
    deadline = time.time() + 300
    while not (run / "last.ckpt").exists() and sweep.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    tasks = _submitit_tasks(runs)
    assert len(tasks) == 1 and not (run / "metrics.json").exists()
    os.kill(tasks[0], signal.SIGUSR2)
    out = sweep.communicate(timeout=600)[0]
    assert sweep.returncode == 0, out[-4000:]
    assert whole.wait(timeout=600) == 0, whole.stderr.read()[-3000:]
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["resumed_from_epoch"] is not None and metrics["epochs"] == 4
    resumed, reference = load_state_dict(str(run)), load_state_dict(str(tmp_path / "whole/cifar10/resnet18-w4/vanilla/seed0"))
    assert [k for k in reference if not torch.equal(resumed[k], reference[k])] == []
