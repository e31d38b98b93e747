"""Distance correlation (Szekely, Rizzo & Bakirov, Annals of Statistics 2007)."""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import check_pair
from ._linalg import F64, centred
from .spec import RESI, RIGID, measure

__all__ = ["distance_correlation", "pairwise_distance_rows"]

# Elements of one (rows, n) block of a distance matrix (32 MiB in float64).
_BLOCK_ELEMS = 1 << 22


def pairwise_distance_rows(z: Tensor, sq: Tensor, rows: slice, squared: bool = False) -> Tensor:
    """Euclidean distances (b, n) from rows ``rows`` of z (n, d) float64 to every row.

    From the Gram block: ||z_i - z_j||^2 = |z_i|^2 + |z_j|^2 - 2 z_i . z_j, clamped at 0,
    with the self distances set to exactly 0. ``sq`` (n,) holds the squared row norms.
    """
    g = z[rows] @ z.T  # (b, n)
    d2 = (sq[rows, None] + sq[None, :] - 2.0 * g).clamp_(min=0.0)
    idx = torch.arange(rows.start, rows.start + d2.shape[0], device=z.device)
    d2[torch.arange(d2.shape[0], device=z.device), idx] = 0.0
    return d2 if squared else d2.sqrt_()


@measure(family="dependence", symmetric=True, distance=False, range=(0, 1), identity=1.0, invariances=RIGID,
         reference=f"dcor 0.7, {RESI}", judging_default=True)
def distance_correlation(x: Tensor, y: Tensor) -> Tensor:
    r"""Distance correlation dCor (Szekely et al. 2007, definition 4; the V-statistic).

    With D_ij = ||x_i - x_j||, E_ij = ||y_i - y_j|| (n, n) and H = I - 11^T / n::

        dCov^2(X, Y) = <HDH, HEH>_F / n^2,   dCor(X, Y) = sqrt( dCov^2(X, Y) / sqrt(dCov^2(X, X) dCov^2(Y, Y)) )

    as ``dcor.distance_correlation`` and ReSi's DistanceCorrelation. The n x n
    distance matrices are never held: with r = D 1, s = E 1,
    <HDH, HEH> = <D, E> - 2/n r.s + (1^T D 1)(1^T E 1) / n^2, accumulated over blocks
    of rows. The rows are centred first (distances are translation invariant;
    centring keeps the Gram-based distances accurate).

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor. Time O(n^2 (d1 + d2)), memory O(n + block).
    Invariant to: orthogonal transforms, isotropic scaling, translations, permutations.
    Range [0, 1]; 1 for identical representations. Symmetric.
    """
    check_pair(x, y, measure="distance_correlation")
    n = x.shape[0]
    xc, yc = centred(x), centred(y)  # (n, d1), (n, d2) float64
    qx, qy = xc.square().sum(dim=1), yc.square().sum(dim=1)  # (n,) squared row norms
    sums = torch.zeros(3, dtype=F64, device=x.device)  # <D, E>, <D, D>, <E, E>
    r, s = torch.empty(n, dtype=F64, device=x.device), torch.empty(n, dtype=F64, device=x.device)
    step = max(1, _BLOCK_ELEMS // n)
    for start in range(0, n, step):
        rows = slice(start, min(n, start + step))
        d, e = pairwise_distance_rows(xc, qx, rows), pairwise_distance_rows(yc, qy, rows)  # (b, n) each
        sums += torch.stack([(d * e).sum(), d.square().sum(), e.square().sum()])
        r[rows], s[rows] = d.sum(dim=1), e.sum(dim=1)

    def centred_inner(total: Tensor, a: Tensor, b: Tensor) -> Tensor:
        return total - 2.0 / n * torch.dot(a, b) + a.sum() * b.sum() / n**2

    dxy = centred_inner(sums[0], r, s)
    dxx, dyy = centred_inner(sums[1], r, r), centred_inner(sums[2], s, s)
    for side, v in (("x", dxx), ("y", dyy)):
        if not bool(v > 0):
            raise ValueError(f"distance_correlation: the distance variance of {side} is {float(v):.3g}; "
                             f"{side} is (nearly) constant")
    return torch.sqrt((dxy / torch.sqrt(dxx * dyy)).clamp(0.0, 1.0))
