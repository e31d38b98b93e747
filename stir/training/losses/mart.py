"""MART (Wang et al. 2020): boosted cross-entropy on PGD-l2 examples plus a KL weighted by misclassification."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from stir.attacks import kl_per_example, pgd_l2
from stir.config.schema import AttackConfig, LossConfig
from stir.training.losses import LossOutput, register


@register("mart", adversarial=True, attack=("eps", "steps"), beta=True)
def mart_loss(
    model: nn.Module, x: Tensor, y: Tensor, loss_cfg: LossConfig, attack_cfg: AttackConfig,
    generator: Optional[torch.Generator] = None, attack_model: Optional[nn.Module] = None,
) -> LossOutput:
    """MART (Wang et al. 2020): BCE(p(x_adv), y) + beta * mean_i KL_i(p(x) || p(x_adv)) (1 - p_y(x)).

    BCE(p, y) = -log p_y - log(1 - max_{k != y} p_k)  (the boosted CE). x_adv is PGD-l2 with CE, the
    same attack as AT (``stir.attacks.pgd_l2``): the official MART code has no l2 attack, and sharing
    it makes AT and MART models differ only in the objective.
    """
    x_adv = pgd_l2(model if attack_model is None else attack_model, x, y, attack_cfg, generator=generator)
    logits_clean = model(x)  # (b, C)
    logits_adv = model(x_adv)  # (b, C)
    return mart_from_logits(logits_clean, logits_adv, y, loss_cfg.beta, loss_cfg.label_smoothing)


def mart_from_logits(logits_clean: Tensor, logits_adv: Tensor, y: Tensor, beta: float,
                     label_smoothing: float = 0.0) -> LossOutput:
    """The MART objective from training-forward logits (b, C); works for b = 1.

    Computed in log space, exactly, without the official code's 1e-12 / 1.0001 / 1.0000001 guards:
    log(1 - p_k) = logsumexp_{j != k} z_j - logsumexp_j z_j.
    """
    ce = F.cross_entropy(logits_adv, y, label_smoothing=label_smoothing)
    num_classes = logits_adv.shape[1]
    is_true = F.one_hot(y, num_classes).bool()  # (b, C)
    top_wrong = logits_adv.masked_fill(is_true, float("-inf")).argmax(dim=1)  # (b,) most likely wrong class
    is_top_wrong = F.one_hot(top_wrong, num_classes).bool()  # (b, C)
    log_not_top_wrong = logits_adv.masked_fill(is_top_wrong, float("-inf")).logsumexp(1) - logits_adv.logsumexp(1)  # (b,)
    margin = -log_not_top_wrong.mean()  # -log(1 - max_{k != y} p_k(x_adv))
    p_true = F.softmax(logits_clean, dim=1).gather(1, y.view(-1, 1)).view(-1)  # (b,) p_y(x)
    kl = (kl_per_example(logits_clean, logits_adv) * (1 - p_true)).mean()
    loss = ce + margin + beta * kl
    return LossOutput(loss, logits_clean=logits_clean, logits_adv=logits_adv,
                      extra={"ce_adv": ce.detach(), "margin": margin.detach(), "kl_weighted": kl.detach()})
