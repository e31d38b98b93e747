"""Issue 54, High 3 and the Hydra callback: no file and no override runs code. Through the real
entry points: a zoo file entry naming ``python:os:system`` creates no marker file (refused without
``zoo.allow_code=true``, and the standard library is refused even with it); a ``_target_`` or
``hydra.callbacks`` override is one line, exit 2, and the file it named is untouched."""
import re

import pytest
from omegaconf import OmegaConf

from conftest import REPO, refused
from stir.models.sources import SourceError, SourceOptions, load


def evil_zoo(tmp_path, marker, source="python:os:system", **extra):
    zoo = OmegaConf.load(REPO / "configs/zoo.yaml")
    zoo["evil"] = {"source": source, "kwargs": {"command": f"touch {marker}"}, **extra}
    path = tmp_path / "zoo.yaml"
    OmegaConf.save(zoo, path)
    return path


@pytest.mark.parametrize("allow", [False, True])
def test_a_zoo_file_naming_os_system_runs_nothing(tmp_path, monkeypatch, capsys, allow):
    marker = tmp_path / "PWNED"
    zoo = evil_zoo(tmp_path, marker)
    message = refused("evaluate", [f"zoo.file={zoo}", "ref=evil", "target=evil", f"out_dir={tmp_path / 'out'}",
                                   "logger.wandb.mode=disabled", *(["zoo.allow_code=true"] if allow else [])],
                      monkeypatch, capsys)
    assert not marker.exists()
    if allow:  # opted in: still never the standard library
        assert "names the standard library (os)" in message, message
    else:
        assert "zoo entry 'evil'" in message and "zoo.allow_code=true" in message


def test_a_zoo_file_tap_naming_code_needs_the_opt_in_too(tmp_path, monkeypatch, capsys):
    zoo = evil_zoo(tmp_path, tmp_path / "PWNED", source="torchvision:resnet18", tap="python:source_nets:no_linear_penultimate")
    message = refused("evaluate", [f"zoo.file={zoo}", "ref=evil", "target=evil", f"out_dir={tmp_path / 'out'}",
                                   "logger.wandb.mode=disabled"], monkeypatch, capsys)
    assert "names code (python:source_nets:no_linear_penultimate)" in message


@pytest.mark.parametrize("spec, why", [
    ("python:builtins:open", "names the standard library (builtins)"),
    ("python:subprocess:run", "names the standard library (subprocess)"),
    ("python:os.path:join", "names the standard library (os)"),
    ("python:source_nets:RB_NAME", "is a str, not a class or function"),
])
def test_a_python_source_is_a_class_or_function_of_a_user_module(spec, why):
    with pytest.raises(SourceError, match=re.escape(why)):
        load(spec, SourceOptions())


@pytest.mark.parametrize("script", ["train", "evaluate"])
@pytest.mark.parametrize("override", [
    "+hydra.callbacks.pwn._target_=builtins.open",
    "++hydra.callbacks.pwn._target_=builtins.open",
    "+model._target_=os.system",
    "+foo={_target_: builtins.open, file: X}",
])
def test_an_override_naming_code_is_one_line_and_touches_nothing(tmp_path, monkeypatch, capsys, script, override):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    monkeypatch.chdir(tmp_path)
    args = [override.replace("X", str(victim))]
    if "callbacks" in override:
        args.append(f"+hydra.callbacks.pwn.file={victim}")
        args.append("+hydra.callbacks.pwn.mode=w")
    message = refused(script, args, monkeypatch, capsys)
    assert "runs no code it names" in message
    assert victim.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim.txt"]  # refused before any work


@pytest.mark.parametrize("script", ["train", "evaluate"])
@pytest.mark.parametrize("flag", ["--config-dir", "-cd", "--config-dir="])
@pytest.mark.parametrize("yaml", [
    "hydra:\n  callbacks:\n    pwn:\n      _target_: builtins.open\n      file: VICTIM\n      mode: w\n",
    "hydra:\n  callbacks:\n    pwn:\n      class: something\n",
    "extra:\n  _target_: os.system\n  command: touch VICTIM\n",
    "defaults:\n  - hydra/callbacks: pwn\n",  # a callbacks group chosen in a defaults list
    "defaults:\n  - override hydra/callbacks: pwn\n",
])
def test_a_config_dir_naming_code_is_one_line_and_touches_nothing(tmp_path, monkeypatch, capsys, script, flag, yaml):
    """Issue 54: ``--config-dir`` skipped the check, so a YAML there with Hydra callbacks or a _target_
    would run at composition or at the run's start. Each is refused in one line before any work."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "extra.yaml").write_text(yaml.replace("VICTIM", str(victim)))
    monkeypatch.chdir(tmp_path)
    args = [f"{flag}{folder}"] if flag.endswith("=") else [flag, str(folder)]
    message = refused(script, args, monkeypatch, capsys)
    assert "runs no code it names" in message and "extra.yaml" in message, message
    assert victim.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conf", "victim.txt"]


def test_a_rerun_from_a_pickle_is_refused(tmp_path, monkeypatch, capsys):
    pickle_file = tmp_path / "config.pickle"
    pickle_file.write_bytes(b"not read")
    message = refused("evaluate", ["--experimental-rerun", str(pickle_file)], monkeypatch, capsys)
    assert "unpickles a file" in message


def test_a_config_dir_of_plain_values_still_composes(tmp_path):
    from stir.config.argv import parse, refuse_code

    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "mine.yaml").write_text("n: 10\nk: 2\n")
    refuse_code(parse(["--config-dir", str(folder), "n=3"]))  # no error: values only
