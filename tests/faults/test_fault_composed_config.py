"""Issue 67, item 1: no configuration runs code, whatever way it reaches Hydra. The attacks of the
review, each through the real entry point: a logging filter ``(): numpy.load`` that unpickles a file
(from ``hydra.searchpath`` or ``--config-dir``), a YAML-escaped ``_target_`` and a symlinked folder
under ``--config-dir``, a FileHandler or ``hydra.output_subdir`` that overwrites a file. Each is
refused in one line naming the key, before anything runs or is written."""
import os
import pickle
from pathlib import Path

import pytest

from conftest import refused


class Shell:
    """Unpickling this runs ``touch marker`` (what numpy.load(allow_pickle=True) would do)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


LOGGING = """version: 1
filters:
  rt:
    (): numpy.load
    file: {pickle}
    allow_pickle: true
handlers:
  console: {{class: logging.StreamHandler, filters: [rt], stream: ext://sys.stdout}}
root: {{level: INFO, handlers: [console]}}
disable_existing_loggers: false
"""


@pytest.fixture
def place(tmp_path, monkeypatch):
    """(cwd, marker, victim): an empty working folder (the run folder), a marker that must never appear
    and a file outside the run folder that must keep its bytes."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    marker = tmp_path / "MARKER"
    yield cwd, marker, victim
    assert not marker.exists(), "a configuration ran code"
    assert victim.read_text() == "keep me", "a configuration overwrote a file"
    assert list(cwd.iterdir()) == [], "something was written before the refusal"


def logging_folder(tmp_path: Path, marker: Path) -> Path:
    """A config folder with hydra/job_logging/rt.yaml whose filter unpickles a shell command."""
    blob = tmp_path / "blob.pkl"
    blob.write_bytes(pickle.dumps(Shell(marker)))
    folder = tmp_path / "conf"
    (folder / "hydra" / "job_logging").mkdir(parents=True)
    (folder / "hydra" / "job_logging" / "rt.yaml").write_text(LOGGING.format(pickle=blob))
    return folder


@pytest.mark.parametrize("script", ["train", "evaluate"])
@pytest.mark.parametrize("how", ["searchpath", "config-dir"])
def test_a_logging_factory_from_a_yaml_file_runs_nothing(script, how, tmp_path, place, monkeypatch, capsys):
    _, marker, _ = place
    folder = logging_folder(tmp_path, marker)
    where = [f"hydra.searchpath=[file://{folder}]"] if how == "searchpath" else ["--config-dir", str(folder)]
    message = refused(script, [*where, "hydra/job_logging=rt"], monkeypatch, capsys)
    assert message.startswith("hydra.job_logging.filters.rt.()=numpy.load is a factory logging.config calls"), message
    assert "rt.yaml" in message or "hydra/job_logging=rt" in message, message


@pytest.mark.parametrize("script", ["train", "evaluate"])
def test_a_yaml_escaped_callable_key_under_config_dir_runs_nothing(script, tmp_path, place, monkeypatch, capsys):
    """``"\\x5ftarget_"`` is ``_target_`` once YAML has read it: the file scan missed it."""
    _, _, victim = place
    folder = tmp_path / "conf"
    (folder / "pwn").mkdir(parents=True)
    (folder / "pwn" / "evil.yaml").write_text(
        "# @package _global_\n"
        f'hydra: {{callbacks: {{pwn: {{"\\x5ftarget_": builtins.open, file: {victim}, mode: w}}}}}}\n')
    message = refused(script, ["--config-dir", str(folder), "+pwn=evil"], monkeypatch, capsys)
    assert message.startswith("hydra.callbacks.pwn=") and "is a Hydra callback" in message, message
    assert str(folder / "pwn" / "evil.yaml") in message or "+pwn=evil" in message, message


@pytest.mark.parametrize("script", ["train", "evaluate"])
def test_a_callable_in_a_symlinked_folder_under_config_dir_runs_nothing(script, tmp_path, place, monkeypatch, capsys):
    _, _, victim = place
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "evil.yaml").write_text(
        f"# @package _global_\nhydra:\n  callbacks:\n    pwn:\n      _target_: builtins.open\n"
        f"      file: {victim}\n      mode: w\n")
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "pwn").symlink_to(elsewhere, target_is_directory=True)
    message = refused(script, ["--config-dir", str(folder), "+pwn=evil"], monkeypatch, capsys)
    assert message.startswith("hydra.callbacks.pwn=") and "is a Hydra callback" in message, message


