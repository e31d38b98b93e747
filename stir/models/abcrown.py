"""Small adversarially trained CIFAR networks of a verification benchmark (alpha-beta-CROWN's models).

Biases everywhere, no batch norm; parameter names are those of the public files (so their state
dicts load as they are). ``w`` is ``ModelConfig.width``; the published networks use the widths in
brackets.

``resnet2b`` (w = 8) and ``resnet4b`` (w = 16), VNN-COMP 2021's ``cifar10_resnet``::

    conv1 3x3 stride 2 (3 -> w) - ReLU                                   (b, w, 16, 16)
    S stages layer1..S, each block(c_in -> 2w, stride 2), block(2w -> 2w) (S = 1 / 2)
    flatten - linear1 (-> 100) - ReLU - linear2 (-> classes)

block: conv1 3x3 (stride s) - ReLU - conv2 3x3, plus ``shortcut.0`` = Conv2d(c_in, c_out, 1, s)
where the shape changes (identity otherwise), then ReLU. Maps: resnet2b (b, 16, 8, 8) -> 1024
features, resnet4b (b, 32, 4, 4) -> 512.

``cnn_a`` (w = 16), "CNN-A" of Dathathri et al. (2020): a Sequential whose modules are numbered as
in the files: ``0`` Conv2d(3, w, 4, 2, 1), ``1`` ReLU, ``2`` Conv2d(w, 2w, 4, 2, 1), ``3`` ReLU,
``4`` Flatten, ``5`` Linear(2w * 64, 100), ``6`` ReLU, ``7`` Linear(100, classes).

Taps: resnets ``stem``, every block, ``penultimate`` (the 100-d post-ReLU vector before the last
linear layer), ``logits``; inner taps every block's ``relu1`` and ``sum`` and ``linear1`` (the
pre-ReLU 100-d vector). cnn_a: ``conv1``, ``conv2``, ``penultimate``, ``logits``, inner tap
``linear1``. Every ReLU is a module, so a FakeReLU spec can name any of them; the penultimate ReLU
is an ``OutputReLU`` and is the architecture's rule (``fake_relu_sites``). The original STIR code
fakes nothing in such foreign models (its adapter ignores ``fake_relu``); faking that one ReLU is
what moves their inversion off dead units (PITFALLS.md), so it is the rule this project documents.
"""
from __future__ import annotations

from typing import Sequence

from torch import Tensor, nn

from stir.config.schema import ModelConfig
from stir.models.fake_relu import OutputReLU
from stir.models.normalize import Normalize
from stir.models.registry import Network, Tap, register

HIDDEN = 100  # units of the penultimate dense layer in all three architectures
PAPER_WIDTHS = {"resnet2b": 8, "resnet4b": 16, "cnn_a": 16}
_RULE = "the ReLU of the penultimate 100-d layer (this project's rule; the original STIR code fakes nothing here)"


class DenseBlock(nn.Module):
    """conv-ReLU-conv plus a (1x1 convolution) shortcut, then ReLU; no batch norm."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride))
        self.sum = nn.Identity()  # the pre-ReLU sum (tap layerI.J.sum)
        self.relu_out = OutputReLU()

    def forward(self, x: Tensor) -> Tensor:  # (b, c_in, h, w) -> (b, c_out, h / s, w / s)
        out = self.conv2(self.relu1(self.conv1(x)))
        return self.relu_out(self.sum(out + self.shortcut(x)))


class VerifiedResNet(Network):
    """resnet2b / resnet4b (module docstring): ``stages`` stages of two blocks, a 100-d dense head."""

    fake_relu_rule = _RULE

    def __init__(self, stages: int, width: int, num_classes: int, mean: Sequence[float], std: Sequence[float]):
        super().__init__()
        self.normalize = Normalize(mean, std)
        self.conv1 = nn.Conv2d(3, width, 3, 2, 1)
        self.relu = nn.ReLU()
        taps, inner = [Tap("stem", "relu", width, 2)], []
        c_in, c_out, stride_total = width, 2 * width, 2
        for i in range(stages):
            stride_total *= 2
            self.add_module(f"layer{i + 1}", nn.Sequential(DenseBlock(c_in, c_out, 2), DenseBlock(c_out, c_out, 1)))
            c_in = c_out
            for j in range(2):
                name = f"layer{i + 1}.{j}"
                taps.append(Tap(name, name, c_out, stride_total))
                inner += [Tap(f"{name}.relu1", f"{name}.relu1", c_out, stride_total),
                          Tap(f"{name}.sum", f"{name}.sum", c_out, stride_total)]
        side = 32 // stride_total
        self.flatten = nn.Flatten()
        self.linear1 = nn.Linear(c_out * side * side, HIDDEN)
        self.linear1_relu = OutputReLU()
        self.linear2 = nn.Linear(HIDDEN, num_classes)
        self.taps = tuple(taps) + (Tap("penultimate", "linear1_relu", HIDDEN, 0),
                                   Tap("logits", "linear2", num_classes, 0))
        self.inner_taps = tuple(inner) + (Tap("linear1", "linear1", HIDDEN, 0),)
        self.fake_relu_sites = ("linear1_relu",)
        self._stages = stages

    def forward(self, x: Tensor) -> Tensor:  # (b, 3, 32, 32) in [0, 1] -> (b, num_classes)
        x = self.relu(self.conv1(self.normalize(x)))
        for i in range(self._stages):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.linear2(self.linear1_relu(self.linear1(self.flatten(x))))


class CnnA(Network):
    """CNN-A (module docstring); modules named 0..7 as the published Sequential."""

    fake_relu_rule = _RULE

    def __init__(self, width: int, num_classes: int, mean: Sequence[float], std: Sequence[float]):
        super().__init__()
        self.normalize = Normalize(mean, std)
        layers = [nn.Conv2d(3, width, 4, 2, 1), nn.ReLU(),  # (b, w, 16, 16)
                  nn.Conv2d(width, 2 * width, 4, 2, 1), nn.ReLU(),  # (b, 2w, 8, 8)
                  nn.Flatten(), nn.Linear(2 * width * 8 * 8, HIDDEN), OutputReLU(), nn.Linear(HIDDEN, num_classes)]
        for i, layer in enumerate(layers):
            self.add_module(str(i), layer)
        self._order = tuple(str(i) for i in range(len(layers)))
        self.taps = (Tap("conv1", "1", width, 2), Tap("conv2", "3", 2 * width, 4),
                     Tap("penultimate", "6", HIDDEN, 0), Tap("logits", "7", num_classes, 0))
        self.inner_taps = (Tap("linear1", "5", HIDDEN, 0),)
        self.fake_relu_sites = ("6",)

    def forward(self, x: Tensor) -> Tensor:  # (b, 3, 32, 32) in [0, 1] -> (b, num_classes)
        x = self.normalize(x)
        for name in self._order:
            x = getattr(self, name)(x)
        return x


@register("resnet2b")
def resnet2b(cfg: ModelConfig, num_classes: int, mean, std) -> VerifiedResNet:
    return VerifiedResNet(1, cfg.width, num_classes, mean, std)


@register("resnet4b")
def resnet4b(cfg: ModelConfig, num_classes: int, mean, std) -> VerifiedResNet:
    return VerifiedResNet(2, cfg.width, num_classes, mean, std)


@register("cnn_a")
def cnn_a(cfg: ModelConfig, num_classes: int, mean, std) -> CnnA:
    return CnnA(cfg.width, num_classes, mean, std)
