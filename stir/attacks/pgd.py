"""PGD in the l2 ball with cross-entropy (Madry et al. 2018), through torchattacks' ``PGDL2``.

    x_0 = x + delta,  delta uniform direction, radius U(0, 1) * eps   (random start, optional)
    x_{t+1} = clip_[0,1]( Proj_{||. - x||_2 <= eps}( x_t + alpha * g_t / ||g_t||_2 ) ),
    g_t = d CE(f(x_t), y) / d x_t

The attack measures the model as it is used: inside ``stir.models.frozen`` (every module in eval
mode, no parameter requiring grad), so batch-norm running statistics, per-module modes and
``requires_grad`` flags are exactly as before, and no parameter ``.grad`` is created.

torchattacks facts this wrapper relies on (torchattacks 3.5):
  * the attack object fixes its device at construction (from the model's parameters); it is built
    per call (cheap: no tensors) and pointed at the batch's device with ``set_device``;
  * its own default step is alpha=0.2; ``cfg.alpha`` (2.5 * eps / steps unless given) is passed;
  * ``set_normalization_used`` is never called: our networks normalise inside and take [0, 1];
  * it calls ``model.eval()`` and, if the model was in train mode, ``model.train()`` afterwards,
    which would flatten per-module modes; it gets the model wrapped in ``attacked`` (whose own
    ``training`` flag is always False) inside ``frozen``, so it never calls ``train()``, and
    ``frozen`` restores every flag exactly;
  * it ``.view``-s the input gradient and its random start: both must be in the standard memory
    format (a channels-last batch, as on CUDA, made it raise); ``attacked`` returns the gradient
    contiguous and the batch is handed over contiguous;
  * it needs autograd on the input: the attack switches gradients on (also inside ``no_grad`` or
    ``inference_mode``, as in a Lightning validation step), on a normal copy of the batch;
  * its random start draws from the global RNG of the batch's device; with ``generator`` that RNG
    is seeded from the generator for the call and restored afterwards.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Optional

import torch
import torchattacks
from torch import Tensor, nn

from stir.attacks.network import attacked
from stir.config.schema import AttackConfig
from stir.models import frozen


def _check_l2(cfg: AttackConfig) -> None:
    if cfg.norm != "l2":
        raise ValueError(f"only l2 attacks are implemented, got attack.norm={cfg.norm!r}")


def torchattacks_pgd_l2(model: nn.Module, cfg: AttackConfig, device: torch.device) -> torchattacks.PGDL2:
    """The torchattacks PGDL2 object for ``cfg`` on ``device`` (built per call; holds no tensors)."""
    attack = torchattacks.PGDL2(model, eps=cfg.eps, alpha=cfg.alpha, steps=cfg.steps, random_start=cfg.random_start)
    attack.set_device(device)
    return attack


def pgd_l2(
    model: nn.Module, x: Tensor, y: Tensor, cfg: AttackConfig, generator: Optional[torch.Generator] = None
) -> Tensor:
    """x_adv (b, c, h, w) in [0, 1] with ||x_adv - x||_2 <= eps, raising CE(f(x_adv), y); detached.

    ``model`` may be the network or its ``AttackNetwork`` copy (same eval-mode function up to
    rounding). torchattacks gets ``x`` in the standard memory format (its random start then draws
    the same numbers whatever the layout of ``x``, and it ``.view``-s tensors) and the model through
    ``attacked``, which feeds it its own memory format; x_adv comes back in ``x``'s format.
    """
    _check_l2(cfg)
    layout = torch.channels_last if _is_channels_last(x) else torch.contiguous_format
    with frozen(model), gradients_on(), _global_rng_from(generator, x.device):
        attack = torchattacks_pgd_l2(attacked(model), cfg, x.device)
        x_adv = attack(x.detach().clone(memory_format=torch.contiguous_format), y.detach().clone())  # (b, c, h, w)
    return x_adv.detach().contiguous(memory_format=layout)


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


def _default_generator(device: torch.device) -> torch.Generator:
    """The global generator that ``torch.*_like(...).normal_()`` uses for tensors on ``device``."""
    if device.type == "cpu":
        return torch.default_generator
    module = torch.get_device_module(device.type)
    index = device.index if device.index is not None else module.current_device()
    return module.default_generators[index]


@contextmanager
def _global_rng_from(generator: Optional[torch.Generator], device: torch.device) -> Iterator[None]:
    """Within the block the global RNG of ``device`` is seeded from ``generator``, then restored.

    No generator: the global RNG is used as it is (seeded by the caller, e.g. seed_everything).
    """
    if generator is None:
        yield
        return
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device))
    target = _default_generator(device)
    state = target.get_state()
    target.manual_seed(seed)
    try:
        yield
    finally:
        target.set_state(state)
