"""PGD in the l2 ball with cross-entropy (Madry et al. 2018), on the one descent loop ``stir.descent``.

    x_0 = x + delta,  delta uniform direction, radius U(0, 1) * eps   (random start, optional)
    x_{t+1} = clip_[0,1]( Proj_{||. - x||_2 <= eps}( x_t + alpha * g_t / (||g_t||_2 + 1e-10) ) ),
    g_t = d CE(f(x_t), y) / d x_t  (the batch's mean cross-entropy, per-example normalised)

run as ``descend`` minimising -CE_i / b per example (their sum is minus the mean CE) under
``L2Ball(eps, alpha, random_start, norm_offset=1e-10)``, the last iterate kept. This is torchattacks'
``PGDL2`` (3.5) step for step, bit for bit: the same random start drawn in the same order, the same
gradient (negated exactly), the same normalisation offset, projection and clip.
tests/training/test_attacks.py keeps torchattacks as the oracle; ``torchattacks_pgd_l2`` builds it.

The attack measures the model as it is used: inside ``stir.models.frozen`` (every module in eval
mode, no parameter requiring grad), so batch-norm running statistics, per-module modes and
``requires_grad`` flags are exactly as before, and no parameter ``.grad`` is created. It switches
gradients on (also inside ``no_grad`` or ``inference_mode``, as in a Lightning validation step), on
a normal copy of the batch. ``generator``: the random start is drawn from a generator seeded from
it (as the global RNG was seeded for torchattacks before), so attacks are reproducible whatever
else drew from the RNGs; without it, from the device's global RNG.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Optional

import torch
import torch.nn.functional as F
import torchattacks
from torch import Tensor, nn

from stir.attacks.network import attacked
from stir.config.schema import AttackConfig
from stir.descent import L2Ball, descend
from stir.models import frozen

TORCHATTACKS_EPS = 1e-10  # torchattacks' eps_for_division: added to every gradient norm


def _check_l2(cfg: AttackConfig) -> None:
    if cfg.norm != "l2":
        raise ValueError(f"only l2 attacks are implemented, got attack.norm={cfg.norm!r}")


def torchattacks_pgd_l2(model: nn.Module, cfg: AttackConfig, device: torch.device) -> torchattacks.PGDL2:
    """The torchattacks PGDL2 object for ``cfg`` on ``device``: the oracle the tests hold ``pgd_l2`` to."""
    attack = torchattacks.PGDL2(model, eps=cfg.eps, alpha=cfg.alpha, steps=cfg.steps, random_start=cfg.random_start)
    attack.set_device(device)
    return attack


def pgd_l2(
    model: nn.Module, x: Tensor, y: Tensor, cfg: AttackConfig, generator: Optional[torch.Generator] = None
) -> Tensor:
    """x_adv (b, c, h, w) in [0, 1] with ||x_adv - x||_2 <= eps, raising CE(f(x_adv), y); detached.

    ``model`` may be the network or its ``AttackNetwork`` copy (same eval-mode function up to
    rounding), fed in its own memory format (``attacked``); x_adv comes back in ``x``'s format.
    """
    _check_l2(cfg)
    layout = torch.channels_last if _is_channels_last(x) else torch.contiguous_format
    ball = L2Ball(cfg.eps, cfg.alpha, cfg.random_start, norm_offset=TORCHATTACKS_EPS)
    with frozen(model), gradients_on():
        x = x.detach().clone(memory_format=torch.contiguous_format)  # a normal tensor, standard layout
        y = y.detach()
        f = attacked(model)
        batch = x.shape[0]

        def objective(x_adv: Tensor, index: Tensor) -> Tensor:  # (b, ...) -> (b,): -CE_i / b, summed: -mean CE
            return -F.cross_entropy(f(x_adv), y[index], reduction="none") / batch

        result = descend(objective, x, ball, cfg.steps, generator=_start_generator(generator, x.device),
                         final_evaluation=False)
    return result.x.detach().contiguous(memory_format=layout)


def _start_generator(generator: Optional[torch.Generator], device: torch.device) -> Optional[torch.Generator]:
    """A generator on ``device`` seeded from ``generator`` (None: the device's global RNG draws)."""
    if generator is None:
        return None
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device))
    return torch.Generator(device=device).manual_seed(seed)


def _is_channels_last(x: Tensor) -> bool:
    return x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()


def robust_accuracy(
    model: nn.Module, x: Tensor, y: Tensor, cfg: AttackConfig, generator: Optional[torch.Generator] = None,
    attack_model: Optional[nn.Module] = None,
) -> Tensor:
    """Fraction (0-dim float tensor) of ``x`` still classified as ``y`` after ``pgd_l2``, in eval mode.

    The attack runs on ``attack_model`` when given (``AttackNetwork``'s copy of ``model``); the
    adversarial images are always classified by ``model`` itself.
    """
    x_adv = pgd_l2(attack_model if attack_model is not None else model, x, y, cfg, generator=generator)
    with frozen(model), torch.no_grad():
        predicted = model(x_adv).argmax(dim=1)  # (b,)
    return (predicted == y).to(x.dtype).mean()


@contextmanager
def gradients_on() -> Iterator[None]:
    """Autograd on within the block, even under ``no_grad`` or ``inference_mode`` outside it.

    Tensors made in inference mode must be cloned inside the block before autograd can use them.
    """
    with torch.inference_mode(False), torch.enable_grad():
        yield
