"""Probes that tell, on a batch of one or two images and before any measurement, why a model cannot
be measured: in one line (``UnmeasurableModel``, a ValueError), not a traceback halfway through.

* ``check_deterministic``: two passes over the same images in eval mode give the same tensor. A
  dropout left on in eval mode (``F.dropout(..., training=True)``) or randomness in the forward makes
  every similarity of the model a random variable with no fixed value.
* ``check_gradient_path``: a gradient reaches the input from the tap. The inversion of IRIs descends
  on the input; a ``detach()``, a ``torch.no_grad()`` block or a non-differentiable operation in the
  forward pass leaves nothing to descend on. The message names the first module whose input carried
  a gradient and whose output did not, or the forward of the model itself.
* ``check_tap_output``: a tap gives one row per image, ``(b, ...)``; a 0-d tensor, or one whose first
  dimension is not the batch, is named with its shape.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple

import torch
from torch import Tensor, nn


class UnmeasurableModel(ValueError):
    """A model that cannot be measured as asked, and why (one line)."""


def _name(model: nn.Module) -> str:
    inner = getattr(model, "inner", None)
    return type(inner if isinstance(inner, nn.Module) else model).__name__


def check_tap_output(value: Tensor, tap: str, batch: int, model: Optional[nn.Module] = None) -> None:
    """``value`` must be (batch, ...): one row per image (0-d and batch-less outputs are named)."""
    if value.dim() == 0 or value.shape[0] != batch:
        who = f" of {_name(model)}" if model is not None else ""
        raise UnmeasurableModel(f"tap {tap!r}{who} gave a tensor of shape {tuple(value.shape)} for a batch of {batch} "
                                f"image(s); a tap must give one row per image, ({batch}, ...): choose another tap")


def two_passes(run: Callable[[], Tensor], device: torch.device) -> Tuple[Tensor, Tensor]:
    """``run()`` twice, the global random state restored after (a stochastic model draws from it; the
    probe must not move any seeded draw that follows)."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        return run(), run()


def check_deterministic(first: Tensor, second: Tensor, label: str, n: int) -> None:
    """Two eval-mode passes over the same ``n`` images (``two_passes``) gave the same tensor, within
    float rounding: otherwise the model is stochastic and its similarities have no fixed value."""
    if not (isinstance(first, Tensor) and isinstance(second, Tensor)) or first.shape != second.shape:
        return  # the output checks say what is wrong with it
    scale = float(first.abs().max()) if first.numel() else 0.0
    gap = float((first - second).abs().max()) if first.numel() else 0.0
    if gap > 1e-5 * (1.0 + scale) or gap != gap:
        raise UnmeasurableModel(
            f"model {label!r} is not deterministic in eval mode: two passes over the same {n} image(s) differ by up to "
            f"{gap:.3g} (a dropout left on, or randomness in its forward); its similarities would have no fixed "
            "value: make its forward a function of its input in eval mode")


def _cut_point(model: nn.Module, x: Tensor) -> str:
    """Where a forward pass loses the input's gradient: the first module called whose input required
    grad and whose output did not, as 'at module NAME (Class)'; 'in the forward of Class' otherwise."""
    seen: List[Tuple[str, str]] = []
    handles = []

    def hook(name: str):
        def record(module, inputs, output):
            took = any(isinstance(i, Tensor) and i.requires_grad for i in inputs)
            gave = isinstance(output, Tensor) and output.requires_grad
            if took and isinstance(output, Tensor) and not gave and name:
                seen.append((name, type(module).__name__))
        return record

    for name, module in model.named_modules():
        handles.append(module.register_forward_hook(hook(name)))
    try:
        with torch.enable_grad():
            model(x)
    except Exception:  # noqa: BLE001 - only looking: the caller's own pass reports the error
        pass
    finally:
        for h in handles:
            h.remove()
    inner = getattr(model, "inner", None)
    wrapped = next((n for n, m in model.named_modules() if m is inner), None)  # a wrapper's network: its own forward
    if seen and seen[0][0] != wrapped:
        name, cls = seen[0]
        return f"at module {name!r} ({cls})"
    return f"in the forward of {_name(model)}"


def check_gradient_path(model: nn.Module, x: Tensor, tap: str, label: str, read) -> None:
    """A gradient reaches ``x`` from the representation at ``tap`` (``read(model, x, tap)``, e.g.
    ``stir.models.taps.representation``); the model frozen (no parameter needs a gradient)."""
    probe = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        rep = read(model, probe, tap)
        if isinstance(rep, Tensor) and rep.requires_grad:
            (grad,) = torch.autograd.grad(rep.float().sum(), probe, allow_unused=True)
            if grad is not None:
                return
    raise UnmeasurableModel(
        f"model {label!r} cuts autograd {_cut_point(model, probe)}: no gradient reaches its input from tap {tap!r} "
        "(a detach(), a torch.no_grad() block or a non-differentiable operation in its forward), so its IRIs cannot be "
        "found by descent; remove it from the forward, or measure another tap")
