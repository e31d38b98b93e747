"""Generalized shape metrics (Williams, Kunz, Kornblith & Linderman, NeurIPS 2021; netrep).

Each representation is centred and partially whitened, then the two are aligned
by the best rotation (or, for :func:`permutation_metric`, the best permutation of
neurons) and compared by the angle or the Euclidean distance between them. Both
are metrics on representations up to the alignment group: symmetric, zero for
aligned-equal inputs, and satisfying the triangle inequality.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import Tensor

from ._checks import check_pair
from ._linalg import centred
from ._spectral import spectral_pair
from .cca import _HINT, _require_nontrivial
from .procrustes import nuclear_terms
from .spec import NETREP, NO_SCALE, RESI, RIGID, measure

__all__ = ["permutation_metric", "procrustes_angular", "shape_metric"]

_DISTANCES = ("angular", "euclidean")


def _check_distance(distance: str, measure: str) -> None:
    if distance not in _DISTANCES:
        raise ValueError(f"{measure}: distance must be 'angular' or 'euclidean', got {distance!r}")


def _finish(inner: Tensor, nx2: Tensor, ny2: Tensor, distance: str) -> Tensor:
    """arccos(<X, Y> / (||X|| ||Y||)) or sqrt(||X||^2 + ||Y||^2 - 2 <X, Y>) of the aligned pair."""
    if distance == "angular":
        return torch.arccos((inner / torch.sqrt(nx2 * ny2)).clamp(-1.0, 1.0))
    return torch.sqrt((nx2 + ny2 - 2.0 * inner).clamp(min=0.0))


def _whitened_scales(s: Tensor, alpha: float) -> Tensor:
    """Singular values of netrep's partially whitened Xc Z, from those s of Xc (r,).

    netrep: Z = V diag(alpha + (1 - alpha) lambda^{-1/2}) V^T, lambda = s^2, rescaled so
    that ||Xc Z||_F^2 = ||Xc||_F^2 ("preserve_variance"). Then Xc Z = U diag(a) V^T with
    a = c (alpha s + 1 - alpha), c = ||s|| / ||alpha s + 1 - alpha||.
    """
    a = alpha * s + (1.0 - alpha)
    return a * (torch.linalg.vector_norm(s) / torch.linalg.vector_norm(a))


#: netrep's eigenvalue floor (netrep/utils.py whiten: ``eigval_tol=1e-7``, ``lam = np.maximum(lam, eigval_tol)``).
_NETREP_EIGVAL_TOL = 1e-7


def _netrep_scales(s: Tensor, alpha: float, width: int) -> Tensor:
    """Singular values of netrep's whitened Xc Z (its own convention), from those s (r,) of Xc.

    netrep (ahwillia/netrep @ 0186b8a, netrep/utils.py ``whiten``, lines 219-243) takes the
    eigenvalues lam of Xc^T Xc over all ``width`` columns of the zero-padded input, floors
    them at 1e-7 (line 221), and rescales d = alpha + (1 - alpha) lam^{-1/2} so that
    sum (alpha sqrt(lam) + 1 - alpha)^2 c^2 = sum lam over *every* column (lines 235-243):
    the null directions (zero padding, rank deficiency) count 1e-7 in the variance and
    (alpha sqrt(1e-7) + 1 - alpha)^2 in the whitened one, although they carry no data.
    alpha > 1 - 1e-7 is no whitening at all (line 215).
    """
    if alpha > 1.0 - _NETREP_EIGVAL_TOL:
        return s
    lam = torch.cat([s.square(), s.new_zeros(max(width - s.numel(), 0))]).clamp(min=_NETREP_EIGVAL_TOL)
    c = torch.sqrt(lam.sum() / (alpha * lam.sqrt() + (1.0 - alpha)).square().sum())
    return s * (alpha + (1.0 - alpha) * lam[: s.numel()].rsqrt()) * c


@measure(family="shape_metric", symmetric=True, distance=True, range=(0, math.pi / 2), identity=0.0,
         invariances=NO_SCALE, reference=NETREP, metric=True, judging_default=True)
def shape_metric(x: Tensor, y: Tensor, *, alpha: float = 0.5, distance: str = "angular",
                 whiten: str = "rank") -> Tensor:
    r"""Generalized shape metric of Williams et al. (2021, eq. 5 and 9) with partial whitening ``alpha``.

    With Xc, Yc the column-centred inputs, C_X = Xc^T Xc and the partial whitening
    (netrep's ``LinearMetric(alpha, score_method=distance)``)::

        phi_a(X) = Xc Z_X,   Z_X = c_X (alpha I + (1 - alpha) C_X^{-1/2}),   ||phi_a(X)||_F = ||Xc||_F
        angular:   theta(X, Y) = arccos( max_Q <phi_a(X), phi_a(Y) Q> / (||phi_a(X)|| ||phi_a(Y)||) )
        euclidean: d(X, Y)     = min_Q ||phi_a(X) - phi_a(Y) Q||_F
        max_Q <A, B Q> = ||A^T B||_* (Q orthogonal; unequal widths: zero padding)

    alpha = 1 is the Procrustes shape metric (no whitening; angular form =
    :func:`procrustes_angular`, Euclidean form = :func:`~stir.similarity.bures.bures_distance`),
    alpha = 0 the CCA metric (full whitening: arccos of sum_i rho_i / sqrt(rx ry)).
    Computed from singular values and G = Ux^T Uy (:mod:`stir.similarity._spectral`):
    phi_a(X) = Ux diag(a_x) Vx^T, so the nuclear norm is that of diag(a_x) G diag(a_y).

    ``whiten="rank"`` (the default, this project's convention) follows netrep
    except on rank-deficient input: only the numerical rank counts in the
    variance rescaling, and alpha = 0 raises ValueError when a side has rank
    n - 1 (the distance would be trivially 0, as CCA is trivially 1).
    ``whiten="netrep"`` is netrep's own convention (ahwillia/netrep @ 0186b8a,
    netrep/utils.py ``whiten`` lines 219-243, called with
    ``preserve_variance=True`` from netrep/metrics/linear.py line 72 on the input
    zero-padded to max(d1, d2) columns by netrep/validation.py line 41), the value
    of the ids ``measure/netrep/shape_metric-alpha=...`` and
    ``measure/netrep/cca-distance=angular``: covariance eigenvalues are floored at
    1e-7 (absolute) and the floored directions, zero padding included, count in
    the variance rescaling, which changes the Euclidean value (and the angular
    one only where a singular value is below sqrt(1e-7)); alpha = 0 on a side of
    rank n - 1 returns netrep's value. E.g. at alpha = 0, x (40, 8), y (40, 6):
    35.889 (netrep) where the default gives 43.236.

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, translations and permutations of either side;
    for alpha in (0, 1) not to isotropic scaling (the mix alpha s + (1 - alpha) of a
    singular value s and 1 changes with the scale); alpha = 1 angular also to isotropic
    scaling; alpha = 0 to every invertible linear map.
    Range: angular [0, pi/2] (centred data), euclidean [0, inf); 0 for identical
    representations. A metric. Symmetric. Lower is more similar.
    """
    measure = "shape_metric"
    check_pair(x, y, measure=measure)
    _check_distance(distance, measure)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"{measure}: alpha must be in [0, 1] (1 rotations only, 0 any invertible map), got {alpha}")
    if whiten not in ("rank", "netrep"):
        raise ValueError(f"{measure}: whiten must be 'rank' or 'netrep' (netrep's own convention), got {whiten!r}")
    if whiten == "netrep":
        sx, sy, g = spectral_pair(x, y)
        width = max(x.shape[1], y.shape[1])  # netrep zero-pads the narrower side
        ax, ay = _netrep_scales(sx, alpha, width), _netrep_scales(sy, alpha, width)
        nuc = torch.linalg.svdvals(ax[:, None] * g * ay[None, :]).sum()
        return _finish(nuc, ax.square().sum(), ay.square().sum(), distance)
    if alpha == 1.0:
        nuc, fx, fy = nuclear_terms(x, y, "auto", measure)
        return _finish(nuc, fx, fy, distance)
    sx, sy, g = spectral_pair(x, y)
    if alpha == 0.0:
        n = x.shape[0]
        _require_nontrivial(sx.numel(), n, x.shape[1], "x", measure, _HINT)
        _require_nontrivial(sy.numel(), n, y.shape[1], "y", measure, _HINT)
    ax, ay = _whitened_scales(sx, alpha), _whitened_scales(sy, alpha)
    nuc = torch.linalg.svdvals(ax[:, None] * g * ay[None, :]).sum()
    return _finish(nuc, ax.square().sum(), ay.square().sum(), distance)


@measure(family="shape_metric", symmetric=True, distance=True, range=(0, math.pi / 2), identity=0.0,
         invariances=RIGID, reference=f"{NETREP}, {RESI}", metric=True, judging_default=True)
def procrustes_angular(x: Tensor, y: Tensor) -> Tensor:
    r"""Orthogonal angular Procrustes distance (Williams et al. 2021; netrep's default ``LinearMetric()``).

    ::

        theta(X, Y) = arccos( ||Xc^T Yc||_* / (||Xc||_F ||Yc||_F) ) = arccos(procrustes(X, Y))

    The shape metric with alpha = 1, angular; ReSi's OrthogonalAngularShapeMetricCentered.
    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, isotropic scaling, translations, permutations.
    Range [0, pi/2]; 0 for identical representations. A metric. Symmetric. Lower is more similar.
    """
    check_pair(x, y, measure="procrustes_angular")
    nuc, fx, fy = nuclear_terms(x, y, "auto", "procrustes_angular")
    return _finish(nuc, fx, fy, "angular")


@measure(family="shape_metric", symmetric=True, distance=True, range=(0, math.pi), identity=0.0,
         invariances={"isotropic_scaling", "translation", "permutation"}, reference=NETREP, metric=True,
         assignment=True, judging_default=True)
def permutation_metric(x: Tensor, y: Tensor, *, distance: str = "angular") -> Tensor:
    r"""Permutation shape metric (Williams et al. 2021; netrep's ``PermutationMetric``).

    Columns are centred; the narrower side is zero-padded; the best one-to-one
    matching of neurons P comes from a linear assignment on Xc^T Yc (Hungarian
    algorithm, ``scipy.optimize.linear_sum_assignment``, on the CPU)::

        s = max_P tr(Xc^T Yc P)
        angular:   arccos( s / (||Xc||_F ||Yc||_F) )
        euclidean: sqrt( ||Xc||_F^2 + ||Yc||_F^2 - 2 s ) = min_P ||Xc - Yc P||_F

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor. Cost O(n d1 d2 + d^3).
    Invariant to: permutations of neurons, translations; the angular form also to
    isotropic scaling. Not invariant to rotations.
    Range: angular [0, pi], euclidean [0, inf); 0 for identical representations.
    A metric. Symmetric. Lower is more similar.
    """
    measure = "permutation_metric"
    check_pair(x, y, measure=measure)
    _check_distance(distance, measure)
    xc, yc = centred(x), centred(y)  # (n, d1), (n, d2) float64
    c = xc.T @ yc  # (d1, d2)
    rows, cols = linear_sum_assignment(c.detach().cpu().numpy(), maximize=True)  # min(d1, d2) pairs
    index = (torch.as_tensor(np.asarray(rows), device=c.device), torch.as_tensor(np.asarray(cols), device=c.device))
    s = c[index].sum()
    return _finish(s, xc.square().sum(), yc.square().sum(), distance)