@pytest.mark.parametrize("script", ["train", "evaluate"])
def test_a_file_handler_override_erases_nothing(script, place, monkeypatch, capsys):
    _, _, victim = place
    handler = "++hydra.job_logging.handlers.rt"
    message = refused(script, [f"{handler}.class=logging.FileHandler", f"{handler}.filename={victim}",
                               f"{handler}.mode=w"], monkeypatch, capsys)
    assert message.startswith(f"hydra.job_logging.handlers.rt.filename={victim} is a FileHandler's file outside "
                              "the run folder"), message
    assert f"from the override {handler}.filename={victim}" in message


@pytest.mark.parametrize("script", ["train", "evaluate"])
def test_an_output_subdir_outside_the_run_folder_overwrites_nothing(script, tmp_path, place, monkeypatch, capsys):
    folder = tmp_path / "someone"
    folder.mkdir()
    (folder / "config.yaml").write_text("mine: 1\n")
    message = refused(script, [f"hydra.output_subdir={folder}"], monkeypatch, capsys)
    assert message.startswith(f"hydra.output_subdir={folder} writes config.yaml outside the run folder"), message
    assert (folder / "config.yaml").read_text() == "mine: 1\n"


@pytest.mark.parametrize("args, key", [
    (["++hydra.job_logging.handlers.console.class=logging.handlers.SocketHandler"],
     "hydra.job_logging.handlers.console.class=logging.handlers.SocketHandler"),
    (["++hydra.job_logging.handlers.console.stream=ext://os.system"], "hydra.job_logging.handlers.console.stream"),
    (["hydra.sweeper._target_=os.system"], "hydra.sweeper._target_=os.system"),
    (["+hydra.job.env_set.LD_PRELOAD=/tmp/x.so"], "hydra.job.env_set.LD_PRELOAD"),
    (["-m", "seed=0,1", "hydra/launcher=slurm", "+hydra.launcher.setup=[touch x]"], "hydra.launcher.setup"),
])
def test_other_callables_of_the_hydra_node_are_refused(args, key, place, monkeypatch, capsys):
    message = refused("train", args, monkeypatch, capsys)
    assert message.startswith(key), message


def test_the_shipped_configs_and_the_cluster_preset_compose_and_pass(tmp_path, monkeypatch):
    """What the project ships composes and passes (Hydra's own stdout and default job_logging, the
    submitit launcher preset, a sweep), and hydra_logging/job_logging files inside the run folder."""
    from stir.config.argv import parse
    from stir.config.composed import check_composed
    from stir.config.store import register_configs
    from stir.experiments.schema import register_evaluate_configs
    from conftest import REPO

    register_configs()
    register_evaluate_configs()
    monkeypatch.chdir(tmp_path)
    for args in ([], ["hydra/job_logging=default"], ["hydra/hydra_logging=hydra_debug"],
                 ["-m", "loss=vanilla,at", "seed=0,1", "hydra/launcher=slurm"], ["hydra.output_subdir=.hydra"]):
        check_composed(parse(args), REPO / "configs", "train")
    check_composed(parse(["-m", "hydra/launcher=slurm", "shard=range(4)", "shards=4"]), REPO / "configs" / "evaluate",
                   "evaluate")
    assert list(tmp_path.iterdir()) == []
