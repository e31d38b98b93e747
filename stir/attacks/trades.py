"""TRADES' inner maximisation (Zhang et al. 2019) in the l2 ball, on ``stir.descent``.

    x_adv = argmax_{||x' - x||_2 <= eps, x' in [0, 1]}  KL( p(x) || p(x') ),   p = softmax o f

run as PGD-l2 minimising -KL with normalized-gradient steps of length ``cfg.alpha``. The clean
distribution p(x) is a constant of the attack (computed once, without gradient).

Start (as the official TRADES code): ``x_0 = clip_[0,1](x + 0.001 * N(0, I))``, drawn from
``generator``; the tiny Gaussian start is needed because KL(p(x) || p(x)) has zero gradient at
x' = x. ``cfg.random_start`` is therefore not used: the ball geometry is ``L2Ball(eps, alpha,
random_start=False)``, which only projects, and the start is passed as ``x_init``. (The start is
projected onto the ball too, so even eps < 0.001 * sqrt(d) or zero steps return a point inside.)

Differences from the official l2 branch, on purpose: the step length is ``cfg.alpha`` (the official
branch ignores step_size and runs SGD with lr = 2 * eps / steps on a renormalised delta), the
gradient is taken with ``autograd.grad`` on the input only (the official code calls ``backward()``,
which also fills parameter gradients) and the clean branch is detached (the official code keeps
it in the graph during the attack).
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from stir.attacks.network import attacked
from stir.attacks.pgd import _check_l2, gradients_on
from stir.config.schema import AttackConfig
from stir.descent import L2Ball, descend
from stir.models import frozen

TRADES_START_STD = 0.001  # std of the Gaussian start around x (official TRADES code)


def kl_per_example(logits_p: Tensor, logits_q: Tensor) -> Tensor:
    """KL(p || q) = sum_k p_k (log p_k - log q_k) per example, from logits (b, C) -> (b,)."""
    log_p = F.log_softmax(logits_p, dim=1)  # (b, C)
    log_q = F.log_softmax(logits_q, dim=1)  # (b, C)
    return F.kl_div(log_q, log_p, reduction="none", log_target=True).sum(dim=1)


def trades_l2(model: nn.Module, x: Tensor, cfg: AttackConfig, generator: Optional[torch.Generator] = None) -> Tensor:
    """x_adv (b, c, h, w) in [0, 1] with ||x_adv - x||_2 <= eps, raising KL(p(x) || p(x_adv)); detached.

    Eval mode (``frozen``), like PGD; ``model`` may be the network or its ``AttackNetwork`` copy.
    """
    _check_l2(cfg)
    ball = L2Ball(cfg.eps, cfg.alpha, random_start=False)
    with frozen(model), gradients_on():
        x = x.detach().clone()  # a normal tensor even if the batch was made in inference mode
        f = attacked(model)  # inputs in the model's memory format (an AttackNetwork copy may be channels-last)
        with torch.no_grad():
            logits_clean = f(x)  # (b, C), a constant of the attack

        def objective(x_adv: Tensor, index: Tensor) -> Tensor:  # (b_active, ...) -> (b_active,)
            return -kl_per_example(logits_clean[index], f(x_adv))

        result = descend(objective, x, ball, cfg.steps, x_init=_trades_start(x, cfg.eps, generator))
    return result.x.detach()


def _trades_start(x: Tensor, eps: float, generator: Optional[torch.Generator]) -> Tensor:
    """x + 0.001 * N(0, I), projected onto the eps ball and the image box [0, 1]."""
    noise = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
    delta = TRADES_START_STD * noise
    norm = delta.flatten(1).norm(dim=1).view(-1, *([1] * (x.dim() - 1)))  # (b, 1, 1, 1)
    delta = delta * (eps / norm.clamp_min(1e-12)).clamp(max=1.0)
    return (x + delta).clamp(0, 1)
