"""experiment=layer_matching / grounding / invariance end to end through evaluate.py, on tiny models."""
import csv
import json

import pytest

from conftest import run_entry_point
from test_evaluate_entry import eval_args

pytestmark = pytest.mark.slow  # trains three tiny models (vanilla seeds 0 and 1, AT) first

TAPS = "layers.taps=[stem,layer3.1,penultimate]"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, cifar10_root):
    root = tmp_path_factory.mktemp("judging")
    mp = pytest.MonkeyPatch()
    try:
        run_entry_point("evaluate", eval_args(root, cifar10_root, "experiment=invariance", "train_missing=true",
                                              "experiment.models=[vanilla,vanilla_s1,at]", TAPS,
                                              "experiment.noise=[0.0,0.1]", "logger.wandb.mode=offline"), mp)
    finally:
        mp.undo()
    return root


def rows(path):
    return list(csv.DictReader(open(path)))


def test_invariance_writes_the_zoo_table_plots_and_wandb(workspace):
    out = workspace / "results/invariance"
    table = rows(out / "geed.csv")
    assert {r["group"] for r in table} == {"vanilla", "at", "random-init"}
    assert {r["kind"] for r in table} == {"invariance", "equivariance"}
    vanilla = [r for r in table if r["group"] == "vanilla" and r["tap"] == "penultimate"]
    assert {int(r["count"]) for r in vanilla} == {24}  # 12 images x 2 seeds pooled
    for name in ("geed_invariance_vanilla.png", "geed_equivariance_at.png", "geed_model_vanilla_s1.png",
                 "geed_model_random-init.png", "zoo_invariance.csv", "noise.csv"):
        assert (out / name).is_file(), name
    assert next(out.glob("wandb/offline-run-*/run-*.wandb")).stat().st_size > 0
    assert len(list((workspace / "results/store/geed").glob("*.json"))) == 4  # 3 models + random init


def test_layer_matching_reports_every_measure_and_stir_and_resumes(workspace, cifar10_root, monkeypatch):
    args = eval_args(workspace, cifar10_root, "experiment=layer_matching", "experiment.models=[vanilla,vanilla_s1]",
                     TAPS, "k=1", "experiment.measures=[linear_cka,rbf_cka_0.8,procrustes_distance]")
    run_entry_point("evaluate", args, monkeypatch)
    out = workspace / "results/layer_matching"
    table = {r["measure"]: r for r in rows(out / "layer_matching.csv")}
    assert set(table) == {"linear_cka", "rbf_cka_0.8", "procrustes_distance", "STIR(m2|m1)", "STIR(m1|m2)", "STIR(mean)"}
    assert all(0 <= float(r["accuracy"]) <= 1 for r in table.values())
    assert table["linear_cka"]["kornblith_2019"] == "0.993"
    assert (out / "grid_linear_cka.png").is_file() and (out / "grid_STIR_m2_given_m1.png").is_file()
    assert (out / "images.png").is_file() and rows(out / "setup.csv")[0]["taps"] == "stem, layer3.1, penultimate"
    store = {p: p.stat().st_mtime_ns for p in (workspace / "results/store").rglob("*.json")}
    run_entry_point("evaluate", args, monkeypatch)
    assert {p: p.stat().st_mtime_ns for p in (workspace / "results/store").rglob("*.json")} == store


def test_grounding_table_has_a_cell_per_measure_and_test(workspace, cifar10_root, monkeypatch):
    run_entry_point("evaluate", eval_args(
        workspace, cifar10_root, "experiment=grounding", "experiment.models=[vanilla,vanilla_s1]", TAPS, "k=1",
        "experiment.n_probe=40", "experiment.pc_ks=[1,2,4]", "experiment.n_boot=50",
        "experiment.measures=[linear_cka,procrustes_distance]", "experiment.robustness_models=[vanilla,vanilla_s1,at]"),
        monkeypatch)
    out = workspace / "results/grounding"
    table = {r["measure"]: r for r in rows(out / "grounding.csv")}
    assert set(table) == {"linear_cka", "procrustes_distance", "1-STIR(m2|m1)", "1-STIR(m1|m2)"}
    for test in ("depth", "pc_deletion", "robust_accuracy", "adversarial_disagreement"):
        assert (out / f"scatter_{test}.png").is_file()
        assert test == "depth" or test == "pc_deletion" or table["1-STIR(m2|m1)"][f"{test}_points"] == "3"
    assert int(table["linear_cka"]["depth_points"]) == 15  # 6 representations, every pair
    assert int(table["1-STIR(m1|m2)"]["depth_points"]) == 9  # the pairs of two different models
    assert json.loads((out / "record.json").read_text())["summary"]


@pytest.mark.parametrize("extra, message", [
    (["experiment=layer_matching", "experiment.models=[vanilla]"], "at least two seed models"),
    (["experiment=layer_matching", "experiment.measures=[nope]"], "valid names: .*linear_cka"),
    (["experiment=invariance", "experiment.transforms=[vflip]"], r"experiment.transforms: .*choose from \['hflip'"),
    (["experiment=grounding", "experiment.robustness_models=[vanilla,at]"], "at least 3 distinct models"),
])
def test_bad_input_gets_a_clear_error(workspace, cifar10_root, monkeypatch, extra, message):
    with pytest.raises(ValueError, match=message):
        run_entry_point("evaluate", eval_args(workspace, cifar10_root, *extra), monkeypatch)
