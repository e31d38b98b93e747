"""CIFAR VGG16/19 with batch norm (Simonyan & Zisserman 2015) and one linear head.

Taps: every conv unit (conv-bn-relu) ``conv1`` ... ``conv13``/``conv16``, ``penultimate`` (the
flattened (n, 8 * width) map after the last max-pool, 1x1 for 32x32 inputs) and ``logits``.
"""
from __future__ import annotations

from typing import Sequence, Union

from torch import Tensor, nn

from stir.config.schema import ModelConfig
from stir.models.normalize import Normalize
from stir.models.registry import Network, Tap, register

# Channels of each conv unit as multiples of the width, "M" a 2x2 max-pool.
_LAYOUTS = {
    "vgg16": (1, 1, "M", 2, 2, "M", 4, 4, 4, "M", 8, 8, 8, "M", 8, 8, 8, "M"),
    "vgg19": (1, 1, "M", 2, 2, "M", 4, 4, 4, 4, "M", 8, 8, 8, 8, "M", 8, 8, 8, 8, "M"),
}


class VGG(Network):
    def __init__(self, layout: Sequence[Union[int, str]], width: int, num_classes: int, mean, std):
        super().__init__()
        self.normalize = Normalize(mean, std)
        layers, taps = [], []
        c_in, stride = 3, 1
        for item in layout:
            if item == "M":
                layers.append(nn.MaxPool2d(2))
                stride *= 2
                continue
            c_out = width * int(item)
            layers.append(nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()))
            taps.append(Tap(f"conv{len(taps) + 1}", f"features.{len(layers) - 1}", c_out, stride))
            c_in = c_out
        self.features = nn.Sequential(*layers)
        self.flatten = nn.Flatten()
        self.classifier = nn.Linear(c_in, num_classes)
        self.taps = tuple(taps) + (Tap("penultimate", "flatten", c_in, 0), Tap("logits", "classifier", num_classes, 0))

    def forward(self, x: Tensor) -> Tensor:  # (b, 3, 32, 32) in [0, 1] -> (b, num_classes)
        return self.classifier(self.flatten(self.features(self.normalize(x))))


@register("vgg16")
def vgg16(cfg: ModelConfig, num_classes: int, mean, std) -> VGG:
    return VGG(_LAYOUTS["vgg16"], cfg.width, num_classes, mean, std)


@register("vgg19")
def vgg19(cfg: ModelConfig, num_classes: int, mean, std) -> VGG:
    return VGG(_LAYOUTS["vgg19"], cfg.width, num_classes, mean, std)
