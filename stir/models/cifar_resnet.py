"""He et al.'s CIFAR ResNets (2016, section 4.2): 6n+2 layers, three stages, option-A shortcuts.

    conv1 3x3 (w) - bn1 - ReLU
    layer1: n blocks, w channels, 32x32      (w = 16 in the paper; ``ModelConfig.width``)
    layer2: n blocks, 2w channels, 16x16     (first block stride 2)
    layer3: n blocks, 4w channels, 8x8       (first block stride 2)
    global average pool -> (b, 4w) -> linear

Block ``layerI.J``: conv1 3x3 (stride s) - bn1 - ReLU - conv2 3x3 - bn2, plus the shortcut, then
ReLU. The shortcut is "option A" (parameter-free): the identity, or where the shape changes
``x[:, :, ::2, ::2]`` zero-padded with (c_out - c_in) / 2 channels on either side of the channel
axis. n = 3 / 5 / 7 / 9 gives ResNet20 / 32 / 44 / 56 (0.27M / 0.46M / 0.66M / 0.85M parameters at
w = 16). Parameter names are those of the public release (akamaster/pytorch_resnet_cifar10, less
DataParallel's ``module.`` prefix): ``conv1``, ``bn1``, ``layer1.0.conv1`` ... ``linear``, so its
state dicts load as they are (``stir.models.weights``).

Taps (depth order, ``layers=all``): ``stem`` (after the first ReLU, (n, w, 32, 32)), every block
``layer1.0`` ... ``layer3.{n-1}``, ``penultimate`` (the pooled (n, 4w) vector) and ``logits``.
Inner taps: each block's first post-ReLU map ``layerI.J.relu1`` and its pre-ReLU sum
``layerI.J.sum`` (``original_layer_taps``: stem, (relu1, sum) of every block, penultimate, as the
original STIR code lists a ResNet's layers). The output ReLUs of the last stage (``layer3.J.relu_out``)
are ``OutputReLU`` modules: the architecture's FakeReLU rule (every block of the last stage, as the
original code's ResNets; ``stir.models.fake_relu``). The original STIR code does not have these
networks in its zoo and fakes nothing in networks from elsewhere, so the published setting inverts
them with real ReLUs (``published_fake_relu`` is False); ``inversion.fake_relu=architecture`` fakes
the last stage. Weights are initialised as He et al. do (Kaiming normal for convolutions
and the linear layer), so a network trained here starts as theirs did.
"""
from __future__ import annotations

from typing import Sequence

import torch.nn.functional as F
from torch import Tensor, nn

from stir.config.schema import ModelConfig
from stir.models.fake_relu import OutputReLU
from stir.models.normalize import Normalize
from stir.models.registry import Network, Tap, register
from stir.models.resnet import GlobalAvgPool

# Blocks per stage of each depth 6n + 2.
DEPTHS = {20: 3, 32: 5, 44: 7, 56: 9}
PAPER_WIDTH = 16  # channels of the first stage in He et al. (2016)


class PadShortcut(nn.Module):
    """Option A: (b, c_in, h, w) -> (b, c_out, h / s, w / s), subsampled and zero-padded, no parameters."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        if (c_out - c_in) % 2 or c_out < c_in:
            raise ValueError(f"option-A shortcut needs c_out - c_in even and >= 0, got {c_in} -> {c_out}")
        self.pad, self.stride = (c_out - c_in) // 2, stride

    def forward(self, x: Tensor) -> Tensor:
        x = x[:, :, :: self.stride, :: self.stride]  # (b, c_in, h / s, w / s)
        return F.pad(x, (0, 0, 0, 0, self.pad, self.pad))  # zero channels on both sides: (b, c_out, ...)

    def extra_repr(self) -> str:
        return f"pad={self.pad}, stride={self.stride}"


class CifarBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        # identity (an empty Sequential, as resnet.py) or option A where the shape changes
        self.shortcut = PadShortcut(c_in, c_out, stride) if stride != 1 or c_in != c_out else nn.Sequential()
        self.sum = nn.Identity()  # a readable point: the pre-ReLU sum (tap layerI.J.sum)
        self.relu_out = OutputReLU()  # fakeable: the architecture's rule (last stage)

    def forward(self, x: Tensor) -> Tensor:  # (b, c_in, h, w) -> (b, c_out, h / s, w / s)
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu_out(self.sum(out + self.shortcut(x)))


class CifarResNet(Network):
    """ResNet-(6n+2) of He et al. for 32x32 images; see the module docstring."""

    fake_relu_rule = "the output ReLU of every block of the last stage (layer3), as the original STIR code's ResNets"

    def __init__(self, depth: int, width: int, num_classes: int, mean: Sequence[float], std: Sequence[float]):
        super().__init__()
        if depth not in DEPTHS:
            raise ValueError(f"CIFAR ResNet depth must be one of {sorted(DEPTHS)}, got {depth}")
        if width % 2:  # option A pads (2w - w) / 2 zero channels on either side
            raise ValueError(f"CIFAR ResNets need an even model.width (option-A shortcuts), got {width}")
        n = DEPTHS[depth]
        self.normalize = Normalize(mean, std)
        self.conv1 = nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()
        taps, inner, original = [Tap("stem", "relu", width, 1)], [], ["stem"]
        c_in, stride_total = width, 1
        for i in range(3):
            c_out, stride = width * 2**i, 1 if i == 0 else 2
            stride_total *= stride
            blocks = []
            for j in range(n):
                blocks.append(CifarBlock(c_in, c_out, stride if j == 0 else 1))
                c_in = c_out
                name = f"layer{i + 1}.{j}"
                taps.append(Tap(name, name, c_out, stride_total))
                inner += [Tap(f"{name}.relu1", f"{name}.relu1", c_out, stride_total),
                          Tap(f"{name}.sum", f"{name}.sum", c_out, stride_total)]
                original += [f"{name}.relu1", f"{name}.sum"]
            self.add_module(f"layer{i + 1}", nn.Sequential(*blocks))
        self.pool = GlobalAvgPool()
        self.linear = nn.Linear(c_in, num_classes)
        self.taps = tuple(taps) + (Tap("penultimate", "pool", c_in, 0), Tap("logits", "linear", num_classes, 0))
        self.inner_taps = tuple(inner)
        self._original = tuple(original) + ("penultimate",)
        self.fake_relu_sites = tuple(f"layer3.{j}.relu_out" for j in range(n))
        for m in self.modules():  # He et al. (2015) initialisation, as the paper's section 4.2
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight)

    @property
    def original_layer_taps(self) -> tuple:
        """stem, then (relu1, sum) of every block, then penultimate: the original code's list."""
        return self._original

    def forward(self, x: Tensor) -> Tensor:  # (b, 3, 32, 32) in [0, 1] -> (b, num_classes)
        x = self.relu(self.bn1(self.conv1(self.normalize(x))))  # (b, w, 32, 32)
        x = self.layer3(self.layer2(self.layer1(x)))  # (b, 4w, 8, 8)
        return self.linear(self.pool(x))


def _register(depth: int) -> None:
    @register(f"cifar_resnet{depth}")
    def builder(cfg: ModelConfig, num_classes: int, mean, std) -> CifarResNet:
        return CifarResNet(depth, cfg.width, num_classes, mean, std)

    builder.__doc__ = (f"He et al.'s CIFAR ResNet{depth} ({DEPTHS[depth]} blocks per stage); "
                       f"width {PAPER_WIDTH} in the paper.")


for _depth in DEPTHS:
    _register(_depth)
