"""The paper's recipe (train.py's default) is pinned: a few training steps give the committed numbers.

The fast recipe adds options around the same code; none of them may move the default recipe. The
pinned values (``fixtures/default_recipe_pin.json``) were computed with this file's ``pin`` on the
code as it was before the fast recipe existed (commit a7eb774, torch 2.14.1, CPU, 1 thread):
train.py through Hydra and Lightning on a tiny synthetic CIFAR-10 (120 training images, batches of
40, 2 epochs = 6 SGD steps), width-4 ResNet18, vanilla and AT (PGD-l2, 2 steps). The record is the
per-step training loss and a few statistics of the final weights and batch-norm buffers, so any
change to the augmentation's random draws, the attack, the optimiser, the schedule or the batch
order shows.

    python tests/training/test_default_recipe_pin.py   # rewrite the fixture (only for a deliberate change)
"""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # conftest's helpers when run as a script

from conftest import host, other_host_reason, run_entry_point, tiny_train_args  # noqa: E402
from stir.training.runs import load_state_dict  # noqa: E402

FIXTURE = HERE / "fixtures" / "default_recipe_pin.json"
RECIPES = {"vanilla": ("loss=vanilla",), "at": ("loss=at",)}
# Tensors whose statistics are recorded: first and last layers, a batch-norm's running statistics.
TENSORS = ("stem.0.weight", "layer2.0.conv1.weight", "layer4.1.bn2.weight", "layer4.1.bn2.running_mean",
           "layer4.1.bn2.running_var", "fc.weight", "fc.bias")


def pin(data_root: Path, runs_dir: Path, loss: str, monkeypatch) -> dict:
    """Train the default recipe for 6 steps; return its per-step loss and weight statistics."""
    args = tiny_train_args(data_root, runs_dir, *RECIPES[loss], "trainer.max_epochs=2",
                           "trainer.robust_val_every_n_epochs=0")
    run_entry_point("train", args, monkeypatch)
    (run,) = [p.parent for p in runs_dir.glob("cifar10/*/*/seed0/weights.pt")]
    rows = [r for f in sorted(run.glob("csv/version_*/metrics.csv")) for r in csv.DictReader(open(f))]
    losses = [float(r["train/loss"]) for r in rows if r.get("train/loss")]
    state = load_state_dict(str(run))
    stats = {name: {"sum": float(state[name].double().sum()), "abs_sum": float(state[name].double().abs().sum()),
                    "first": float(state[name].flatten()[0])} for name in TENSORS}
    return {"train_loss": losses, "weights": stats}


@pytest.mark.parametrize("loss", sorted(RECIPES))
def test_default_recipe_takes_the_pinned_steps(loss, cifar10_root, tmp_path, monkeypatch):
    fixture = json.loads(FIXTURE.read_text())
    if fixture.get("machine") != host():
        pytest.skip(other_host_reason(fixture.get("machine", {}), "the recipe pin", "python tests/training/test_default_recipe_pin.py"))
    expected = fixture["recipes"][loss]
    got = pin(cifar10_root, tmp_path, loss, monkeypatch)
    assert len(got["train_loss"]) == len(expected["train_loss"]) == 6
    # Same machine class and library versions: rounding differences only (reductions' order).
    assert got["train_loss"] == pytest.approx(expected["train_loss"], rel=1e-4, abs=1e-5)
    for name in TENSORS:
        for key, value in expected["weights"][name].items():
            assert got["weights"][name][key] == pytest.approx(value, rel=1e-4, abs=1e-5), (name, key)


# The recipe identity of the paper's recipe, computed before the fast recipe's keys existed: its run
# folders, recipe groups and W&B artifact names stay valid (new keys enter a recipe only when set).
PAPER_RECIPE_GROUPS = {"vanilla": "726683e04dd9", "at": "35a00fda18a3"}
PAPER_RECIPE_KEYS = 36


@pytest.mark.parametrize("loss", sorted(PAPER_RECIPE_GROUPS))
def test_the_paper_recipe_keeps_its_recipe_identity(loss):
    from stir.config.schema import LossConfig, TrainConfig
    from stir.training.runs import recipe_group, recipe_of

    recipe = recipe_of(TrainConfig(loss=LossConfig(loss)))
    assert len(recipe) == PAPER_RECIPE_KEYS
    assert recipe_group(recipe) == PAPER_RECIPE_GROUPS[loss]


if __name__ == "__main__":  # regenerate the fixture
    import tempfile

    from stir.data import synthetic

    torch.set_num_threads(1)

    class _Patch:  # the part of pytest's monkeypatch that run_entry_point uses
        def setenv(self, key, value):
            import os
            os.environ[key] = value

        def setattr(self, obj, name, value):
            setattr(obj, name, value)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "cifar10"
        synthetic.write_cifar10_python(root, n_train=160, n_test=40, seed=0)  # conftest's cifar10_root
        recipes = {loss: pin(root, Path(tmp) / loss, loss, _Patch()) for loss in RECIPES}
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps({"torch": torch.__version__, "machine": host(), "recipes": recipes}, indent=1) + "\n")
