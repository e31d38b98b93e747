"""Training objectives: vanilla, adversarial training (AT), TRADES and MART, as in the papers.

Each loss is ``loss(model, x, y, loss_cfg, attack_cfg, generator=None, attack_model=None) ->
LossOutput``. The model is called in whatever mode the caller set for the training forward (train
mode in the LightningModule); attacks run inside ``stir.models.frozen`` (eval mode, no weight
gradients) and leave every module's mode, ``requires_grad`` flag and batch-norm statistic as they
were. ``attack_model``: what the attack differentiates instead of ``model`` (the LightningModule
passes ``stir.attacks.AttackNetwork``'s copy: ``model``'s eval-mode function, batch norm folded,
channels-last, refreshed every step); the training forwards always use ``model``. Only the
training forward passes (clean and / or adversarial, in the caller's mode) update batch-norm
running statistics. Images are in [0, 1]; logits are (b, C).

KL direction (all losses): KL(p(x) || p(x_adv)) = sum_k p_k(x) log(p_k(x) / p_k(x_adv)), summed
over classes per example, averaged over the batch (the official TRADES / MART codes:
KLDivLoss(log_softmax(f(x_adv)), softmax(f(x))), sum / batch size). In the training objectives the
gradient flows through both f(x) and f(x_adv) (as in both papers' code); only the attacks treat
f(x) as a constant.

Label smoothing (``loss_cfg.label_smoothing = s``, Szegedy et al. 2016) replaces the one-hot target
of every cross-entropy term of the objective by (1 - s) * onehot(y) + s / C; the attacks keep the
plain cross-entropy (or KL) they maximise, and MART's margin and weight terms are unchanged.
s = 0 (the default) is each paper's objective.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from stir.attacks import kl_per_example, pgd_l2, trades_l2
from stir.config.schema import AttackConfig, LossConfig


@dataclass
class LossOutput:
    """What a training objective returns."""

    loss: Tensor  # () the scalar to backpropagate
    logits_clean: Optional[Tensor] = None  # (b, C) from the training forward on x, if the loss made one
    logits_adv: Optional[Tensor] = None  # (b, C) from the training forward on x_adv, if the loss made one
    extra: Dict[str, Tensor] = field(default_factory=dict)  # detached scalar terms for logging


Loss = Callable[..., LossOutput]


def vanilla_loss(
    model: nn.Module, x: Tensor, y: Tensor, loss_cfg: LossConfig, attack_cfg: AttackConfig,
    generator: Optional[torch.Generator] = None, attack_model: Optional[nn.Module] = None,
) -> LossOutput:
    """Empirical risk: CE(f(x), y). ``attack_cfg`` is unused."""
    logits = model(x)  # (b, C)
    ce = F.cross_entropy(logits, y, label_smoothing=loss_cfg.label_smoothing)
    return LossOutput(ce, logits_clean=logits, extra={"ce": ce.detach()})


def at_loss(
    model: nn.Module, x: Tensor, y: Tensor, loss_cfg: LossConfig, attack_cfg: AttackConfig,
    generator: Optional[torch.Generator] = None, attack_model: Optional[nn.Module] = None,
) -> LossOutput:
    """Adversarial training (Madry et al. 2018): CE(f(x_adv), y),

    x_adv = PGD-l2 maximising CE(f(x'), y) over ||x' - x||_2 <= eps (``stir.attacks.pgd_l2``,
    torchattacks' PGDL2; ``attack_cfg.steps = 1`` gives the "AT it=1" model). No clean forward.
    """
    x_adv = pgd_l2(model if attack_model is None else attack_model, x, y, attack_cfg, generator=generator)
    logits_adv = model(x_adv)  # (b, C)
    ce = F.cross_entropy(logits_adv, y, label_smoothing=loss_cfg.label_smoothing)
    return LossOutput(ce, logits_adv=logits_adv, extra={"ce_adv": ce.detach()})


def trades_loss(
    model: nn.Module, x: Tensor, y: Tensor, loss_cfg: LossConfig, attack_cfg: AttackConfig,
    generator: Optional[torch.Generator] = None, attack_model: Optional[nn.Module] = None,
) -> LossOutput:
    """TRADES (Zhang et al. 2019): CE(f(x), y) + beta * KL(p(x) || p(x_adv)),

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


def mart_loss(
    model: nn.Module, x: Tensor, y: Tensor, loss_cfg: LossConfig, attack_cfg: AttackConfig,
    generator: Optional[torch.Generator] = None, attack_model: Optional[nn.Module] = None,
) -> LossOutput:
    """MART (Wang et al. 2020): BCE(p(x_adv), y) + beta * mean_i KL_i(p(x) || p(x_adv)) (1 - p_y(x)),

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


LOSSES: Dict[str, Loss] = {"vanilla": vanilla_loss, "at": at_loss, "trades": trades_loss, "mart": mart_loss}


def get_loss(name: str) -> Loss:
    """The registered objective called ``name``; ValueError listing the valid names otherwise."""
    if name not in LOSSES:
        raise ValueError(f"unknown loss.name={name!r}; choose one of {sorted(LOSSES)}")
    return LOSSES[name]
