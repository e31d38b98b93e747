"""Issue 21's faults on real processes of train.py and evaluate.py: SIGTERM during a checkpoint
write, a really full filesystem, read-only folders, Ctrl-C (SIGINT) while W&B logs a report.

Slow: each starts Python processes. Run with ``pytest -m slow tests/faults``. The filesystem tests
need an unprivileged user namespace (``unshare -rm``: a 700 KiB tmpfs, a read-only bind mount) and
are skipped where the kernel does not allow one.
"""
import json
import shlex
import signal
import subprocess
import sys
import time

import pytest

from faultkit import RUN, entry_point_command, env, eval_args, in_namespace, userns_mounts
from conftest import tiny_train_args

pytestmark = pytest.mark.slow
needs_userns = pytest.mark.skipif(not userns_mounts(), reason="no unprivileged user namespace with mounts here")


def train_args(cifar10_root, runs, *extra):
    return tiny_train_args(cifar10_root, runs, "trainer.robust_val_every_n_epochs=0", *extra)


def epoch_of(path):
    import torch

    return torch.load(path, map_location="cpu", weights_only=False)["epoch"]


# Pause the real process half-way through writing its second checkpoint: half the bytes in the temp
# file, a marker for the test, then wait (as a slow network filesystem would) for the signal.
PAUSE_IN_SECOND_CHECKPOINT = """
import os, time
_write, _seen = os.write, set()
def _slow(fd, data):
    try:
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return _write(fd, data)
    if name.startswith(".last.ckpt.") and name.endswith(".tmp"):
        _seen.add(name)
        if len(_seen) == 2:
            _write(fd, bytes(data[: len(data) // 2]))
            open(os.environ["MARKER"], "w").close()
            while True:
                time.sleep(0.1)
    return _write(fd, data)
os.write = _slow
"""


def test_sigterm_during_a_checkpoint_write_leaves_the_previous_one_and_the_rerun_resumes(cifar10_root, tmp_path):
    runs, marker = tmp_path / "runs", tmp_path / "writing"
    run = runs / RUN.format(seed=0)
    args = train_args(cifar10_root, runs, "trainer.max_epochs=3")
    proc = subprocess.Popen(entry_point_command("train", *args, prelude=PAUSE_IN_SECOND_CHECKPOINT),
                            env={**env(tmp_path), "MARKER": str(marker)}, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert marker.exists(), proc.stderr.read().decode()[-3000:]
    proc.send_signal(signal.SIGTERM)  # the scheduler's pre-emption notice ...
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()  # ... and its kill when the grace period is over, the write still unfinished
        proc.wait()
    assert epoch_of(run / "last.ckpt") == 0  # the previous checkpoint, whole
    assert list(run.glob(".last.ckpt.*.tmp"))  # the unfinished write stayed in its temp file

    done = subprocess.run(entry_point_command("train", *args), env=env(tmp_path), cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resuming from {run / 'last.ckpt'}" in done.stdout + done.stderr
    assert json.loads((run / "metrics.json").read_text())["resumed_from_epoch"] == 1
    assert not list(run.glob(".last.ckpt.*.tmp"))  # the dead writer's temp file is cleaned up


@needs_userns
def test_a_really_full_filesystem_keeps_the_previous_checkpoint_and_the_rerun_resumes(cifar10_root, tmp_path):
    """runs_dir on a 700 KiB tmpfs: the first checkpoint (435,205 bytes) fits, the second one does not
    fit beside it. Then the filesystem grows (remount) and the same command resumes."""
    runs, saved = tmp_path / "runs", tmp_path / "saved"
    runs.mkdir()
    args = train_args(cifar10_root, runs, "trainer.max_epochs=2")
    train = " ".join(shlex.quote(a) for a in entry_point_command("train", *args))
    check = " ".join(shlex.quote(a) for a in [
        sys.executable, "-c", "import torch, sys; print('EPOCH', torch.load(sys.argv[1], weights_only=False)['epoch'])",
        str(runs / RUN.format(seed=0) / "last.ckpt")])
    script = (f"mount -t tmpfs -o size=700k tmpfs {runs} && cd {tmp_path} && "
              f"{{ {train} > {tmp_path}/first.log 2>&1; echo FIRST $?; }} && {check} && "
              f"mount -o remount,size=8m {runs} && {{ {train} > {tmp_path}/second.log 2>&1; echo SECOND $?; }} && "
              f"cp -r {runs} {saved}")
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], env=env(tmp_path), capture_output=True, text=True,
                          timeout=900)
    assert (tmp_path / "second.log").is_file(), done.stdout + done.stderr
    first, second = (tmp_path / "first.log").read_text(), (tmp_path / "second.log").read_text()
    assert "FIRST 2" in done.stdout, first[-3000:]
    (error,) = [line for line in first.splitlines() if line.startswith("error:")]
    assert "No space left on device" in error and "last.ckpt" in error and "Traceback" not in first
    assert "EPOCH 0" in done.stdout  # the previous checkpoint survived whole
    assert "SECOND 0" in done.stdout, second[-3000:]
    assert "resuming from" in second
    assert json.loads((saved / RUN.format(seed=0) / "metrics.json").read_text())["epochs"] == 2


