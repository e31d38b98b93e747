"""The errors a new user met in the first hour (issue 22), each through the real entry point: one line
that names the key or value and the fix, exit status 2 (or, where nothing was refused, the behaviour
the README promises). Errors 1 and 4 (key typos, --help) are tests/config/test_command_line.py."""
import json
import runpy
import sys
from pathlib import Path

import pytest

from conftest import REPO, refused, run_entry_point, tiny_train_args
from stir.data import synthetic

TINY_ZOO = ["data.download=false", "data.holdout_size=40", "data.batch_size=40", "model.width=4", "trainer.max_epochs=1",
            "attack.steps=2", "eval_attack.steps=2", "trainer.robust_test_size=10", "trainer.robust_val_every_n_epochs=0",
            "trainer.enable_progress_bar=false", "logger.wandb.mode=disabled"]


def zoo_args(tmp_path: Path, *extra: str) -> list:
    overrides = ",".join(f'"{o}"' for o in TINY_ZOO)
    return [f"zoo.overrides=[{overrides}]", f"zoo.runs_dir={tmp_path / 'runs'}", f"out_dir={tmp_path / 'results'}",
            "n=8", "k=1", "inversion.steps=3", "logger.wandb.mode=disabled", *extra]


def test_2_a_model_trained_on_a_local_copy_names_data_source(tmp_path, monkeypatch, capsys):
    """Evaluating the tour's models without data.source: the fix is that key, not retrain=true."""
    source = tmp_path / "images"
    synthetic.write_image_folder(source, n_train=100, n_test=20, seed=0)
    run_entry_point("train", [*TINY_ZOO, f"data.source={source}", f"runs_dir={tmp_path / 'runs'}"], monkeypatch)
    message = refused("evaluate", zoo_args(tmp_path, "ref=vanilla", "target=vanilla"), monkeypatch, capsys)
    assert message.startswith("zoo model 'vanilla' (`python train.py profile=full")
    assert f"it was trained on data.source={source}: evaluate it with data.source={source}" in message
    assert "retrain" not in message


def test_2_a_cifar100_model_on_its_own_copy_names_zoo_sources_beside_the_cifar10_copy(tmp_path, monkeypatch, capsys):
    """data.source is the CIFAR-10 copy; a CIFAR-100 zoo model trained on its own copy is found with
    zoo.sources.cifar100=PATH, and the refusal without it names that key, not data.source."""
    cifar10, cifar100 = tmp_path / "c10", tmp_path / "c100"
    synthetic.write_image_folder(cifar10, n_train=100, n_test=20, seed=0)
    synthetic.write_image_folder(cifar100, num_classes=100, n_train=200, n_test=100, seed=1)
    run_entry_point("train", [*TINY_ZOO, "data=cifar100", f"data.source={cifar100}", f"runs_dir={tmp_path / 'runs'}"],
                    monkeypatch)
    both = ["ref=c100", "target=c100", f"data.source={cifar10}"]
    message = refused("evaluate", zoo_args(tmp_path, *both), monkeypatch, capsys)
    assert f"it was trained on data.source={cifar100}: evaluate it with zoo.sources.cifar100={cifar100}" in message
    run_entry_point("evaluate", zoo_args(tmp_path, *both, f"zoo.sources.cifar100={cifar100}"), monkeypatch)
    stored = [json.loads(f.read_text())["record"] for f in (tmp_path / "results" / "store").rglob("*.json")]
    # X: the CIFAR-100 model's own images, from its own copy
    assert stored and {(r["images"]["data"], r["images"]["source"]) for r in stored} == {("cifar100", str(cifar100))}


def test_3_a_misspelt_zoo_name_names_close_matches_not_the_whole_list(tmp_path, monkeypatch, capsys):
    message = refused("evaluate", zoo_args(tmp_path, "ref=vanila", "target=vanilla"), monkeypatch, capsys)
    assert message.startswith("unknown model 'vanila': not a zoo name of") and "did you mean 'vanilla'" in message
    assert "at_s1" not in message and len(message) < 400


