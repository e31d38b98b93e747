"""TRADES (Zhang et al. 2019): clean cross-entropy plus beta times the KL to the adversarial example."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from stir.attacks import kl_per_example, trades_l2
from stir.config.schema import AttackConfig, LossConfig
from stir.training.losses import LossOutput, register


@register("trades", adversarial=True, attack=("eps", "steps"), beta=True)
def trades_loss(
    model: nn.Module, x: Tensor, y: Tensor, loss_cfg: LossConfig, attack_cfg: AttackConfig,
    generator: Optional[torch.Generator] = None, attack_model: Optional[nn.Module] = None,
) -> LossOutput:
    """TRADES (Zhang et al. 2019): CE(f(x), y) + beta * KL(p(x) || p(x_adv)).

    x_adv = argmax_{||x' - x||_2 <= eps} KL(p(x) || p(x')) (``stir.attacks.trades_l2``).
    """
    x_adv = trades_l2(model if attack_model is None else attack_model, x, attack_cfg, generator=generator)
    logits_clean = model(x)  # (b, C)
    logits_adv = model(x_adv)  # (b, C)
    return trades_from_logits(logits_clean, logits_adv, y, loss_cfg.beta, loss_cfg.label_smoothing)


def trades_from_logits(logits_clean: Tensor, logits_adv: Tensor, y: Tensor, beta: float,
                       label_smoothing: float = 0.0) -> LossOutput:
    """The TRADES objective from training-forward logits (b, C): CE(clean) + beta * mean_i KL_i."""
    ce = F.cross_entropy(logits_clean, y, label_smoothing=label_smoothing)
    kl = kl_per_example(logits_clean, logits_adv).mean()
    loss = ce + beta * kl
    return LossOutput(loss, logits_clean=logits_clean, logits_adv=logits_adv,
                      extra={"ce": ce.detach(), "kl": kl.detach()})
