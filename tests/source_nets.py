"""Small foreign networks for the model-source tests (``python:source_nets:...``): plain nn.Modules
written the way other code bases write them, not this project's registered networks; and weights
of a RobustBench architecture written in RobustBench's layout."""
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn


class FunctionalHead(nn.Module):
    """Its penultimate vector exists only inside forward (a functional mean), then a linear head."""

    def __init__(self, width: int = 6, num_classes: int = 10):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
                                  nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), nn.ReLU())
        self.head = nn.Linear(2 * width, num_classes)

    def forward(self, x: Tensor) -> Tensor:  # (b, 3, h, w) in [0, 1] -> (b, classes)
        h = self.body(x).mean(dim=(2, 3))  # (b, 2 * width): computed functionally, no module outputs it
        return self.head(h)


def functional_head(width: int = 6, num_classes: int = 10) -> nn.Module:
    return FunctionalHead(width, num_classes)


class NoLinear(nn.Module):
    """The classifier is F.linear on a bare parameter: no nn.Linear to find."""

    def __init__(self, width: int = 6, num_classes: int = 10):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU())
        self.weight = nn.Parameter(torch.randn(num_classes, width) / width ** 0.5)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(self.body(x).amax(dim=(2, 3)), self.weight)


def no_linear(width: int = 6) -> nn.Module:
    return NoLinear(width)


def no_linear_penultimate(net: NoLinear, x: Tensor) -> Tensor:
    """A function tap: the vector NoLinear classifies, (b, width)."""
    return net.body(x).amax(dim=(2, 3))


class FeatureMaps(nn.Module):
    """Returns (b, c, h, w) feature maps, not logits."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(x)


def feature_maps() -> nn.Module:
    return FeatureMaps()


def logits_and_features() -> nn.Module:
    class Both(FunctionalHead):
        def forward(self, x):
            h = self.body(x).mean(dim=(2, 3))
            return self.head(h), h  # a tuple, as some repositories return

    return Both()


# RobustBench (optional extra): its own model definitions, weights in its layout.

def robustbench_or_skip():
    """RobustBench's (model_dicts, BenchmarkDataset, ThreatModel, load_model), or skip the test."""
    from stir.models.sources import SourceError
    from stir.models.sources.robustbench import _import, installed

    if not installed():
        pytest.skip('the optional robustbench extra is not installed (pip install -e ".[robustbench]")')
    try:
        return _import()
    except SourceError as err:
        pytest.skip(f"the robustbench extra is installed but cannot be imported: {err}")


RB_NAME = "Sehwag2021Proxy_R18"  # a ResNet-18 of RobustBench's CIFAR-10 L2 zoo


def write_robustbench_weights(model_dir: Path, name: str = RB_NAME, seed: int = 0) -> Path:
    """Random weights of a RobustBench architecture, saved where RobustBench looks for them."""
    model_dicts, Dataset, Threat, _ = robustbench_or_skip()
    torch.manual_seed(seed)
    net = model_dicts[Dataset("cifar10")][Threat("L2")][name]["model"]()
    file = model_dir / "cifar10" / "L2" / f"{name}.pt"
    file.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": net.state_dict()}, file)
    return file
