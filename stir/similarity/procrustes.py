"""Orthogonal Procrustes similarity and distance (Ding, Denain & Steinhardt, NeurIPS 2021)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ._checks import check_pair
from ._linalg import F64, centred_gram, centred_moments, work_dtype
from .spec import RIGID, measure

__all__ = ["nuclear_terms", "procrustes", "procrustes_distance"]

# Rough cost of an n x n eigendecomposition / SVD in units of one matmul
# multiply-add on CPU (measured with MKL); only used to choose the form.
_DECOMP_COST = 20


def _cheaper_form(n: int, d1: int, d2: int) -> str:
    # Feature form: Xc^T Yc (n d1 d2) + SVD of a d1 x d2 matrix.
    feature = n * d1 * d2 + _DECOMP_COST * min(d1, d2) ** 2 * max(d1, d2)
    # Gram form: two n x n Grams + two n x n eigh + one n x n SVD (+ a product).
    gram = n * n * (d1 + d2) + (3 * _DECOMP_COST + 1) * n**3
    return "gram" if gram < feature else "feature"


def _gram_factor(k: Tensor) -> Tensor:
    """F (n, r) with F F^T = K for a PSD Gram K (n, n), from its eigendecomposition.

    Eigenvalues below n * eps * lambda_max are rounding noise (e.g. the
    direction of the ones vector removed by centring) and are dropped.
    """
    lam, u = torch.linalg.eigh(k)  # ascending
    keep = lam > k.shape[0] * torch.finfo(F64).eps * lam[-1]
    return u[:, keep] * lam[keep].sqrt()


def nuclear_terms(x: Tensor, y: Tensor, form: str, measure: str) -> tuple[Tensor, Tensor, Tensor]:
    """(||Xc^T Yc||_*, ||Xc||_F^2, ||Yc||_F^2) of the column-centred x (n, d1), y (n, d2), float64 0-d each.

    ``form`` is "auto", "feature" or "gram" (see :func:`procrustes`); callers have validated input.
    """
    n, d1, d2 = x.shape[0], x.shape[1], y.shape[1]
    dtype = work_dtype(x, y)  # GEMM precision of the feature form; eigh / SVD always in float64
    if form == "auto":
        form = _cheaper_form(n, d1, d2)
    elif form not in ("feature", "gram"):
        raise ValueError(f"{measure}: form must be 'auto', 'feature' or 'gram', got {form!r}")
    if form == "gram":
        # Xc = Fx Vx^T with Vx orthonormal, so sigma(Xc^T Yc) = sigma(Fx^T Fy): an
        # (rx, ry) SVD instead of a (d1, d2) one, which is what makes d >> n cheap.
        # float64 Grams even for float32 input: the square roots of small eigenvalues
        # would amplify float32 rounding (sqrt(eps32) ~ 3e-4) into the nuclear norm.
        k, l = centred_gram(x), centred_gram(y)  # (n, n) each
        nuc = torch.linalg.svdvals(_gram_factor(k).T @ _gram_factor(l)).sum()
        return nuc, torch.trace(k), torch.trace(l)  # ||Xc||_F^2 = tr(K)
    m = centred_moments(x, y, xx=False, yy=False, dtype=dtype)  # Xc^T Yc (d1, d2), row norms (n,)
    return torch.linalg.svdvals(m["xy"]).sum(), m["kx"].sum(), m["ky"].sum()


def _nuclear_ratio(x: Tensor, y: Tensor, form: str, measure: str) -> Tensor:
    """||Xc^T Yc||_* / (||Xc||_F ||Yc||_F), clamped to [0, 1] against rounding."""
    nuc, fx, fy = nuclear_terms(x, y, form, measure)
    return (nuc / torch.sqrt(fx * fy)).clamp(0.0, 1.0)


@measure(family="procrustes", symmetric=True, distance=False, range=(0, 1), identity=1.0, invariances=RIGID,
         reference="Ding et al. (2021) code", judging_default=True)
def procrustes(x: Tensor, y: Tensor, *, form: str = "auto") -> Tensor:
    r"""Orthogonal Procrustes similarity: the nuclear norm ||X^T Y||_* of normalised inputs.

    Each side is column-centred and scaled to unit Frobenius norm
    (X = Xc / ||Xc||_F, Y likewise), as in Ding et al. (2021)::

        procrustes(X, Y) = max_{Q orthogonal} tr(X^T Y Q) = ||X^T Y||_* = sum_i sigma_i(X^T Y)
                         = 1 - procrustes_distance(X, Y)^2 / 2

    Computed from the SVD of the d1 x d2 cross-covariance, or, when n is the
    smaller dimension (e.g. d >> n), from eigendecompositions of the two n x n
    Gram matrices (``form`` = "auto" picks, "feature" / "gram" force).

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms and isotropic scaling of either side,
    translations. Not invariant to general invertible linear maps.
    Range: [0, 1]; 1 for identical representations (up to rotation). Symmetric.
    """
    check_pair(x, y, measure="procrustes")
    return _nuclear_ratio(x, y, form, "procrustes")


@measure(family="procrustes", symmetric=True, distance=True, range=(0, math.sqrt(2)), identity=0.0,
         invariances=RIGID, reference="Ding et al. (2021) code", metric=True, judging_default=True)
def procrustes_distance(x: Tensor, y: Tensor, *, form: str = "auto") -> Tensor:
    r"""Orthogonal Procrustes distance of Ding et al. (2021) on centred, unit-norm inputs.

    ::

        d(X, Y)^2 = min_{Q orthogonal} ||X - Y Q||_F^2 = ||X||_F^2 + ||Y||_F^2 - 2 ||X^T Y||_*
                  = 2 - 2 ||X^T Y||_*,   ||X||_F = ||Y||_F = 1 after centring and scaling

    Returns d (a metric, the square root), in [0, sqrt(2)]; Ding et al.'s
    code reports the squared value d^2 in [0, 2].

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms and isotropic scaling of either side,
    translations. 0 for identical representations. Symmetric. Lower is more similar.
    """
    check_pair(x, y, measure="procrustes_distance")
    sim = _nuclear_ratio(x, y, form, "procrustes_distance")
    return torch.sqrt((2.0 - 2.0 * sim).clamp(min=0.0))
