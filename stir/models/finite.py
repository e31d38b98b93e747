"""Is a model finite? Its weights and buffers, and its outputs on a probe batch.

One NaN in one convolution weight makes every representation NaN, and an argmax of NaN logits is
still a class: agreement, difficulty and the early steps of an inversion then give numbers that
look like measurements. Every model is therefore checked when it is loaded (``stir.zoo``) and
before it is measured (``stir.measure``); these functions say what is wrong, in one line, naming
the first tensor that is not finite.
"""
from __future__ import annotations

import itertools
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from stir.models.modes import frozen

PROBE_SHAPE = (4, 3, 32, 32)  # the probe batch when no images are at hand: 4 CIFAR-sized images


def first_nonfinite_tensor(module: nn.Module) -> Optional[str]:
    """'parameter layer1.0.conv1.weight (16, 16, 3, 3): 1 NaN, 0 Inf of 2304' for the first
    floating-point parameter or buffer (in ``named_parameters``, then ``named_buffers`` order) that
    holds a NaN or an infinity; None when all are finite."""
    named = itertools.chain((("parameter", n, t) for n, t in module.named_parameters()),
                            (("buffer", n, t) for n, t in module.named_buffers()))
    for kind, name, tensor in named:
        if not (tensor.is_floating_point() or tensor.is_complex()):
            continue
        finite = torch.isfinite(tensor)
        if not bool(finite.all()):
            return f"{kind} {name} {tuple(tensor.shape)}: {_counts(tensor, finite)}"
    return None


def nonfinite_outputs(module: nn.Module, images: Tensor) -> Optional[str]:
    """'its outputs on a probe batch of 4 images: 40 NaN, 0 Inf of 40' when ``module(images)`` is
    not finite (run in eval mode without gradient, every flag restored); None when it is."""
    with frozen(module), torch.no_grad():
        out = module(images)
    if not isinstance(out, Tensor):
        return None  # not logits: the tap reader says what it needs
    finite = torch.isfinite(out)
    if bool(finite.all()):
        return None
    return f"its outputs on a probe batch of {images.shape[0]} images: {_counts(out, finite)}"


def probe_images(device: torch.device, shape: Tuple[int, ...] = PROBE_SHAPE, seed: int = 0) -> Tensor:
    """A fixed batch of uniform [0, 1] images (seeded, the global RNG untouched)."""
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g).to(device)


def nonfinite_taps(module: nn.Module, images: Tensor, taps: Sequence[str]) -> Optional[str]:
    """'its tap 'penultimate' on a probe batch of 4 images: 16 NaN, 0 Inf of 32' for the first of
    ``taps`` (those the model has) whose reading is not finite though the logits may be; else None."""
    from stir.models.taps import LOGITS, read_taps, split_reduction, tap_point

    for tap in taps:
        name = split_reduction(tap)[0]
        if name == LOGITS:
            continue
        try:
            tap_point(module, name)
        except ValueError:
            continue  # not a tap of this model: the measurement names it
        with frozen(module), torch.no_grad():
            value = read_taps(module, images, [name])[name]
        finite = torch.isfinite(value)
        if not bool(finite.all()):
            return f"its tap {name!r} on a probe batch of {images.shape[0]} images: {_counts(value, finite)}"
    return None


def nonfinite_reason(module: nn.Module, images: Optional[Tensor] = None, taps: Sequence[str] = ()) -> Optional[str]:
    """Why ``module`` is not finite (its first non-finite tensor, else its outputs on ``images``, else
    its reading at one of ``taps``: finite logits over a NaN penultimate tap are no measurement), or None.

    A model that cannot take ``images`` (another input size) is judged by its tensors alone.
    """
    reason = first_nonfinite_tensor(module)
    if reason is not None or images is None:
        return reason
    try:
        return nonfinite_outputs(module, images) or (nonfinite_taps(module, images, taps) if taps else None)
    except (RuntimeError, ValueError):  # another input shape, a tap it cannot give: the measurement's checks say so
        return None


def _counts(tensor: Tensor, finite: Tensor) -> str:
    nan = int(torch.isnan(tensor).sum())
    return f"{nan} NaN, {int((~finite).sum()) - nan} Inf of {tensor.numel()}"
