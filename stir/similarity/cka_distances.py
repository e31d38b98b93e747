"""Distance forms of linear CKA: the angle and the chord between normalised centred Gram matrices."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .cka import linear_cka_named
from .spec import NETREP, RIGID, measure

__all__ = ["cka_angular", "cka_euclidean"]


@measure(family="cka", symmetric=True, distance=True, range=(0, math.pi / 2), identity=0.0, invariances=RIGID,
         reference=NETREP, metric=True, judging_default=True)
def cka_angular(x: Tensor, y: Tensor, *, form: str = "auto") -> Tensor:
    r"""Angular CKA distance (Williams et al. 2021, netrep's ``LinearCKA``): arccos of linear CKA.

    ::

        theta(X, Y) = arccos( <K, L>_F / (||K||_F ||L||_F) ) = arccos(CKA(X, Y)),  K = Xc Xc^T, L = Yc Yc^T

    The angle between the centred Gram matrices, a metric on them. ``form`` as in
    :func:`~stir.similarity.linear_cka`.

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, isotropic scaling, translations, permutations.
    Range [0, pi/2]; 0 for identical representations. A metric. Symmetric. Lower is more similar.
    """
    return torch.arccos(linear_cka_named(x, y, form, "cka_angular").clamp(-1.0, 1.0))


@measure(family="cka", symmetric=True, distance=True, range=(0, math.sqrt(2)), identity=0.0, invariances=RIGID,
         reference="closed form sqrt(2 - 2 CKA)", metric=True, judging_default=True)
def cka_euclidean(x: Tensor, y: Tensor, *, form: str = "auto") -> Tensor:
    r"""Euclidean CKA distance: the chord between the unit-normalised centred Gram matrices.

    ::

        d(X, Y) = || K / ||K||_F - L / ||L||_F ||_F = sqrt(2 - 2 CKA(X, Y)),  K = Xc Xc^T, L = Yc Yc^T

    A metric (a Euclidean distance between points of the unit sphere), the
    chord of :func:`cka_angular`'s arc: d = 2 sin(theta / 2). No public
    implementation returns exactly this; it is checked against its closed form.

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, isotropic scaling, translations, permutations.
    Range [0, sqrt(2)]; 0 for identical representations. A metric. Symmetric. Lower is more similar.
    """
    return torch.sqrt((2.0 - 2.0 * linear_cka_named(x, y, form, "cka_euclidean")).clamp(min=0.0))
