"""Subspace measures: eigenspace overlap (May et al. 2019) and GULP (Boix-Adsera et al. 2022)."""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import check_pair
from ._spectral import spectral_pair
from .cca import _HINT, _require_nontrivial
from .spec import ALL, INF, RESI, measure

__all__ = ["eigenspace_overlap", "gulp"]


@measure(family="subspace", symmetric=True, distance=False, range=(0, 1), identity=1.0,
         invariances=ALL - {"translation"}, reference=RESI, judging_default=True)
def eigenspace_overlap(x: Tensor, y: Tensor, *, divide_by: str = "rank") -> Tensor:
    r"""Eigenspace overlap score (May, Zhang, Dao & Re, NeurIPS 2019, definition 1; ReSi's EOS).

    With Ux (n, rx), Uy (n, ry) orthonormal bases of the column spaces of the
    *uncentred* x and y (left singular vectors within the numerical rank)::

        EOS(X, Y) = ||Ux^T Uy||_F^2 / max(rx, ry)

    ``divide_by="rank"`` (the default, this project's convention) divides by the
    larger numerical rank, so that identical rank-deficient inputs (d > n) still
    score 1. ``divide_by="width"`` is ReSi's convention (mklabunde/resi @ 24ab9e5,
    repsim/measures/eigenspace_overlap.py line 24: ``1 / np.max([R.shape[1],
    Rp.shape[1]]) * ||u.T @ v||_F^2``, u, v truncated at ``np.linalg.matrix_rank``),
    the value of the id ``measure/resi/eigenspace_overlap_score``: the larger
    width max(d1, d2). The two agree for inputs of full column rank (d <= n and
    no collinear columns); at n = 20, d1 = 30, d2 = 60 ReSi's is rank/width = 1/3
    where the default gives 1.

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: invertible linear maps (hence orthogonal maps, isotropic scaling,
    permutations) of either side. Not to translations (no centring).
    Range [0, 1]; 1 for identical representations. Symmetric.
    """
    check_pair(x, y, measure="eigenspace_overlap")
    if divide_by not in ("rank", "width"):
        raise ValueError(f"eigenspace_overlap: divide_by must be 'rank' or 'width' (ReSi's), got {divide_by!r}")
    sx, sy, g = spectral_pair(x, y, center=False)
    scale = max(sx.numel(), sy.numel()) if divide_by == "rank" else max(x.shape[1], y.shape[1])
    return (g.square().sum() / scale).clamp(0.0, 1.0)


@measure(family="subspace", symmetric=True, distance=True, range=(0, INF), identity=0.0, invariances=ALL,
         reference=f"{RESI} (squared)", metric=True, judging_default=True)
def gulp(x: Tensor, y: Tensor, *, lam: float = 0.0, squared: bool = False) -> Tensor:
    r"""GULP distance (Boix-Adsera, Lawrence, Stepaniants & Rigollet, NeurIPS 2022, definition 2).

    The distance between the best ridge-regularised linear predictors on the two
    representations, over all bounded linear regression tasks. Each side is
    centred and scaled to ||Xc||_F^2 = n (as in the authors' code), so the
    covariance Sx = Xc^T Xc / n has trace 1::

        d_lam(X, Y)^2 = tr(Sx^2 (Sx + lam)^{-2}) + tr(Sy^2 (Sy + lam)^{-2})
                        - 2 tr( (Sx + lam)^{-1} Sxy (Sy + lam)^{-1} Syx )

    computed on the eigenbases as ||fx||^4 + ||fy||^4 - 2 ||diag(fx) G diag(fy)||_F^2
    with f = sqrt(e / (e + lam)), e the eigenvalues of Sx and G = Ux^T Uy. Returns
    d_lam (the square root, a metric); ReSi's and the authors' ``predictor_dist``
    return d_lam^2 (``squared=True`` returns that). lam = 0 (ReSi's default) gives ||Px - Py||_F, Px the projection
    on the centred column space of x: invariant to every invertible linear map,
    and trivially 0 when both sides have rank n - 1, so it raises ValueError there
    as CCA does; pass lam > 0 for d >= n.

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, isotropic scaling, translations,
    permutations; with lam = 0 to any invertible linear map.
    Range [0, sqrt(rx + ry)]; 0 for identical representations. A metric. Symmetric.
    Lower is more similar.
    """
    measure = "gulp"
    check_pair(x, y, measure=measure)
    if not lam >= 0:
        raise ValueError(f"{measure}: lam (ridge penalty) must be >= 0, got {lam}")
    sx, sy, g = spectral_pair(x, y)
    if lam == 0:
        n = x.shape[0]
        _require_nontrivial(sx.numel(), n, x.shape[1], "x", measure, _HINT.replace("svcca", "lam > 0"))
        _require_nontrivial(sy.numel(), n, y.shape[1], "y", measure, _HINT.replace("svcca", "lam > 0"))
    ex, ey = sx.square() / sx.square().sum(), sy.square() / sy.square().sum()  # eigenvalues of Sx, Sy (sum 1)
    fx, fy = (ex / (ex + lam)).sqrt(), (ey / (ey + lam)).sqrt()
    cross = (fx[:, None] * g * fy[None, :]).square().sum()
    d2 = (fx.pow(4).sum() + fy.pow(4).sum() - 2.0 * cross).clamp(min=0.0)
    return d2 if squared else torch.sqrt(d2)
