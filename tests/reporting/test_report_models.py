"""A report names its models: source, recipe, accuracy, dtype; barely trained ones flagged (issue 55)."""
import math
from types import SimpleNamespace

import torch

from stir.config.schema import DataConfig, TrainConfig
from stir.reporting.models import BARELY_TRAINED, FLAG, flagged, model_row, models_table


def model(label, accuracy=None, train=None, **record):
    metrics = {} if accuracy is None else {"test/acc": accuracy, "test/robust_acc": 0.1}
    return SimpleNamespace(label=label, module=torch.nn.Linear(2, 2), metrics=metrics, train=train, data=DataConfig(),
                           record=record)


def test_a_model_under_the_stated_accuracy_is_flagged_and_one_above_is_not():
    train = TrainConfig()
    low = model("tiny", BARELY_TRAINED["cifar10"] - 0.01, train, source="zoo", run_dir="runs/x/seed0")
    high = model("trained", 0.85, train, source="shipped", shipped_file="zoo/weights/a.pt")
    rows = {r["model"]: r for r in models_table([high, low]).rows}
    assert rows["tiny"]["flag"] == FLAG and rows["trained"]["flag"] == ""
    assert rows["tiny"]["loss"] == "vanilla" and rows["tiny"]["epochs"] == train.trainer.max_epochs
    assert rows["tiny"]["width"] == train.model.width and rows["tiny"]["training_images"] == 45_000
    assert rows["trained"]["source"] == "shipped (zoo/weights/a.pt)" and rows["tiny"]["dtype"] == "float32"
    (note,) = flagged([high, low])
    assert note.startswith("model tiny: test accuracy 0.590 is under 0.6 on cifar10: " + FLAG)


def test_a_model_without_a_known_accuracy_is_not_flagged_and_says_so():
    other = model("torchvision-resnet18", source="torchvision")
    row = model_row(other)
    assert math.isnan(row["clean_accuracy"]) and row["flag"] == "" and row["loss"] == "-"
    assert models_table([other]).display[0]["clean_accuracy"] == "not measured" and not flagged([other])
