"""Input validation shared by every similarity measure.

One helper, :func:`check_pair`, is called first by every measure (and by
``MinibatchCKA.update``) so that bad input fails the same way everywhere: a
``ValueError`` (``TypeError`` for a non-tensor) whose message names the problem
and the fix.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["check_pair"]


def _first_bad_index(t: Tensor) -> tuple[int, int]:
    # Only called on failure, so the O(n d) nonzero() is not on the hot path.
    row, col = (~torch.isfinite(t)).nonzero()[0].tolist()
    return row, col


def _check_one(t: object, side: str, measure: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{measure}: {side} must be a torch.Tensor of shape (n, d), got {type(t).__name__}")
    if t.ndim != 2:
        raise ValueError(
            f"{measure}: {side} must be 2-D (n samples, d features), got shape {tuple(t.shape)}; "
            f"flatten per-sample features first, e.g. {side}.flatten(1)"
        )
    if not t.dtype.is_floating_point:
        raise ValueError(f"{measure}: {side} has dtype {t.dtype}; pass a floating-point tensor (e.g. {side}.float())")
    if t.shape[1] == 0:
        raise ValueError(f"{measure}: {side} has no features (shape {tuple(t.shape)}); need d >= 1")
    # One reduction without a copy: NaN/Inf propagate into the sum. A sum that overflowed
    # from large finite values is re-checked element-wise.
    if not bool(torch.isfinite(t.sum())) and not bool(torch.isfinite(t).all()):
        row, col = _first_bad_index(t)
        raise ValueError(
            f"{measure}: {side} contains NaN or Inf (first at row {row}, column {col}); "
            "similarity is undefined for non-finite representations"
        )
    return t


def check_pair(
    x: Tensor,
    y: Tensor,
    *,
    measure: str,
    min_n: int = 2,
    allow_constant: bool = False,
) -> None:
    """Validate two paired representations ``x`` (n, d1) and ``y`` (n, d2).

    Raises ``ValueError`` naming the problem when: either input is not 2-D or
    not floating point, has no features, contains NaN/Inf, the two sides have a
    different number of rows or live on different devices, there are fewer than
    ``min_n`` rows, or (unless ``allow_constant``) a side is constant, i.e. all
    of its rows are identical, so it has zero variance after centring.

    The constant check compares rows exactly rather than thresholding a
    variance: identical rows give a centred matrix of pure rounding noise
    (~1e-17), on which any normalised measure would return garbage.
    """
    _check_one(x, "x", measure)
    _check_one(y, "y", measure)
    if x.device != y.device:
        raise ValueError(
            f"{measure}: x is on {x.device} but y is on {y.device}; move both to the same device"
        )
    n, m = x.shape[0], y.shape[0]
    if n != m:
        raise ValueError(
            f"{measure}: x has {n} rows but y has {m}: representations must be paired row by row "
            "(same n inputs, same order)"
        )
    if n < min_n:
        raise ValueError(f"{measure} needs at least {min_n} samples, got {n}")
    if not allow_constant:
        for side, t in (("x", x), ("y", y)):
            if torch.equal(t, t[:1].expand_as(t)):  # stops at the first differing element
                raise ValueError(
                    f"{measure}: {side} is constant (every row identical, zero variance after centring): "
                    "similarity is undefined"
                )
