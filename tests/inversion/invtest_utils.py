"""Tiny models and images shared by the inversion tests (a plain module, imported by name)."""
import torch
from torch import nn


def tiny_net(seed: int = 0) -> nn.Module:
    """conv-bn-relu-linear on 16x16 images, in eval mode; the global RNG is left untouched."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return nn.Sequential(
            nn.Conv2d(3, 4, 3, 2, 1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 8)
        ).eval()


def noise_images(n: int) -> torch.Tensor:
    """(n, 3, 16, 16) uniform images from a fixed generator."""
    return torch.rand(n, 3, 16, 16, generator=torch.Generator().manual_seed(0))
