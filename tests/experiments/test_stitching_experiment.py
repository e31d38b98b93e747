"""evaluate.py experiment=stitching end to end on tiny zoo models, through the real Hydra entry point."""
import csv
import json
from pathlib import Path

import pytest

from conftest import run_entry_point
from stir.config.store import compose_train
from stir.experiments.config import compose_evaluate
from stir.models import build
from stir.models.depth import depth_taps
from stir.zoo import load_zoo

from test_evaluate_entry import eval_args, store_files

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
TINY = ["experiment=stitching", "experiment.pairs=[[vanilla,vanilla_s1]]", "layers.taps=[layer1.1,penultimate]",
        "experiment.train_images=40", "experiment.test_images=20", "experiment.epochs=1", "experiment.seeds=[0,1]",
        "iri=arbitrary"]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, cifar10_root):
    root = tmp_path_factory.mktemp("stitching")
    mp = pytest.MonkeyPatch()
    try:
        run_entry_point("evaluate", eval_args(root, cifar10_root, *TINY, "train_missing=true",
                                              "logger.wandb.mode=offline"), mp)
    finally:
        mp.undo()
    return root


@pytest.mark.slow  # the module's workspace trains two tiny zoo models (about 15 s of CPU)
def test_stitching_writes_a_row_per_direction_tap_and_layer_with_stir_beside_it(workspace):
    out = workspace / "results/stitching"
    rows = list(csv.DictReader(open(out / "stitching.csv")))
    assert [(r["front (A)"], r["tap_front"], r["layer"]) for r in rows] == [
        (front, tap, kind) for front in ("vanilla", "vanilla_s1") for tap in ("layer1.1", "penultimate")
        for kind in ("identity", "linear", "g_relu")]
    for r in rows:
        assert 0 <= float(r["acc_stitched"]) <= 1 and 0 <= float(r["acc_back"]) <= 1
        assert float(r["gap"]) == pytest.approx(float(r["acc_back"]) - float(r["acc_stitched"]))
        assert int(r["seeds"]) == (1 if r["layer"] == "identity" else 2) and int(r["n_test"]) == 20
        assert -1 <= float(r["stir_back_given_front"]) <= 1
    for name in ("stitching_gap_vanilla_vs_vanilla_s1.png", "stitching_stir_vanilla_vs_vanilla_s1.png",
                 "stitching_stir_normalised_vanilla_vs_vanilla_s1.png", "accuracy.csv", "stitching.md", "record.json"):
        assert (out / name).is_file(), name
    (wandb_file,) = out.glob("wandb/offline-run-*/run-*.wandb")
    assert b"stitching" in wandb_file.read_bytes()
    # 2 directions x 2 taps x (identity once + 2 layers x 2 seeds), each with its provenance.
    entries = list((workspace / "results/store/stitching").glob("*.json"))
    assert len(entries) == 20
    entry = json.loads(entries[0].read_text())
    assert set(entry["record"]["models"]) == {"vanilla", "vanilla_s1"} and entry["record"]["config"]["experiment"]["epochs"] == 1
    # STIR per direction and tap, and the row "A -> B" carries STIR(B|A): A is the reference.
    directions = [json.loads(p.read_text())["result"] for p in (workspace / "results/store/direction").glob("*.json")]
    assert len(directions) == 4
    sha = {name: model["sha256"] for name, model in entry["record"]["models"].items()}
    stir = {(d["ref_id"], d["target_id"], d["tap_ref"]): d["stir"]["mean"] for d in directions}
    cal = {(d["ref_id"], d["target_id"], d["tap_ref"]): d["calibration"]["stir"] for d in directions}
    normalised = []
    for r in rows:
        key = (sha[r["front (A)"]], sha[r["back (B)"]], r["tap_front"])
        assert float(r["stir_back_given_front"]) == pytest.approx(stir[key])
        # each tap's STIR read against that tap's own floor and ceiling, beside the raw value (issue 29)
        c = cal[key]
        assert float(r["stir_floor"]) == pytest.approx(c["floor"]) and c["floor_reading"] == "iris"
        # (NaN where the tiny model's ceiling is not clear of its floor: the guard of stir.measure.calibration)
        assert float(r["stir_normalised"]) == pytest.approx(c["normalised"], nan_ok=True)
        assert float(r["stir_normalised_low"]) == pytest.approx(c["normalised_low"], nan_ok=True)
        normalised.append(c["normalised"])
    assert any(n == n for n in normalised), "no tap with a normalised value: the check above compared only NaN"
    assert "normalised" in (out / "stitching.md").read_text()


@pytest.mark.slow
def test_rerun_recomputes_nothing(workspace, cifar10_root, monkeypatch):
    before = store_files(workspace)
    run_entry_point("evaluate", eval_args(workspace, cifar10_root, *TINY), monkeypatch)
    assert store_files(workspace) == before


@pytest.mark.slow
def test_an_unknown_layer_kind_lists_the_choices(workspace, cifar10_root, monkeypatch):
    with pytest.raises(ValueError, match=r"experiment.kinds=\['affine'\]: each must be one of \['identity', 'linear', 'g_relu'"):
        run_entry_point("evaluate", eval_args(workspace, cifar10_root, *TINY, "experiment.kinds=[affine]"), monkeypatch)


@pytest.mark.parametrize("profile", ["full", "cpu"])
def test_stitching_preset_taps_exist_in_every_model(profile):
    cfg, exp = compose_evaluate(CONFIGS / "evaluate", ["experiment=stitching", f"profile={profile}"])
    assert exp.kind == "stitching" and {"linear", "g_relu"} <= set(exp.kinds)
    assert [sorted(p) for p in exp.pairs] == [["vanilla", "vanilla_s1"], ["at", "at_s1"], ["at", "vanilla"]]
    zoo = load_zoo(CONFIGS / "zoo.yaml")
    for name in {m for pair in exp.pairs for m in pair}:
        train = compose_train(CONFIGS, [f"profile={profile}", *zoo[name].train])
        taps = depth_taps(build(train.model, train.data.num_classes, (0.5,) * 3, (0.25,) * 3))
        if cfg.layers.taps != "all":
            assert set(cfg.layers.taps) <= set(taps), f"{name}: {sorted(set(cfg.layers.taps) - set(taps))} not among {taps}"
    if profile == "cpu":
        assert exp.train_images <= exp.test_images <= 1000 and len(exp.seeds) >= 2
