"""What the fault tests share: tiny runs through the real entry points, and the faults themselves.

Faults are real where this machine allows it without root: truncated files, garbage images, NaN
weights, signals to real processes; a full disk is a write that fails with ENOSPC after writing
part of the file (``full_disk``), and, in the slow tests, a real 64 KiB tmpfs or a read-only bind
mount inside a user namespace (``unshare -rm``), when the kernel permits one.
"""
from __future__ import annotations

import errno
import io
import os
import shutil
import subprocess
import sys
from contextlib import redirect_stderr
from pathlib import Path
from typing import List, Sequence, Tuple

import pytest

from conftest import REPO, load_entry_point, run_entry_point, tiny_train_args, wandb_dirs

RUN = "cifar10/resnet18-w4/vanilla/seed{seed}"


def train(data_root: Path, runs: Path, monkeypatch, *extra: str, seed: int = 0) -> Path:
    """``python train.py`` of the tiny recipe (in this process); its run folder."""
    run_entry_point("train", tiny_train_args(data_root, runs, f"seed={seed}", "trainer.robust_val_every_n_epochs=0",
                                             *extra), monkeypatch)
    return runs / RUN.format(seed=seed)


def train_seed_pair(data_root: Path, tmp_path_factory) -> Path:
    """A module's runs folder with two finished tiny runs (seeds 0 and 1), for fixtures that damage copies."""
    runs = tmp_path_factory.mktemp("runs")
    mp = pytest.MonkeyPatch()
    try:
        for seed in (0, 1):
            train(data_root, runs, mp, seed=seed)
    finally:
        mp.undo()
    return runs


def eval_args(out: Path, *extra: str) -> List[str]:
    """evaluate.py at test cost: 8 images, one draw of 6 arbitrary-IRI steps, no extra ceiling draw, no W&B."""
    return [f"out_dir={out}", "n=8", "k=1", "iri=arbitrary", "inversion.steps=6", "inversion.record_steps=[3]",
            "inversion.tolerance=0.05", "iri_grid_images=2", "calibration.permutations=2", "calibration.resamples=10",
            "calibration.ceiling=same_draws",
            "logger.wandb.mode=disabled", "device=cpu", *extra]


def evaluate(out: Path, monkeypatch, *extra: str) -> None:
    run_entry_point("evaluate", eval_args(out, *extra), monkeypatch)


def exit_of(name: str, args: Sequence[str], monkeypatch) -> Tuple[int, str]:
    """(exit status, stderr) of ``python <name>.py *args`` in this process as a user runs it
    (no HYDRA_FULL_ERROR): what one_line_errors prints."""
    module = load_entry_point(name)
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *args])
    err = io.StringIO()
    with redirect_stderr(err), pytest.raises(SystemExit) as stop:
        module.main()
    return stop.value.code, err.getvalue()


def full_disk(monkeypatch, name: str = "", after: int = 0, under: str = "") -> dict:
    """Every write to a temp file of ``stir.atomic`` for the file ``name`` (any, when empty) in a
    folder whose path contains ``under`` fails with ENOSPC once ``after`` such files were written in
    full: half of the bytes go in, then the disk is full (what write(2) does on a full filesystem).
    Other writes pass. Returns the temp files seen and the failures."""
    real = os.write
    seen = {"files": set(), "failed": 0}

    def write(fd, data):
        try:
            full = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return real(fd, data)
        target = os.path.basename(full)
        if not (target.startswith(f".{name}." if name else ".") and target.endswith(".tmp") and under in full):
            return real(fd, data)
        seen["files"].add(target)
        if len(seen["files"]) <= after:
            return real(fd, data)
        seen["failed"] += 1
        real(fd, bytes(data[: max(1, len(data) // 2)]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", write)
    return seen


def truncate(path: Path, keep: float = 0.5) -> None:
    """Cut a file to ``keep`` of its bytes (what a copy killed half-way leaves)."""
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def copy_run(run: Path, dest: Path) -> Path:
    shutil.copytree(run, dest)
    return dest


# ------------------------------------------------------------------ real processes (slow tests)
def entry_point_command(name: str, *args: str, prelude: str = "") -> List[str]:
    """``python -c`` running ``<name>.py`` as ``python <name>.py *args`` would, after ``prelude``
    (Python code: a fault to inject in the real process)."""
    code = (f"import runpy, sys\n{prelude}\nsys.argv = [{str(REPO / f'{name}.py')!r}, *{list(args)!r}]\n"
            f"runpy.run_path(sys.argv[0], run_name='__main__')\n")
    return [sys.executable, "-c", code]


def env(tmp_path: Path) -> dict:
    """A child process's environment as a user's shell gives it: no HYDRA_FULL_ERROR (an in-process test's
    setting must not turn the one-line errors these tests read into tracebacks)."""
    return {**{k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}, "OMP_NUM_THREADS": "1",
            "PYTHONPATH": str(REPO), **wandb_dirs(tmp_path)}


def userns_mounts() -> bool:
    """Whether this kernel lets an unprivileged user namespace mount (tmpfs, read-only binds)."""
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null || "
                           "mount -t tmpfs -o size=64k tmpfs /tmp"], capture_output=True)
    return done.returncode == 0


def in_namespace(mounts: str, command: Sequence[str]) -> List[str]:
    """``command`` in a user + mount namespace after the shell ``mounts`` (as root of the namespace)."""
    import shlex

    return ["unshare", "-rm", "sh", "-c", f"{mounts} && exec {' '.join(shlex.quote(c) for c in command)}"]
