"""Item 4 of issue 21: a truncated metrics.json, weights.pt, recipe.json or results/index.json is
found, moved aside and repaired, never trusted and never blocking every later run."""
import json
import shutil

import pytest

from faultkit import RUN, evaluate, exit_of, train, train_seed_pair, truncate
from stir.provenance import file_sha256
from stir.zoo.resolve import UnfinishedRunError


@pytest.fixture(scope="module")
def finished(tmp_path_factory, cifar10_root):
    """Two finished tiny runs, copied by each test that damages one."""
    return train_seed_pair(cifar10_root, tmp_path_factory)


@pytest.fixture
def runs(finished, tmp_path):
    shutil.copytree(finished, tmp_path / "runs")
    return tmp_path / "runs"


@pytest.mark.parametrize("damaged", ["metrics.json", "weights.pt"])
def test_a_truncated_end_product_is_moved_aside_and_the_run_finished_again(damaged, runs, cifar10_root, monkeypatch,
                                                                            capfd):
    run = runs / RUN.format(seed=0)
    truncate(run / damaged)
    capfd.readouterr()
    train(cifar10_root, runs, monkeypatch)
    said = "".join(capfd.readouterr())
    assert "is finished; skipping" not in said
    assert f"run folder {run} is corrupt" in said and f"{damaged} -> {damaged}.corrupt" in said
    assert (run / f"{damaged}.corrupt").is_file()
    metrics = json.loads((run / "metrics.json").read_text())  # finished again from last.ckpt: no epoch retrained
    assert metrics["weights_sha256"] == file_sha256(run / "weights.pt") and metrics["resumed_from_epoch"] == 1


def test_weights_that_do_not_match_their_recorded_sha256_are_not_finished(runs, cifar10_root, monkeypatch, capfd):
    run = runs / RUN.format(seed=0)
    shutil.copy(runs / RUN.format(seed=1) / "weights.pt", run / "weights.pt")  # loads fine, but not this run's
    capfd.readouterr()
    train(cifar10_root, runs, monkeypatch)
    assert "has sha256" in "".join(capfd.readouterr()) and (run / "weights.pt.corrupt").is_file()


@pytest.mark.parametrize("damaged", ["metrics.json", "weights.pt"])
def test_evaluating_a_corrupt_run_folder_is_refused_naming_the_file_and_the_command(damaged, runs, tmp_path,
                                                                                     monkeypatch):
    run = runs / RUN.format(seed=0)
    truncate(run / damaged)
    with pytest.raises(UnfinishedRunError, match=rf"run folder {run} is corrupt: {run / damaged}.*python train.py run_dir="):
        evaluate(tmp_path / "results", monkeypatch, f"ref={run}", f"target={runs / RUN.format(seed=1)}")
    code, stderr = exit_of("evaluate", [f"ref={run}", f"target={runs / RUN.format(seed=1)}",
                                        f"out_dir={tmp_path / 'results'}"], monkeypatch)
    assert code == 2 and stderr.count("error:") == 1 and "Traceback" not in stderr and damaged in stderr


def test_a_truncated_recipe_json_is_rebuilt_from_config_yaml(runs, cifar10_root, monkeypatch, capfd):
    run = runs / RUN.format(seed=0)
    before = (run / "recipe.json").read_text()
    truncate(run / "recipe.json")
    capfd.readouterr()
    train(cifar10_root, runs, monkeypatch)
    said = "".join(capfd.readouterr())
    assert "recipe.json is unreadable" in said and "is finished; skipping" in said
    assert (run / "recipe.json").read_text() == before and (run / "recipe.json.corrupt").is_file()
    with pytest.raises(ValueError, match=r"different recipe \(optim.lr"):  # the check still holds
        train(cifar10_root, runs, monkeypatch, "optim.lr=0.05")


def test_unreadable_recipe_and_config_refuse_the_folder_in_one_line(runs, cifar10_root, monkeypatch):
    run = runs / RUN.format(seed=0)
    (run / "recipe.json").write_text("{")
    (run / "config.yaml").write_text("model: [")
    from conftest import tiny_train_args

    code, stderr = exit_of("train", tiny_train_args(cifar10_root, runs, "trainer.robust_val_every_n_epochs=0"),
                           monkeypatch)
    assert code == 2 and "cannot tell its recipe" in stderr and "retrain=true" in stderr


def test_a_truncated_index_json_is_rebuilt_from_the_report_folders(runs, tmp_path, monkeypatch, capfd):
    out = tmp_path / "results"
    pair = [f"ref={runs / RUN.format(seed=0)}", f"target={runs / RUN.format(seed=1)}"]
    evaluate(out, monkeypatch, *pair)
    index = json.loads((out / "index.json").read_text())
    truncate(out / "index.json")
    capfd.readouterr()
    evaluate(out, monkeypatch, *pair)  # every result from the store: the index is what used to fail, at the end
    assert "index.json is unreadable" in "".join(capfd.readouterr())
    rebuilt = json.loads((out / "index.json").read_text())
    assert {k: (v["name"], v["settings"]) for k, v in rebuilt.items()} == {
        k: (v["name"], v["settings"]) for k, v in index.items()}
    assert (out / "index.json.corrupt").is_file() and "## pair_" in (out / "index.md").read_text()
