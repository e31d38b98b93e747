"""Input normalisation inside the network, so every model takes images in [0, 1]."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor, nn

# Channel statistics of the training sets (per channel, images in [0, 1]).
CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
CIFAR100_MEAN, CIFAR100_STD = (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)


def channel_stats(data_name: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(mean, std) for a data set name; unknown names fall back to CIFAR-10's statistics."""
    return (CIFAR100_MEAN, CIFAR100_STD) if data_name == "cifar100" else (CIFAR10_MEAN, CIFAR10_STD)


class Normalize(nn.Module):
    """(x - mean) / std per channel; buffers follow the module's device and dtype."""

    def __init__(self, mean: Sequence[float], std: Sequence[float]):
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1))

    def forward(self, x: Tensor) -> Tensor:  # (b, c, h, w) in [0, 1]
        return (x - self.mean) / self.std
