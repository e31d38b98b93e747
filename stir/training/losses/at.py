"""Adversarial training (Madry et al. 2018): cross-entropy on PGD-l2 examples."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from stir.attacks import pgd_l2
from stir.config.schema import AttackConfig, LossConfig
from stir.training.losses import LossOutput, register


@register("at", adversarial=True, attack=("eps", "steps"))
def at_loss(
    model: nn.Module, x: Tensor, y: Tensor, loss_cfg: LossConfig, attack_cfg: AttackConfig,
    generator: Optional[torch.Generator] = None, attack_model: Optional[nn.Module] = None,
) -> LossOutput:
    """Adversarial training (Madry et al. 2018): CE(f(x_adv), y), x_adv by PGD-l2.

    x_adv = PGD-l2 maximising CE(f(x'), y) over ||x' - x||_2 <= eps (``stir.attacks.pgd_l2``,
    torchattacks' PGDL2; ``attack_cfg.steps = 1`` gives the "AT it=1" model). No clean forward.
    """
    x_adv = pgd_l2(model if attack_model is None else attack_model, x, y, attack_cfg, generator=generator)
    logits_adv = model(x_adv)  # (b, C)
    ce = F.cross_entropy(logits_adv, y, label_smoothing=loss_cfg.label_smoothing)
    return LossOutput(ce, logits_adv=logits_adv, extra={"ce_adv": ce.detach()})
