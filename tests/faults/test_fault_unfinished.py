"""Item 6 of issue 21: an unfinished run folder is not evaluated silently from its last checkpoint.
It is refused with the command that finishes it; allow_unfinished=true evaluates it and says so."""
import json
import shlex

import pytest

from faultkit import RUN, evaluate, train
from conftest import run_entry_point
from stir.zoo.resolve import UnfinishedRunError


@pytest.fixture
def runs(tmp_path, cifar10_root, monkeypatch):
    """A finished run and one killed before its end (its checkpoint, no weights.pt, no metrics.json)."""
    runs = tmp_path / "runs"
    train(cifar10_root, runs, monkeypatch, seed=0)
    killed = train(cifar10_root, runs, monkeypatch, seed=1)
    (killed / "metrics.json").unlink()
    (killed / "weights.pt").unlink()
    return runs


def test_an_unfinished_run_is_refused_with_the_command_that_finishes_it(runs, tmp_path, monkeypatch):
    killed = runs / RUN.format(seed=1)
    pair = [f"ref={runs / RUN.format(seed=0)}", f"target={killed}"]
    with pytest.raises(UnfinishedRunError) as err:
        evaluate(tmp_path / "results", monkeypatch, *pair)
    message = str(err.value)
    assert f"run folder {killed} has not finished (last.ckpt at epoch 1 of 1)" in message
    assert "allow_unfinished=true" in message and not (tmp_path / "results" / "store").exists()
    command = message.split("`")[1]
    assert command.startswith("python train.py run_dir=")
    run_entry_point("train", shlex.split(command)[2:], monkeypatch)  # the command as printed finishes it
    assert (killed / "metrics.json").is_file()
    evaluate(tmp_path / "results", monkeypatch, *pair)  # and then it is evaluated
    record = json.loads((tmp_path / "results" / "pair_vanilla-seed0_vs_vanilla-seed1" / "record.json").read_text())
    assert "unfinished" not in record["config"]["models"]["vanilla/seed1"]


def test_allow_unfinished_evaluates_the_last_checkpoint_and_the_record_and_notes_say_so(runs, tmp_path, monkeypatch):
    killed = runs / RUN.format(seed=1)
    evaluate(tmp_path / "results", monkeypatch, f"ref={runs / RUN.format(seed=0)}", f"target={killed}",
             "allow_unfinished=true")
    folder = tmp_path / "results" / "pair_vanilla-seed0_vs_vanilla-seed1"
    record = json.loads((folder / "record.json").read_text())
    said = record["config"]["models"]["vanilla/seed1"]["unfinished"]
    assert f"evaluated from {killed / 'last.ckpt'} (last.ckpt at epoch 1 of 1) of an unfinished run" in said
    assert any("model vanilla/seed1: evaluated from" in n for n in record["notes"])
    assert "of an unfinished run (allow_unfinished=true)" in (folder / "README.md").read_text()
