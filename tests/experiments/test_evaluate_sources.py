"""evaluate.py with models of other sources (RobustBench, torchvision, python factories) as ref,
target and zoo entries, through the real Hydra entry point on tiny data; no network."""
import csv
import json
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from conftest import REPO, run_entry_point
from source_nets import RB_NAME, write_robustbench_weights  # the latter skips without the robustbench extra
from stir.models.sources import SourceError

ZOO_OVERRIDES = [
    "data.download=false", "data.holdout_size=40", "data.batch_size=40", "model.width=4", "trainer.max_epochs=1",
    "attack.steps=2", "eval_attack.steps=2", "trainer.robust_test_size=10", "trainer.robust_val_every_n_epochs=0",
    "trainer.enable_progress_bar=false", "logger.wandb.mode=disabled",
]
FACTORY = "python:source_nets:functional_head"


def args(root: Path, data_root: Path, *extra: str) -> list:
    overrides = ",".join(f'"{o}"' for o in [f"data.root={data_root}", *ZOO_OVERRIDES])
    return [
        f"zoo.overrides=[{overrides}]", f"zoo.runs_dir={root / 'runs'}", f"out_dir={root / 'results'}",
        f"data.root={data_root}", "data.download=false", "data.holdout_size=40",  # images of models of other sources
        "n=4", "k=1", "iri=arbitrary", "inversion.steps=3", "iri_grid_images=2", "logger.wandb.mode=disabled",
        "calibration.permutations=2", "calibration.resamples=20", *extra,
    ]


def rows(path: Path) -> list:
    return list(csv.DictReader(open(path)))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, cifar10_root):
    """A trained tiny vanilla zoo model, made by the first pair: vanilla (zoo) vs a python factory."""
    root = tmp_path_factory.mktemp("sources")
    mp = pytest.MonkeyPatch()
    try:
        run_entry_point("evaluate", args(root, cifar10_root, "ref=vanilla", f"target={FACTORY}", "train_missing=true"), mp)
    finally:
        mp.undo()
    return root


def test_zoo_model_against_a_python_factory(workspace):
    (row,) = rows(workspace / "results/pair_vanilla_vs_functional_head/pairs.csv")  # labels: the factory's name
    assert 0 <= float(row["stir_m2_given_m1"]) <= 1 and 0 <= float(row["stir_m1_given_m2"]) <= 1
    entry = json.loads(next((workspace / "results/store/direction").glob("*.json")).read_text())
    record = entry["record"]
    assert record["models"]["functional_head"]["taps"]["penultimate"] == "head:input"
    assert record["models"]["functional_head"]["spec"] == FACTORY
    assert record["models"]["vanilla"]["command"].startswith("python train.py")
    assert record["images"]["chosen_by"] == "the training data of vanilla"


def test_zoo_prefix_names_the_same_zoo_model(workspace, cifar10_root, tmp_path, monkeypatch):
    import source_nets

    torch.save(source_nets.functional_head().state_dict(), tmp_path / "head.pt")
    pair = ["target=" + FACTORY, f"weights_target={tmp_path / 'head.pt'}", f"out_dir={tmp_path / 'out'}"]
    run_entry_point("evaluate", args(workspace, cifar10_root, "ref=vanilla", *pair), monkeypatch)
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "out/store").rglob("*.json")}
    run_entry_point("evaluate", args(workspace, cifar10_root, "ref=zoo:vanilla", *pair), monkeypatch)
    after = {p: p.stat().st_mtime_ns for p in (tmp_path / "out/store").rglob("*.json")}
    assert before and after == before  # same identities: every result read back from the store, nothing recomputed


def test_torchvision_ref_with_a_weights_file_and_an_explicit_target_tap(workspace, cifar10_root, tmp_path, monkeypatch):
    import torchvision

    torch.manual_seed(0)
    torch.save(torchvision.models.resnet18(num_classes=10).state_dict(), tmp_path / "r18.pt")
    run_entry_point("evaluate", args(workspace, cifar10_root, "ref=torchvision:resnet18", f"weights_ref={tmp_path / 'r18.pt'}",
                                     f"target={FACTORY}", "tap_target=body.2", f"out_dir={tmp_path / 'out'}"), monkeypatch)
    out = tmp_path / "out/pair_resnet18-r18_vs_functional_head"  # the model's name and its weights file's stem
    (row,) = rows(out / "pairs.csv")
    assert 0 <= float(row["stir_m2_given_m1"]) <= 1
    record = json.loads(next((tmp_path / "out/store/direction").glob("*.json")).read_text())["record"]
    tv = record["models"]["resnet18-r18"]
    assert tv["weights"] == str(tmp_path / "r18.pt") and tv["normalization"]["std"] == [0.229, 0.224, 0.225]
    assert record["models"]["functional_head"]["taps"]["penultimate"] == "body.2"
    assert record["images"]["chosen_by"].startswith("data=") and record["images"]["data"] == "cifar10"


