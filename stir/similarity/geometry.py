"""Differences of one geometric statistic of each representation (ReSi's statistics measures).

Each measure is |s(X) - s(Y)| for a scalar statistic s of one representation
(Klabunde et al., "ReSi", ICLR 2025, section 3.6; Wang & Isola 2020 for uniformity):
a pseudo-metric (symmetric, 0 for identical inputs, triangle inequality), blind to
everything but that statistic, so 0 does not mean equal representations.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ._checks import check_pair
from ._linalg import F64, column_mean, centred
from .distance_correlation import pairwise_distance_rows
from .spec import INF, NO_SCALE, RESI, ROWS, measure

__all__ = ["concentricity_difference", "magnitude_difference", "uniformity_difference"]

_BLOCK_ELEMS = 1 << 22


@measure(family="geometry", symmetric=True, distance=True, range=(0, INF), identity=0.0,
         invariances={"orthogonal", "permutation"}, reference=RESI, metric=True, judging_default=True)
def magnitude_difference(x: Tensor, y: Tensor) -> Tensor:
    r"""Difference of the norms of the mean representations (ReSi's MagnitudeDifference).

    ::

        m(X) = || (1/n) sum_i x_i ||_2,   d(X, Y) = |m(X) - m(Y)|

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, permutations. Not to scaling or translations.
    Range [0, inf); 0 for identical representations. A pseudo-metric. Symmetric. Lower is more similar.
    """
    check_pair(x, y, measure="magnitude_difference")
    return (torch.linalg.vector_norm(column_mean(x)) - torch.linalg.vector_norm(column_mean(y))).abs()


def _concentricity(z: Tensor, side: str, measure: str) -> Tensor:
    """Mean cosine similarity of the rows of z (n, d) to their mean row."""
    z = z.to(F64)
    mean = z.mean(dim=0)
    norms = torch.linalg.vector_norm(z, dim=1)  # (n,)
    if not bool(torch.linalg.vector_norm(mean) > 0):
        raise ValueError(f"{measure}: the mean row of {side} is 0, so its cosine to the rows is undefined")
    if not bool((norms > 0).all()):
        row = int((norms == 0).nonzero()[0])
        raise ValueError(f"{measure}: row {row} of {side} is all zeros, so its cosine to the mean is undefined")
    return ((z @ mean) / (norms * torch.linalg.vector_norm(mean))).mean()


@measure(family="geometry", symmetric=True, distance=True, range=(0, 2), identity=0.0, invariances=ROWS,
         reference=RESI, metric=True, judging_default=True)
def concentricity_difference(x: Tensor, y: Tensor) -> Tensor:
    r"""Difference of the mean cosine similarity to the mean row (ReSi's ConcentricityDifference).

    ::

        c(X) = (1/n) sum_i cos(x_i, mean_j x_j),   d(X, Y) = |c(X) - c(Y)|

    Raises ValueError if a row or the mean row of either side is zero (cosine undefined).
    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, isotropic scaling, permutations. Not to translations.
    Range [0, 2]; 0 for identical representations. A pseudo-metric. Symmetric. Lower is more similar.
    """
    measure = "concentricity_difference"
    check_pair(x, y, measure=measure)
    return (_concentricity(x, "x", measure) - _concentricity(y, "y", measure)).abs()


def _uniformity(z: Tensor, t: float) -> Tensor:
    """log( (1/n^2) sum_ij exp(-t ||z_i - z_j||^2) ), summed over blocks of rows.

    No log-sum-exp needed: the n terms i = j are exp(0) = 1, so the sum is >= n and
    the terms that underflow (< 1e-308) change it by less than rounding.
    """
    n = z.shape[0]
    zc = centred(z)  # distances are translation invariant; centring keeps them accurate
    sq = zc.square().sum(dim=1)
    step = max(1, _BLOCK_ELEMS // n)
    total = sum(
        pairwise_distance_rows(zc, sq, slice(s, min(n, s + step)), squared=True).mul_(-t).exp_().sum()
        for s in range(0, n, step)
    )
    return torch.log(total) - 2.0 * math.log(n)


@measure(family="geometry", symmetric=True, distance=True, range=(0, INF), identity=0.0, invariances=NO_SCALE,
         reference=RESI, metric=True, judging_default=True)
def uniformity_difference(x: Tensor, y: Tensor, *, t: float = 2.0) -> Tensor:
    r"""Difference of the uniformity (Wang & Isola, ICML 2020, eq. 2; ReSi's UniformityDifference).

    ::

        u(X) = log( (1/n^2) sum_{i, j} exp(-t ||x_i - x_j||^2) ),   d(X, Y) = |u(X) - u(Y)|

    over all ordered pairs including i = j, as ReSi (on the raw representations;
    Wang & Isola apply it to unit-norm features, where it is informative: on
    features of large norm every i != j term underflows and u = -log n).
    The n x n matrix is never held (a sum over blocks of rows).

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor. Time O(n^2 (d1 + d2)).
    Invariant to: orthogonal transforms, translations, permutations. Not to scaling.
    Range [0, log n]; 0 for identical representations. A pseudo-metric. Symmetric. Lower is more similar.
    """
    measure = "uniformity_difference"
    check_pair(x, y, measure=measure)
    if not t > 0:
        raise ValueError(f"{measure}: t must be > 0, got {t}")
    return (_uniformity(x, t) - _uniformity(y, t)).abs()
