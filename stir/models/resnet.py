"""CIFAR ResNet18/34 (He et al. 2016), the variant with a 3x3 stem and no max-pool.

Taps: ``stem``, every residual block (``layer1.0`` ... ``layer4.1``), ``penultimate`` (global
average pool, (n, 8 * width)) and ``logits``; the depth list of ``layers=all``. Inner taps (readable,
not in that list): each block's first post-ReLU output ``layerI.J.relu1`` and its pre-ReLU sum
``layerI.J.sum``, the representations the original STIR code lists layer by layer
(``original_layer_taps``). The output ReLUs of the last stage are ``OutputReLU`` modules, which
``stir.models.fake_relu`` can make fake during inversion, as the original code does.
"""
from __future__ import annotations

from typing import Sequence

from torch import Tensor, nn

from stir.config.schema import ModelConfig
from stir.models.fake_relu import OutputReLU
from stir.models.normalize import Normalize
from stir.models.registry import Network, Tap, register


class BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.relu1 = nn.ReLU()
        self.sum = nn.Identity()  # a readable point: the pre-ReLU sum (tap layerI.J.sum)
        self.relu_out = OutputReLU()  # fake during the published inversion (last stage)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu_out(self.sum(out + self.shortcut(x)))


class GlobalAvgPool(nn.Module):
    """(b, c, h, w) -> (b, c). A mean, not adaptive_avg_pool2d, whose CUDA backward is not deterministic."""

    def forward(self, x: Tensor) -> Tensor:
        return x.mean(dim=(2, 3))


class ResNet(Network):
    fake_relu_rule = "the output ReLU of every block of the last stage (layer4), as the original STIR code"
    published_fake_relu = True  # the original code's own CIFAR ResNets: it fakes these sites

    def __init__(self, blocks: Sequence[int], width: int, num_classes: int, mean, std):
        super().__init__()
        self.normalize = Normalize(mean, std)
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        taps = [Tap("stem", "stem", width, 1)]
        inner, original = [], ["stem"]
        c_in, stride_total = width, 1
        for i, n_blocks in enumerate(blocks):
            c_out, stride = width * 2**i, 1 if i == 0 else 2
            stride_total *= stride
            layer = []
            for j in range(n_blocks):
                layer.append(BasicBlock(c_in, c_out, stride if j == 0 else 1))
                c_in = c_out
                name = f"layer{i + 1}.{j}"
                taps.append(Tap(name, name, c_out, stride_total))
                inner += [Tap(f"{name}.relu1", f"{name}.relu1", c_out, stride_total),
                          Tap(f"{name}.sum", f"{name}.sum", c_out, stride_total)]
                original += [f"{name}.relu1", f"{name}.sum"]
            self.add_module(f"layer{i + 1}", nn.Sequential(*layer))
        self.pool = GlobalAvgPool()
        self.fc = nn.Linear(c_in, num_classes)
        self.taps = tuple(taps) + (Tap("penultimate", "pool", c_in, 0), Tap("logits", "fc", num_classes, 0))
        self.inner_taps = tuple(inner)
        self._original = tuple(original) + ("penultimate",)
        # The original code passes fake_relu to every block of layer4 of its ResNets (published_fake_relu).
        self.fake_relu_sites = tuple(f"layer4.{j}.relu_out" for j in range(blocks[-1]))

    @property
    def original_layer_taps(self) -> tuple:
        """stem, then (relu1, sum) of every block, then penultimate: the original code's list."""
        return self._original

    def forward(self, x: Tensor) -> Tensor:  # (b, 3, h, w) in [0, 1] -> (b, num_classes)
        x = self.stem(self.normalize(x))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.pool(x))


@register("resnet18")
def resnet18(cfg: ModelConfig, num_classes: int, mean, std) -> ResNet:
    return ResNet((2, 2, 2, 2), cfg.width, num_classes, mean, std)


@register("resnet34")
def resnet34(cfg: ModelConfig, num_classes: int, mean, std) -> ResNet:
    return ResNet((3, 4, 6, 3), cfg.width, num_classes, mean, std)