def test_robustbench_ref_against_vanilla_reads_its_layout(workspace, cifar10_root, tmp_path, monkeypatch):
    file = write_robustbench_weights(tmp_path / "models")
    run_entry_point("evaluate", args(workspace, cifar10_root, f"ref=robustbench:{RB_NAME}", "target=vanilla",
                                     f"robustbench.model_dir={tmp_path / 'models'}", f"out_dir={tmp_path / 'out'}"),
                    monkeypatch)
    (row,) = rows(tmp_path / f"out/pair_{RB_NAME}_vs_vanilla/pairs.csv")
    assert 0 <= float(row["stir_m2_given_m1"]) <= 1 and 0 <= float(row["stir_m1_given_m2"]) <= 1
    record = json.loads(next((tmp_path / "out/store/direction").glob("*.json")).read_text())["record"]
    rb = record["models"][RB_NAME]
    assert rb["weights"] == [str(file)] and rb["threat_model"] == "L2" and rb["taps"]["penultimate"] == "linear:input"


def test_zoo_entries_of_other_sources_share_a_matrix_with_zoo_models(workspace, cifar10_root, tmp_path, monkeypatch):
    zoo = OmegaConf.load(REPO / "configs/zoo.yaml")
    zoo["fac"] = {"source": FACTORY, "kwargs": {"width": 4}}
    zoo["fac_tap"] = {"source": FACTORY, "kwargs": {"width": 4}, "tap": "body.4"}
    OmegaConf.save(zoo, tmp_path / "zoo.yaml")
    run_entry_point("evaluate", args(workspace, cifar10_root, f"zoo.file={tmp_path / 'zoo.yaml'}", "zoo.allow_code=true",
                                     "experiment=relative_robustness", "experiment.models=[vanilla,fac,fac_tap]", f"out_dir={tmp_path / 'out'}"), monkeypatch)
    matrix = rows(tmp_path / "out/relative_robustness/matrix_stir.csv")
    assert [r["m1 (ref) \\ m2 (target)"] for r in matrix] == ["vanilla", "fac", "fac_tap"]
    assert all(0 <= float(r[c]) <= 1.0001 for r in matrix for c in ("vanilla", "fac", "fac_tap"))


@pytest.mark.parametrize(
    "extra, error, message",
    [
        (["ref=keras:resnet50"], ValueError, r"unknown model source 'keras'.*sources: \['zoo', .*'robustbench'.*\]"),  # refused before torch (issue 69): ConfigError
        (["ref=at", "tap_ref=fc:input"], ValueError, r"tap given for 'at', a model of this project.*layers.taps="),
        (["ref=python:source_nets:feature_maps"], SourceError, r"must return \(n, classes\) logits"),
        ([f"ref={FACTORY}", "tap_ref=nosuch"], ValueError, r"unknown tap 'nosuch'.*valid taps: \[.*'head'"),
        (["ref=torchvision:resnet18", "weights_ref=IMAGENET1K_V1"], SourceError, r"looked in .*download_weights=true"),
    ],
)
def test_bad_input_gets_a_clear_error(workspace, cifar10_root, tmp_path, monkeypatch, extra, error, message):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))  # an empty hub cache: nothing pretrained on disk
    with pytest.raises(error, match=message):
        run_entry_point("evaluate", args(workspace, cifar10_root, "target=vanilla", *extra,
                                         f"out_dir={tmp_path / 'out'}"), monkeypatch)


def test_two_checkpoints_of_one_factory_are_a_pair(workspace, cifar10_root, tmp_path, monkeypatch):
    """The same python: factory as ref and target with two weights files: two models, two labels."""
    import source_nets

    for seed, name in ((0, "run1"), (1, "run2")):
        torch.manual_seed(seed)
        torch.save(source_nets.functional_head().state_dict(), tmp_path / f"{name}.pt")
    run_entry_point("evaluate", args(workspace, cifar10_root, f"ref={FACTORY}", f"weights_ref={tmp_path / 'run1.pt'}",
                                     f"target={FACTORY}", f"weights_target={tmp_path / 'run2.pt'}",
                                     f"out_dir={tmp_path / 'out'}"), monkeypatch)
    out = tmp_path / "out/pair_functional_head-run1_vs_functional_head-run2"
    (row,) = rows(out / "pairs.csv")
    assert (row["ref"], row["target"]) == ("functional_head-run1", "functional_head-run2")
    assert row["ref_id"] != row["target_id"] and 0 <= float(row["stir_m2_given_m1"]) <= 1
