"""RSM norm difference: the norm of the difference of the two Euclidean distance matrices.

ReSi's RSMNormDifference (mklabunde/resi @ 24ab9e5, repsim/measures/rsm_norm_difference.py);
Klabunde, Schumacher, Strohmaier & Lemmerich (ACM Computing Surveys 2025, "Similarity of
neural network models: a survey of functional and representational measures", RSM norm
difference).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import check_pair
from ._linalg import F64, centred
from .distance_correlation import pairwise_distance_rows
from .spec import INF, NO_SCALE, RESI, measure

__all__ = ["rsm_norm_difference"]

# Elements of one (rows, n) block of a distance matrix (32 MiB in float64).
_BLOCK_ELEMS = 1 << 22
_NORMS = ("frobenius", "spectral")


@measure(family="rsm", symmetric=True, distance=True, range=(0, INF), identity=0.0, invariances=NO_SCALE,
         reference=RESI, metric=True, judging_default=False)
def rsm_norm_difference(x: Tensor, y: Tensor, *, norm: str = "frobenius") -> Tensor:
    r"""Norm of the difference of the representational similarity matrices (Euclidean distances).

    With D_ij = ||x_i - x_j||, E_ij = ||y_i - y_j|| (n, n)::

        frobenius: ||D - E||_F = sqrt( sum_ij (D_ij - E_ij)^2 )        (the survey's definition)
        spectral:  ||D - E||_2 = max |lambda(D - E)|                  (largest singular value)

    ``norm="spectral"`` is ReSi's value, the value of the id
    ``measure/resi/rsm_norm_difference``: its ``rsm_norm_diff``
    (repsim/measures/rsm_norm_difference.py, return line) calls
    ``np.linalg.norm(S - Sp, ord=2)`` on the square matrices of
    ``sklearn.metrics.pairwise_distances``, which for a matrix is the spectral norm
    (its comment reads the distances as the condensed vector of ``pdist``, on which
    ord=2 would be the Euclidean norm, ||D - E||_F / sqrt(2)).

    The distances come from the Gram matrix of the centred rows (translation leaves
    them as they are). Frobenius: accumulated over blocks of rows, memory O(n + block);
    spectral: one n x n symmetric eigendecomposition, O(n^3) time, O(n^2) memory.

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, translations, permutations. Not to scaling.
    Range [0, inf); 0 for identical representations. A metric. Symmetric. Lower is more similar.
    """
    measure = "rsm_norm_difference"
    check_pair(x, y, measure=measure)
    if norm not in _NORMS:
        raise ValueError(f"{measure}: norm must be 'frobenius' or 'spectral' (ReSi's), got {norm!r}")
    n = x.shape[0]
    xc, yc = centred(x), centred(y)  # (n, d1), (n, d2) float64
    qx, qy = xc.square().sum(dim=1), yc.square().sum(dim=1)  # (n,) squared row norms
    if norm == "spectral":
        rows = slice(0, n)
        diff = pairwise_distance_rows(xc, qx, rows) - pairwise_distance_rows(yc, qy, rows)  # (n, n)
        return torch.linalg.eigvalsh((diff + diff.T) / 2).abs().max()
    total = torch.zeros((), dtype=F64, device=x.device)
    step = max(1, _BLOCK_ELEMS // n)
    for start in range(0, n, step):
        rows = slice(start, min(n, start + step))
        total += (pairwise_distance_rows(xc, qx, rows) - pairwise_distance_rows(yc, qy, rows)).square().sum()
    return total.sqrt()
