"""The vanilla objective: empirical risk on clean images, no attack."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from stir.config.schema import AttackConfig, LossConfig
from stir.training.losses import LossOutput, register


@register("vanilla")
def vanilla_loss(
    model: nn.Module, x: Tensor, y: Tensor, loss_cfg: LossConfig, attack_cfg: AttackConfig,
    generator: Optional[torch.Generator] = None, attack_model: Optional[nn.Module] = None,
) -> LossOutput:
    """Empirical risk: CE(f(x), y).

    ``attack_cfg``, ``generator`` and ``attack_model`` are unused.
    """
    logits = model(x)  # (b, C)
    ce = F.cross_entropy(logits, y, label_smoothing=loss_cfg.label_smoothing)
    return LossOutput(ce, logits_clean=logits, extra={"ce": ce.detach()})
