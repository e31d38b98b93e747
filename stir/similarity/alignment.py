"""Uncentred alignment measures: orthogonal and permutation Procrustes, and the aligned cosine similarity.

Unlike :mod:`.procrustes`, :mod:`.bures` and :mod:`.shape_metrics`, nothing is
centred: the representations are compared as they are, as ReSi's
``orthogonal_procrustes``, ``permutation_procrustes``, ``orthogonal_angular_shape_metric``,
``permutation_angular_shape_metric`` and ``aligned_cossim`` do (mklabunde/resi @ 24ab9e5,
repsim/measures/procrustes.py), so none is invariant to translations. Unequal widths:
the narrower side is zero-padded (ReSi's ``adjust_dimensionality``), which leaves every
value here as it is without padding. Shared: x (n, d1), y (n, d2), n >= 2; computed in float64.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import Tensor

from ._checks import check_pair
from ._linalg import F64
from .shape_metrics import _check_distance, _finish  # the shape metrics' own: one check, one finish
from .spec import INF, RESI, declare, measure

__all__ = ["aligned_cosine", "permutation_procrustes", "uncentred_procrustes"]


@measure(family="procrustes", symmetric=True, distance=True, range=(0, INF), identity=0.0,
         invariances={"orthogonal", "permutation"}, reference=RESI, metric=True, judging_default=False)
def uncentred_procrustes(x: Tensor, y: Tensor, *, distance: str = "euclidean") -> Tensor:
    r"""Orthogonal Procrustes distance of the uncentred, unscaled representations.

    ::

        euclidean: d(X, Y) = min_Q ||X Q - Y||_F = sqrt( ||X||_F^2 + ||Y||_F^2 - 2 ||X^T Y||_* )
        angular:   theta(X, Y) = arccos( ||X^T Y||_* / (||X||_F ||Y||_F) )

    Q orthogonal (narrower side zero-padded). ReSi's ``orthogonal_procrustes`` (euclidean;
    Ding et al. 2021 without the centring and scaling) and ``orthogonal_angular_shape_metric``
    (angular; Williams et al. 2021 without the centring); the centred forms are
    :func:`~stir.similarity.bures_distance` and :func:`~stir.similarity.procrustes_angular`.

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor. Cost O(n d1 d2 + SVD of d1 x d2).
    Invariant to: orthogonal transforms, permutations; the angular form also to isotropic
    scaling. Not to translations.
    Range: euclidean [0, inf), angular [0, pi/2] (the nuclear norm is >= 0); 0 for identical
    representations. A metric. Symmetric. Lower is more similar.
    """
    measure = "uncentred_procrustes"
    check_pair(x, y, measure=measure)
    _check_distance(distance, measure)
    a, b = x.to(F64), y.to(F64)
    nuc = torch.linalg.svdvals(a.T @ b).sum()
    return _finish(nuc, a.square().sum(), b.square().sum(), distance)


declare("uncentred_procrustes_angular", uncentred_procrustes, options={"distance": "angular"},
        family="procrustes", symmetric=True, distance=True, range=(0, math.pi / 2), identity=0.0,
        invariances={"orthogonal", "permutation", "isotropic_scaling"}, reference=RESI, metric=True,
        judging_default=False)


@measure(family="procrustes", symmetric=True, distance=True, range=(0, INF), identity=0.0,
         invariances={"permutation"}, reference=RESI, metric=True, assignment=True, judging_default=False)
def permutation_procrustes(x: Tensor, y: Tensor, *, distance: str = "euclidean") -> Tensor:
    r"""Permutation Procrustes distance of the uncentred representations (ReSi's PermutationProcrustes).

    The best one-to-one matching of neurons P (Hungarian algorithm on X^T Y,
    ``scipy.optimize.linear_sum_assignment``, on the CPU; narrower side zero-padded)::

        s = max_P tr(X^T Y P)
        euclidean: min_P ||X - Y P||_F = sqrt( ||X||_F^2 + ||Y||_F^2 - 2 s )
        angular:   arccos( s / (||X||_F ||Y||_F) )

    ReSi's ``permutation_procrustes`` (euclidean) and ``permutation_angular_shape_metric``
    (angular, normalising each side to unit Frobenius norm first). The centred form is
    :func:`~stir.similarity.permutation_metric` (netrep's PermutationMetric).

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor. Cost O(n d1 d2 + d^3).
    Invariant to: permutations of neurons; the angular form also to isotropic scaling.
    Not to rotations or translations.
    Range: euclidean [0, inf), angular [0, pi]; 0 for identical representations.
    A metric. Symmetric. Lower is more similar.
    """
    measure = "permutation_procrustes"
    check_pair(x, y, measure=measure)
    _check_distance(distance, measure)
    a, b = x.to(F64), y.to(F64)
    c = a.T @ b  # (d1, d2); the zero padding adds zero rows or columns, which change no matching's sum
    rows, cols = linear_sum_assignment(c.detach().cpu().numpy(), maximize=True)  # min(d1, d2) pairs
    index = (torch.as_tensor(np.asarray(rows), device=c.device), torch.as_tensor(np.asarray(cols), device=c.device))
    return _finish(c[index].sum(), a.square().sum(), b.square().sum(), distance)


declare("permutation_procrustes_angular", permutation_procrustes, options={"distance": "angular"},
        family="procrustes", symmetric=True, distance=True, range=(0, math.pi), identity=0.0,
        invariances={"permutation", "isotropic_scaling"}, reference=RESI, metric=True, assignment=True,
        judging_default=False)


@measure(family="procrustes", symmetric=True, distance=False, range=(-1, 1), identity=1.0,
         invariances={"orthogonal", "isotropic_scaling", "permutation"}, reference=RESI, judging_default=False)
def aligned_cosine(x: Tensor, y: Tensor) -> Tensor:
    r"""Aligned cosine similarity (ReSi's AlignedCosineSimilarity; Hamilton, Leskovec & Jurafsky 2016).

    x is rotated onto y by the uncentred orthogonal Procrustes solution, then the rows
    are compared by their cosine and averaged::

        Q* = argmin_Q ||X Q - Y||_F = U V^T,   U S V^T = X^T Y  (narrower side zero-padded)
        ACS(X, Y) = (1/|I|) sum_{i in I} <(X Q*)_i, y_i> / (||x_i|| ||y_i||)

    with I the samples whose row is non-zero on both sides (ReSi leaves the others out with
    a warning; here silently); ValueError when I is empty. Where X^T Y has rank below
    min(d1, d2) (e.g. n < d), Q* is not unique and the value depends on the SVD's choice,
    as in ReSi (mklabunde/resi @ 24ab9e5, repsim/measures/procrustes.py ``aligned_cossim``,
    which calls ``scipy.linalg.orthogonal_procrustes``).

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor. Cost O(n d^2 + SVD of d x d),
    d = max(d1, d2).
    Invariant to: orthogonal transforms, isotropic scaling (c > 0: Q* and every cosine are
    unchanged; ReSi's class flags it as not invariant), permutations. Not to translations.
    Range [-1, 1]; 1 for identical representations. Symmetric (Q* of (y, x) is Q*^T).
    """
    measure = "aligned_cosine"
    check_pair(x, y, measure=measure)
    a, b = x.to(F64), y.to(F64)
    d = max(a.shape[1], b.shape[1])
    a = torch.nn.functional.pad(a, (0, d - a.shape[1]))  # (n, d) zero-padded
    b = torch.nn.functional.pad(b, (0, d - b.shape[1]))
    u, _, vh = torch.linalg.svd(a.T @ b)  # (d, d) each
    rotated = a @ (u @ vh)  # (n, d)
    na, nb = torch.linalg.vector_norm(rotated, dim=1), torch.linalg.vector_norm(b, dim=1)  # (n,)
    keep = (torch.linalg.vector_norm(a, dim=1) > 0) & (nb > 0)
    if not bool(keep.any()):
        raise ValueError(f"{measure}: every sample has an all-zero row in x or y, so no cosine is defined")
    cos = (rotated[keep] * b[keep]).sum(dim=1) / (na[keep] * nb[keep])
    return cos.mean()
