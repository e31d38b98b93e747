"""The measuring primitives: representations and predictions of a model on images, a measure's
value with its undefined cases, and early checks that a model can take the images at its tap."""
from __future__ import annotations

import itertools
import math
from typing import List, Sequence, Tuple

import torch
from torch import Tensor, nn

from stir import similarity
from stir.models import frozen
from stir.models.probe import check_deterministic, check_gradient_path, two_passes
from stir.models.taps import LOGITS, collect, representation


def measure_value(fn, x: Tensor, y: Tensor, measure: str, label: str, notes: List[str]) -> float:
    """fn(x, y) for x (n, d1), y (n, d2) as a float; NaN + a note when undefined on this data.

    Identical inputs give the measure's identity value exactly (1; 0 for a distance) instead of
    1 - 1e-16: rounding in the normalisation would otherwise make "a model with itself" inexact.
    """
    try:
        value = float(fn(x, y))
    except ValueError as err:  # constant representation, NaN/Inf, too few samples: undefined here
        notes.append(f"{label}: {measure} undefined ({err})")
        return math.nan
    if not math.isfinite(value):
        notes.append(f"{label}: {measure} returned {value}")
        return math.nan
    if x.shape == y.shape and torch.equal(x, y):
        return 0.0 if similarity.is_distance(measure) else 1.0
    return value


def observe(model: nn.Module, x: Tensor, tap: str, batch_size: int) -> Tuple[Tensor, Tensor]:
    """The representation at ``tap`` (n, d) and the predicted class argmax of the output (n,).

    One forward pass per chunk of ``batch_size`` images reads both (``stir.models.taps.collect``),
    without gradient, the model frozen in eval mode.
    """
    out = collect(model, x, [tap, LOGITS], batch_size)
    return out[tap], out[LOGITS].flatten(1).argmax(dim=1)


def check_models(images: Tensor, models: List[Tuple[str, nn.Module, str]], differentiated: Sequence[str] = ()) -> None:
    """Fail early and clearly, in one line, before any measurement: each model must live on the
    images' device, know its tap, take one image of this shape (an unknown tap raises stir.models'
    ValueError listing the valid taps; a size the network asserts is named), give one row per image
    at its tap and be a deterministic function of its input in eval mode (``stir.models.probe``);
    the models named in ``differentiated`` (those an inversion descends on) must pass a gradient
    from their tap to the input."""
    one = images[:1].detach()
    for name, model, tap in models:
        device = next((t.device for t in itertools.chain(model.parameters(), model.buffers())), None)
        if device is not None and device != images.device:
            raise ValueError(f"model {name!r} is on {device} but the images are on {images.device}; move it there")
        with frozen(model), torch.no_grad():
            try:  # the second pass: is the model a function of its input (no dropout left on)?
                first, second = two_passes(lambda: observe(model, one, tap, 1)[0], one.device)
            except (RuntimeError, AssertionError, IndexError, TypeError) as err:  # shapes, dtypes, the network's own asserts
                said = (str(err).strip().splitlines() or [""])[0]
                raise ValueError(
                    f"model {name!r} cannot take images of shape {tuple(images.shape[1:])} "
                    f"(dtype {images.dtype}): {type(err).__name__}{': ' + said if said else ''}"
                ) from err
            check_deterministic(first, second, name, 1)
        if name in differentiated:
            with frozen(model):
                check_gradient_path(model, one, tap, name, representation)
