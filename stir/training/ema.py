"""An exponential moving average of a network's weights (Polyak averaging with exponential weights).

    theta_ema <- d_t * theta_ema + (1 - d_t) * theta,    d_t = min(decay, (1 + t) / (10 + t))

for every floating-point parameter and buffer (batch-norm running statistics included, as timm's
ModelEmaV2); integer buffers (``num_batches_tracked``) are copied. ``t`` counts the updates made so
far: the warm-up of TensorFlow's ``ExponentialMovingAverage(num_updates=t)``, so that a short run's
average does not keep its random initialisation for the first ~1 / (1 - decay) steps.
"""
from __future__ import annotations

import torch
from torch import nn


def ema_decay(decay: float, updates: int) -> float:
    """d_t for the ``updates``-th update (0-based): min(decay, (1 + t) / (10 + t))."""
    return min(decay, (1 + updates) / (10 + updates))


@torch.no_grad()
def ema_update(average: nn.Module, network: nn.Module, decay: float) -> None:
    """average <- decay * average + (1 - decay) * network, entry by entry of the state dicts (in place)."""
    source = network.state_dict()
    for name, value in average.state_dict().items():
        new = source[name].detach()
        if value.is_floating_point():
            value.mul_(decay).add_(new.to(value.dtype), alpha=1 - decay)
        else:
            value.copy_(new)