def test_3_a_checkpoint_path_that_does_not_exist_says_so(tmp_path, monkeypatch, capsys):
    missing = tmp_path / "runs" / "nope" / "weights.pt"
    message = refused("evaluate", zoo_args(tmp_path, f"ref={missing}", "target=vanilla"), monkeypatch, capsys)
    assert message.startswith(f"no run folder or checkpoint at {missing}")
    assert f"({tmp_path} exists, runs/nope/weights.pt in it does not)" in message and "zoo" not in message


def test_5_an_at_run_logs_the_training_accuracy_the_dashboard_plots(cifar10_root, tmp_path, monkeypatch, capsys):
    from stir.reporting import dashboard

    run_entry_point("train", tiny_train_args(cifar10_root, tmp_path, "loss=at", "logger.wandb.mode=offline"), monkeypatch)
    (wandb_file,) = tmp_path.glob("cifar10/resnet18-w4/at-it2/seed0/wandb/offline-run-*/run-*.wandb")
    capsys.readouterr()
    dashboard.main(["check", str(wandb_file)])  # raises SystemExit(1) when a panel's key is missing
    assert capsys.readouterr().out.strip().endswith(": ok")


def test_6_the_robustbench_skip_and_error_say_the_extra_is_not_installed(tmp_path, monkeypatch, capsys):
    """torchattacks' wheel ships a robustbench/ folder: finding it does not mean the extra is installed."""
    from stir.models.sources import robustbench

    monkeypatch.setattr(robustbench, "installed", lambda: False)
    message = refused("evaluate", zoo_args(tmp_path, "ref=robustbench:Sehwag2021Proxy_R18", "target=vanilla"),
                      monkeypatch, capsys)
    assert "robustbench models need the robustbench extra, which is not installed" in message
    assert message.endswith('pip install -e ".[robustbench]"') and "cannot be imported" not in message
    from source_nets import robustbench_or_skip

    with pytest.raises(pytest.skip.Exception, match="not installed"):
        robustbench_or_skip()


