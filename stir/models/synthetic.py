"""Untrained networks that look trained to the code that runs them, for tests and benchmarks.

A freshly built network's batch norms are the identity (running mean 0, variance 1,
weight 1, bias 0), so folding them into the convolutions, or any other code whose
rounding depends on those values, is tested on a special case. These helpers give
every batch norm the kind of statistics training leaves behind.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["with_trained_batch_norms"]


@torch.no_grad()
def with_trained_batch_norms(model: nn.Module, seed: int = 0, *, affine: bool = False) -> nn.Module:
    """Give every batch norm of ``model`` non-identity statistics, in place; returns ``model``.

    running_mean ~ U(-0.3, 0.3), running_var ~ U(0.5, 2.0) per channel and, with
    ``affine``, weight ~ U(0.5, 1.5), bias ~ U(-0.2, 0.2), drawn from a generator
    seeded with ``seed`` (the global random state is untouched).
    """
    g = torch.Generator().manual_seed(seed)
    for mod in model.modules():
        if isinstance(mod, nn.modules.batchnorm._BatchNorm) and mod.track_running_stats:
            _fill(mod.running_mean, -0.3, 0.3, g)
            _fill(mod.running_var, 0.5, 2.0, g)
            if affine and mod.affine:
                _fill(mod.weight, 0.5, 1.5, g)
                _fill(mod.bias, -0.2, 0.2, g)
    return model


def _fill(t: torch.Tensor, low: float, high: float, g: torch.Generator) -> None:
    # Drawn on the CPU generator, then copied: the same values whatever t's device.
    t.copy_(torch.empty(t.shape, dtype=t.dtype).uniform_(low, high, generator=g))