@needs_userns
def test_read_only_folders_one_line_and_a_finished_run_is_reused(cifar10_root, tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "results"
    out.mkdir()
    for seed in (0, 1):
        done = subprocess.run(entry_point_command("train", *train_args(cifar10_root, runs, f"seed={seed}")),
                              env=env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    read_only = f"mount --bind {runs} {runs} && mount -o remount,bind,ro {runs} && " \
                f"mount --bind {out} {out} && mount -o remount,bind,ro {out}"
    again = subprocess.run(in_namespace(read_only, entry_point_command("train", *train_args(cifar10_root, runs))),
                           env=env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "is finished; skipping" in again.stdout + again.stderr, again.stderr[-2000:]
    pair = [f"ref={runs / RUN.format(seed=0)}", f"target={runs / RUN.format(seed=1)}"]
    done = subprocess.run(in_namespace(read_only, entry_point_command("evaluate", *eval_args(out, *pair))),
                          env=env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2 and "Traceback" not in done.stderr
    # refused at start, before any model or image loads (issue 67), naming the key, the folder and the reason
    assert "Read-only file system" in error and str(out) in error and "out_dir=" in error


# Ctrl-C in the real process while the report's tables go to W&B: SIGINT to itself, delivered as
# KeyboardInterrupt in the main thread before the first table is built (Python's handler installed as a
# terminal's shell leaves it: a background job's child inherits SIGINT ignored).
SIGINT_WHILE_LOGGING = """
import os, signal, time, wandb
signal.signal(signal.SIGINT, signal.default_int_handler)
def _interrupted(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
wandb.Table = _interrupted
"""


def test_ctrl_c_while_logging_to_wandb_then_the_rerun_logs_a_complete_run(cifar10_root, tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "results"
    for seed in (0, 1):
        done = subprocess.run(entry_point_command("train", *train_args(cifar10_root, runs, f"seed={seed}")),
                              env=env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    args = eval_args(out, f"ref={runs / RUN.format(seed=0)}", f"target={runs / RUN.format(seed=1)}",
                     "logger.wandb.mode=offline")
    first = subprocess.run(entry_point_command("evaluate", *args, prelude=SIGINT_WHILE_LOGGING), env=env(tmp_path),
                           cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert first.returncode != 0 and "KeyboardInterrupt" in first.stderr, first.stderr[-2000:]
    (folder,) = out.glob("pair_vanilla-seed0_vs_vanilla-seed1-*")
    (interrupted,) = folder.glob("wandb/offline-run-*")
    assert not list(interrupted.glob("files/media/table/*.table.json"))

    second = subprocess.run(entry_point_command("evaluate", *args), env=env(tmp_path), cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-2000:]
    said = second.stdout + second.stderr
    assert "holds no complete W&B run" in said and "result store hit" in said
    (complete,) = [r for r in folder.glob("wandb/offline-run-*") if r != interrupted]
    assert list(complete.glob("files/media/table/*.table.json"))
    assert json.loads((folder / "wandb" / "complete.json").read_text()) == [complete.name]