def test_7_wandb_read_without_a_run_says_what_to_give(capsys):
    from stir.reporting import wandb_read

    assert wandb_read.main([]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: give a run: python -m stir.reporting.wandb_read")


def test_8_the_install_check_names_a_torchvision_that_does_not_fit_torch(monkeypatch, capsys):
    import stir.cli

    def broken():
        raise RuntimeError("operator torchvision::nms does not exist")

    monkeypatch.setattr(stir.cli, "_torchvision_ops", broken)
    monkeypatch.setattr(sys, "argv", ["python -m stir"])
    with pytest.raises(SystemExit) as done:
        runpy.run_module("stir", run_name="__main__", alter_sys=False)
    assert done.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: torchvision ") and "(operator torchvision::nms does not exist)" in line
    assert "install both from one index" in line


def test_8_the_install_check_names_an_installed_extra_that_does_not_import(monkeypatch, capsys):
    """Issue 55: a reinstall that upgraded setuptools past 80 broke robustbench (no pkg_resources) while
    the check still said ok; now each installed extra must import, and the line names the repair."""
    import stir.cli
    from stir.models.sources import robustbench

    def no_pkg_resources():
        raise ModuleNotFoundError("No module named 'pkg_resources'")

    monkeypatch.setattr(robustbench, "_import", no_pkg_resources)  # what python -m stir imports robustbench with
    monkeypatch.setattr(stir.cli, "installed_extras", lambda: ["robustbench"])
    monkeypatch.setattr(sys, "argv", ["python -m stir"])
    with pytest.raises(SystemExit) as done:
        runpy.run_module("stir", run_name="__main__", alter_sys=False)
    assert done.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: the robustbench extra is installed but does not import (No module named 'pkg_resources')")
    assert 'pip install "setuptools<81"' in line


def test_8_the_torchvision_fix_keeps_the_installed_extras():
    import stir.cli

    assert stir.cli.reinstall_line(["robustbench", "cluster"]) == 'pip install -e ".[dev,robustbench,cluster]"'


def test_8_the_install_check_passes_here(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["python -m stir"])
    with pytest.raises(SystemExit) as done:
        runpy.run_module("stir", run_name="__main__", alter_sys=False)
    assert done.value.code == 0 and capsys.readouterr().out.startswith("stir ok: torch ")


def test_9_the_default_budget_is_recorded_as_1000_steps_not_null(tmp_path):
    from stir.experiments.config import compose_evaluate
    from stir.experiments.context import open_context
    from stir.reporting.index import report_settings

    cfg, experiment = compose_evaluate(REPO / "configs/evaluate", [f"out_dir={tmp_path}"])
    settings = report_settings(open_context(cfg, experiment, repo=REPO).config)
    assert settings["inversion.steps"] == 1000


# Issue 69: a misspelt model, a missing data file or absent real-network weights are refused before torch,
# the data and the models are loaded: one line, exit 2, none of the heavy modules imported.
_REFUSED_BEFORE_IMPORTS = """
import runpy, sys
sys.argv = {argv!r}
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as stop:
    code = stop.code
heavy = sorted(m for m in ("torch", "lightning", "torchvision", "numpy", "stir.zoo", "stir.data") if m in sys.modules)
print("HEAVY", code, heavy)
"""


def refused_before_imports(tmp_path: Path, *args: str, env: dict = None) -> str:
    """Run evaluate.py with ``args`` in a fresh interpreter; assert it stops with exit status 2 and one
    message line before any heavy import; return the message (without ``error: ``)."""
    import os
    import subprocess

    environment = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), **(env or {})}
    environment.pop("HYDRA_FULL_ERROR", None)
    argv = [str(REPO / "evaluate.py"), *args, f"out_dir={tmp_path / 'results'}"]
    done = subprocess.run([sys.executable, "-c", _REFUSED_BEFORE_IMPORTS.format(argv=argv)], cwd=tmp_path,
                          env=environment, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "HEAVY 2 []", (done.stdout[-2000:], done.stderr[-2000:])
    err = done.stderr.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("error: "), err  # the message, then how to see the traceback
    return err[0][len("error: "):]


def test_69_a_misspelt_model_name_is_refused_before_torch(tmp_path):
    message = refused_before_imports(tmp_path, "ref=vanila", "target=vanilla_s1", "profile=laptop")
    assert message.startswith("unknown model 'vanila': not a zoo name of") and "did you mean 'vanilla'" in message
    message = refused_before_imports(tmp_path, "experiment=seeds", "experiment.pairs=[[vanilla,at_s9]]")
    assert message.startswith("unknown model 'at_s9'")  # a kind's own model list too


def test_69_an_unknown_model_source_is_refused_before_torch(tmp_path):
    message = refused_before_imports(tmp_path, "ref=torchvison:resnet18", "target=vanilla")
    assert message.startswith("unknown model source 'torchvison' in 'torchvison:resnet18'; sources: ['zoo', ")
    assert "'torchvision'" in message


def test_69_a_missing_data_file_is_refused_before_torch(tmp_path):
    message = refused_before_imports(tmp_path, "ref=vanilla", "target=vanilla_s1", "data.source=/nope.tar.gz")
    assert message.startswith("data.source=/nope.tar.gz does not exist") and "CIFAR-10 copy" in message


@pytest.mark.parametrize("name", ["realnet:resnet20-akamaster", "r20"])  # a source string, a zoo entry naming one
def test_69_absent_real_network_weights_are_refused_before_torch_saying_how_to_get_them(tmp_path, name):
    empty = tmp_path / "realnets"
    empty.mkdir()
    message = refused_before_imports(tmp_path, f"ref={name}", "target=vanilla", env={"STIR_REALNETS": str(empty)})
    assert message.startswith(f"realnet:resnet20-akamaster: no file {empty / 'resnet20-akamaster.pt'} ($STIR_REALNETS)")
    assert "how to get them: docs/models.md#getting-the-weights" in message
    assert "### Getting the weights" in (REPO / "docs" / "models.md").read_text()


def test_69_the_source_prefixes_read_without_torch_are_the_registry_s():
    """stir.config.model_names reads the prefixes from the sources' registrations without importing them."""
    import subprocess

    from stir.config.model_names import source_prefixes
    from stir.models import sources

    assert list(source_prefixes()) == sources.names()
    code = "import sys; from stir.config.model_names import source_prefixes; assert source_prefixes(); " \
           "assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_69_ctrl_c_says_what_was_kept_and_how_to_resume_exit_130(tmp_path, monkeypatch):
    """A real SIGINT while a pair is being measured: one line (the results store kept, the same command
    resumes), exit status 130, no traceback."""
    import os
    import signal
    import subprocess
    import time

    source = tmp_path / "images"
    synthetic.write_image_folder(source, n_train=100, n_test=20, seed=0)
    run_entry_point("train", [*TINY_ZOO, f"data.source={source}", f"runs_dir={tmp_path / 'runs'}"], monkeypatch)
    args = [a for a in zoo_args(tmp_path, "ref=vanilla", "target=vanilla", f"data.source={source}")
            if not a.startswith("inversion.steps")] + ["inversion.steps=20000"]  # about 2 min: long enough to be interrupted, its first 5% line in seconds
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    env.pop("HYDRA_FULL_ERROR", None)
    # SIGINT as a terminal delivers it: a child of a background job inherits SIGINT ignored, and
    # Python then installs no KeyboardInterrupt handler, so restore the default before exec.
    with subprocess.Popen([sys.executable, str(REPO / "evaluate.py"), *args], cwd=tmp_path, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) as proc:
        said = []
        deadline = time.monotonic() + 300
        for line in proc.stdout:  # until the inversion's progress line: the pair is being measured
            said.append(line)
            if "image-step" in line or time.monotonic() > deadline:
                break
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=120)
    said += rest.splitlines(keepends=True)
    text = "".join(said)
    assert proc.returncode == 130, text[-3000:]
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-3000:]
    last = text.strip().splitlines()[-1]
    assert last.startswith(f"interrupted: the measurements finished so far are kept in the results store "
                           f"{tmp_path / 'results' / 'store'}; run the same command again to resume"), last


def test_69_the_command_prints_a_summary_the_wandb_line_once_and_where_the_results_are_last(tmp_path, monkeypatch):
    import os
    import subprocess

    source = tmp_path / "images"
    synthetic.write_image_folder(source, n_train=100, n_test=20, seed=0)
    run_entry_point("train", [*TINY_ZOO, f"data.source={source}", f"runs_dir={tmp_path / 'runs'}"], monkeypatch)
    args = [a for a in zoo_args(tmp_path, "ref=vanilla", "target=vanilla", f"data.source={source}")
            if not a.startswith("logger.wandb.mode")] + ["logger.wandb.mode=offline"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "WANDB_SILENT": "true"}
    done = subprocess.run([sys.executable, str(REPO / "evaluate.py"), *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 0, lines[-30:]
    assert lines[-1].startswith(f"results in {tmp_path / 'results'}") and "/README.md" in lines[-1]
    assert sum("wandb sync" in line for line in lines) == 1, [line for line in lines if "wandb" in line.lower()]
    assert any(line.startswith("STIR both ways") for line in lines)  # the headline, in words
    assert not any("tap_ref" in line or line.startswith("[1] ") for line in lines)  # not the whole report
    assert any("note(s) on how it was measured, the models and the data: in " in line for line in lines)
