"""Claim 10 as the paper states it (Figures 3, 7; issue 52): a CIFAR-10 model against a CIFAR-100 model,
layer by layer, X from CIFAR-10 (section 5), through the real evaluate.py on synthetic CIFAR-10 and
CIFAR-100 files and a tiny zoo (width 4, one epoch)."""
import csv
import json
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_entry_point
from stir.data import synthetic
from stir.experiments.paper.cross_dataset import CLAIM10_SETTING, cross_dataset_pairs, images_reading

TRAIN = ["data.download=false", "data.holdout_size=40", "data.batch_size=40", "model.width=4", "trainer.max_epochs=1",
         "attack.steps=2", "eval_attack.steps=2", "trainer.robust_test_size=10", "trainer.robust_val_every_n_epochs=0",
         "trainer.enable_progress_bar=false", "logger.wandb.mode=disabled"]
COMMON = ["n=12", "k=2", "inversion.steps=12", "inversion.tolerance=0.05", "inversion.record_steps=[4,8]",
          "iri_grid_images=2", "logger.wandb.mode=disabled", "calibration.resamples=50", "calibration.permutations=19"]
# Every part but the layer-wise one left out: its models are not trained here (not testable, nothing trained).
SKIP = "experiment.skip=[seeds,seeds_original,relative_robustness,incremental,architectures,at_methods,recipe_ablation]"


def _args(root: Path, data: Path, *extra: str) -> list:
    zoo = ",".join(f'"{o}"' for o in [f"data.root={data}", *TRAIN])
    return [f"zoo.overrides=[{zoo}]", f"zoo.runs_dir={root / 'runs'}", "zoo.shipped_dir=null",
            f"out_dir={root / 'results'}", *COMMON, *extra]


def _layer_settings(vanilla, at) -> str:
    return (f"experiment.layer_settings={{{CLAIM10_SETTING}:{{vanilla:[{vanilla[0]},{vanilla[1]}],"
            f"at:[{at[0]},{at[1]}]}}}}")


def _datasets_read(store: Path, pair) -> set:
    """The data sets the stored layer-wise directions of ``pair`` read X from (their records)."""
    out = set()
    for path in (store / "direction").glob("*.json"):
        entry = json.loads(path.read_text())
        if {entry["result"]["ref"], entry["result"]["target"]} == set(pair):
            out.add(entry["record"]["images"]["data"])
    return out


def test_the_paper_preset_pairs_a_cifar10_model_with_a_cifar100_model():
    preset = yaml.safe_load((REPO / "configs/evaluate/experiment/paper.yaml").read_text())["experiment"]
    setting = preset["layer_settings"][CLAIM10_SETTING]
    assert setting == {"vanilla": ["vanilla", "c100"], "at": ["at", "c100_at"]}
    recipes = {"vanilla": "cifar10", "c100": "cifar100", "at": "cifar10", "c100_at": "cifar100"}
    pairs = cross_dataset_pairs(preset["layer_settings"], recipes.get)
    assert pairs == {"vanilla": ("vanilla", "c100"), "at": ("at", "c100_at")}
    assert images_reading(("vanilla", "c100"), recipes.get) == "X from cifar10 (m1's data set; m2 trained on cifar100)"
    assert images_reading(("c100", "vanilla"), recipes.get).startswith("X from cifar100")
    assert cross_dataset_pairs({"cifar10 resnet18": {"vanilla": ["vanilla", "vanilla_s1"]}},
                               {"vanilla": "cifar10", "vanilla_s1": "cifar10"}.get) == {}


@pytest.mark.slow  # four tiny trainings and three evaluate.py runs (15 minutes on a loaded 2-core machine)
def test_claim_10_measures_a_cifar10_model_against_a_cifar100_model_on_cifar10_images(tmp_path):
    data = tmp_path / "data"  # CIFAR-10- and CIFAR-100-shaped synthetic files in one root
    synthetic.write_cifar10_python(data, n_train=160, n_test=40, seed=0)
    synthetic.write_cifar100_python(data, n_train=200, n_test=40, seed=0)
    mp = pytest.MonkeyPatch()
    try:
        # the four models trained through the zoo, and each cross-data-set pair measured at its penultimate layer
        run_entry_point("evaluate", _args(tmp_path, data, "experiment=seeds", "train_missing=true", "iri=arbitrary",
                                          "experiment.pairs=[[vanilla,c100],[at,c100_at]]"), mp)
        run_entry_point("evaluate", _args(tmp_path, data, "experiment=paper", "experiment.layers.count=3", SKIP,
                                          _layer_settings(("vanilla", "c100"), ("at", "c100_at"))), mp)
        with open(tmp_path / "results" / "paper" / "figures2_3_6_7.csv") as f:
            slopes = list(csv.DictReader(f))
        with open(tmp_path / "results" / "paper" / "claims.csv") as f:
            claim10 = {int(r["claim"]): r for r in csv.DictReader(f)}[10]
        # the other reading: X from CIFAR-100 (the pair's first model is the CIFAR-100 one)
        run_entry_point("evaluate", _args(tmp_path, data, "experiment=paper", "experiment.name=paper_c100_images",
                                          "experiment.layers.count=3", SKIP,
                                          _layer_settings(("c100", "vanilla"), ("c100_at", "at"))), mp)
    finally:
        mp.undo()
    assert {(r["data set"], r["family"], r["pair"]) for r in slopes} == {("cifar100", "vanilla", "vanilla / c100"),
                                                                        ("cifar100", "at", "at / c100_at")}
    assert all(r["taps"] == "3" and r["slope (raw)"] not in ("", "nan") for r in slopes)
    # measured, not "not testable": the CIFAR-100 models are here (the CIFAR-10 seed pairs are not: cifar10 says so)
    assert "c100 is not trained" not in claim10["reason"] and "c100_at is not trained" not in claim10["reason"]
    store = tmp_path / "results" / "store"
    assert _datasets_read(store, ("vanilla", "c100")) == {"cifar10", "cifar100"}  # both readings stored
    assert _datasets_read(store, ("at", "c100_at")) == {"cifar10", "cifar100"}
