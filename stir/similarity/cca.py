"""CCA family: mean canonical correlation, Yanai's R^2_CCA, SVCCA, PWCCA.

Canonical correlations of centred X, Y are the singular values of Qx^T Qy,
where Qx, Qy are orthonormal bases of the column spaces of Xc, Yc (left
singular vectors). Working with orthonormal bases instead of inverting
covariance matrices keeps nearly collinear columns stable, and the numerical
rank is explicit: singular values below ``rtol * s_max`` are dropped, with
``rtol = max(n, d) * eps(float64)`` unless given.

Decision for d >= n: after centring, the data live in an (n-1)-dimensional
space. If a side has numerical rank n - 1 (always the case for generic data
with d >= n - 1), its columns span every centred direction and every canonical
correlation is 1 whatever the other side is. The CCA measures then raise a
ValueError that says so and suggests svcca or fewer features, instead of
returning that trivial 1. Rank-deficient wide inputs (collinear columns) are
handled on their numerical rank.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import check_pair
from ._linalg import F64, centred, orthonormal_basis
from .spec import ALL, KORNBLITH, RIGID, measure

__all__ = ["cca", "cca_squared", "pwcca", "svcca"]


def _require_nontrivial(rank: int, n: int, d: int, side: str, measure: str, hint: str) -> None:
    if rank >= n - 1:
        raise ValueError(
            f"{measure}: centred {side} has numerical rank {rank} >= n - 1 = {n - 1} (n={n}, d={d}); its "
            "columns span every centred direction, so every canonical correlation is trivially 1. "
            f"{hint}"
        )


_HINT = "Use svcca (which keeps only the leading principal components), reduce d, or use more samples than features."


def _bases(x: Tensor, y: Tensor, rtol: float | None, measure: str) -> tuple[Tensor, Tensor, Tensor]:
    """Centred x (n, d1) and orthonormal bases Qx (n, rx), Qy (n, ry); raises if trivial."""
    n = x.shape[0]
    xc, yc = centred(x), centred(y)
    qx, _ = orthonormal_basis(xc, rtol)
    qy, _ = orthonormal_basis(yc, rtol)
    _require_nontrivial(qx.shape[1], n, x.shape[1], "x", measure, _HINT)
    _require_nontrivial(qy.shape[1], n, y.shape[1], "y", measure, _HINT)
    return xc, qx, qy


def _correlations(qx: Tensor, qy: Tensor) -> Tensor:
    """Canonical correlations rho (min(rx, ry),), descending, clamped to [0, 1]."""
    return torch.linalg.svdvals(qx.T @ qy).clamp(0.0, 1.0)


@measure(family="cca", symmetric=True, distance=False, range=(0, 1), identity=1.0, invariances=ALL,
         reference="Google's svcca cca_core", judging_default=True)
def cca(x: Tensor, y: Tensor, *, rtol: float | None = None) -> Tensor:
    r"""Mean canonical correlation (the rho-bar of Raghu et al. 2017; Kornblith et al. 2019, eq. 2).

    ::

        rho_i = sigma_i(Qx^T Qy),  Qx, Qy orthonormal bases of the centred column spaces
        CCA(X, Y) = (1/m) sum_{i=1}^{m} rho_i,  m = min(rank Xc, rank Yc)

    Ranks are numerical ranks with relative tolerance ``rtol`` (default
    max(n, d) * eps(float64)). Raises ValueError when a side has rank n - 1
    (e.g. d >= n): CCA would be trivially 1 (see module docstring).

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: any invertible linear map of either side, translations
    (hence also orthogonal maps and isotropic scaling).
    Range: [0, 1]; 1 for identical representations. Symmetric.
    """
    check_pair(x, y, measure="cca")
    _, qx, qy = _bases(x, y, rtol, "cca")
    return _correlations(qx, qy).mean()


@measure(family="cca", symmetric=True, distance=False, range=(0, 1), identity=1.0, invariances=ALL,
         reference=KORNBLITH, judging_default=True)
def cca_squared(x: Tensor, y: Tensor, *, rtol: float | None = None) -> Tensor:
    r"""Mean squared canonical correlation, Yanai's R^2_CCA (Kornblith et al. 2019, eq. 3).

    ::

        R^2_CCA(X, Y) = (1/m) sum_i rho_i^2 = ||Qy^T Qx||_F^2 / m,  m = min(rank Xc, rank Yc)

    Ranks, tolerance and the d >= n error as in :func:`cca`.

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: any invertible linear map of either side, translations.
    Range: [0, 1]; 1 for identical representations. Symmetric.
    """
    check_pair(x, y, measure="cca_squared")
    _, qx, qy = _bases(x, y, rtol, "cca_squared")
    return _correlations(qx, qy).square().mean()


def _leading_components(xc: Tensor, threshold: float, rtol: float | None) -> Tensor:
    """Left singular vectors (n, k) of the fewest leading PCs explaining >= threshold of the variance."""
    u, s = orthonormal_basis(xc, rtol)  # (n, r), (r,)
    var = s.square()
    explained = torch.cumsum(var, 0) / var.sum()  # (r,), increasing to 1
    # First index whose cumulative fraction reaches the threshold; the 1e-12 slack
    # absorbs rounding when the threshold is hit exactly (e.g. threshold = 1).
    k = int(torch.searchsorted(explained, torch.tensor([threshold - 1e-12], dtype=F64, device=xc.device))) + 1
    return u[:, : min(k, u.shape[1])]


@measure(family="cca", symmetric=True, distance=False, range=(0, 1), identity=1.0, invariances=RIGID,
         reference="Google's svcca", judging_default=True)
def svcca(x: Tensor, y: Tensor, *, threshold: float = 0.99, rtol: float | None = None) -> Tensor:
    r"""SVCCA (Raghu et al., NeurIPS 2017): PCA on each side, then mean canonical correlation.

    Each centred side keeps its k leading principal components, k the smallest
    number whose variance sum_{i<=k} s_i^2 / sum_i s_i^2 reaches ``threshold``
    (default 0.99), counting only the numerical rank (``rtol`` as in
    :func:`cca`). The canonical correlations of the kept PC scores U_k S_k are
    the singular values of Ux_k^T Uy_k::

        SVCCA(X, Y) = (1/m) sum_i sigma_i(Ux_k^T Uy_k),  m = min(kx, ky)

    Raises ValueError if a side keeps n - 1 components (then trivially 1;
    lower the threshold). Note that kx + ky > n - 1 forces some correlations to
    1, so keep n well above the kept dimensions.

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, isotropic scaling, translations.
    Not invariant to general invertible linear maps (they change the PCA).
    Range: [0, 1]; 1 for identical representations. Symmetric.
    """
    measure = "svcca"
    check_pair(x, y, measure=measure)
    if not 0 < threshold <= 1:
        raise ValueError(f"{measure}: threshold is a fraction of variance in (0, 1], got {threshold}")
    n = x.shape[0]
    ux = _leading_components(centred(x), threshold, rtol)
    uy = _leading_components(centred(y), threshold, rtol)
    for side, u, d in (("x", ux, x.shape[1]), ("y", uy, y.shape[1])):
        if u.shape[1] >= n - 1:
            raise ValueError(
                f"{measure}: {side} needs {u.shape[1]} principal components to explain {threshold:.4g} of its "
                f"variance, which span every centred direction (n - 1 = {n - 1}, d={d}), so every canonical "
                "correlation is trivially 1. Lower the threshold or use more samples."
            )
    return _correlations(ux, uy).mean()


@measure(family="cca", symmetric=False, distance=False, range=(0, 1), identity=1.0,
         invariances={"isotropic_scaling", "translation", "permutation"},
         reference="Morcos et al. (2018), section 2.2", judging_default=True)
def pwcca(x: Tensor, y: Tensor, *, rtol: float | None = None, weights: str = "variates") -> Tensor:
    r"""Projection-weighted CCA (Morcos, Raghu & Bengio, NeurIPS 2018, eq. in section 2.2).

    ::

        Qx^T Qy = A diag(rho) B^T                      (SVD; rho the canonical correlations)
        h_i = Qx a_i                                    (unit-norm canonical variates of x, (n,))
        alpha_i = sum_j |<h_i, xc_j>|                   (xc_j the j-th centred neuron of x, (n,))
        PWCCA(X, Y) = sum_i alpha_i rho_i / sum_i alpha_i

    The weights always come from the canonical variates of x, as in the paper
    (not from whichever side has fewer neurons), with the whitening included
    (h_i are orthonormal). Ranks, tolerance and the d >= n error as in :func:`cca`.

    ``weights="variates"`` (the default) is the paper's definition above, this
    project's convention. ``weights="svcca"`` is the code of Google's svcca
    ``pwcca.py`` as ReSi copies it (mklabunde/resi @ 24ab9e5,
    repsim/measures/cca.py lines 472-495), the value of the ids
    ``measure/resi/pwcca-score`` and ``measure/svcca/pwcca-score``: its
    directions are ``coef_x @ (acts1 - means) + means`` (line 472-478), the
    singular vectors u of Sxx^{-1/2} Sxy Syy^{-1/2} applied to the centred x
    *without* the whitening Sxx^{-1/2}, with neuron i's mean added to direction
    i; they are orthonormalised by a QR decomposition (line 493) and the weights
    are sum_j |<P_i, x_j>| over the *uncentred* neurons (line 494)::

        D = Xc Vx A + 1 m^T            (Xc = Ux Sx Vx^T, m the column means of x)
        P = Q of the QR of D;  alpha_i = sum_j |<P_i, x_j>|

    Its branch on the side with fewer neurons indexes x's rows with y's mask
    when d1 > d2 (line 486), which fails, so ``weights="svcca"`` needs d1 <= d2
    and x, y of full column rank (its covariance inverses are pseudo-inverses);
    it raises ValueError otherwise.

    Asymmetric: pwcca(x, y) != pwcca(y, x) in general.
    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: invertible linear maps of y; translations; isotropic scaling,
    permutations and sign flips of x's neurons. Not invariant to general
    orthogonal or invertible maps of x (the L1 weights see individual neurons).
    Range: [0, 1]; 1 for identical representations.
    """
    check_pair(x, y, measure="pwcca")
    if weights not in ("variates", "svcca"):
        raise ValueError(f"pwcca: weights must be 'variates' or 'svcca' (Google's/ReSi's code), got {weights!r}")
    xc, qx, qy = _bases(x, y, rtol, "pwcca")
    if weights == "svcca":
        return _pwcca_svcca(x, y, xc, qx, qy)
    a, rho, _ = torch.linalg.svd(qx.T @ qy, full_matrices=False)  # a (rx, m), rho (m,)
    h = qx @ a  # (n, m) canonical variates of x, orthonormal columns
    alpha = (xc.T @ h).abs().sum(dim=0)  # (m,): sum over neurons j of |<h_i, xc_j>|
    return (alpha * rho.clamp(0.0, 1.0)).sum() / alpha.sum()


def _pwcca_svcca(x: Tensor, y: Tensor, xc: Tensor, qx: Tensor, qy: Tensor) -> Tensor:
    """pwcca(weights="svcca"): Google's svcca pwcca.py convention (see :func:`pwcca`)."""
    d1, d2 = x.shape[1], y.shape[1]
    if qx.shape[1] != d1 or qy.shape[1] != d2:
        raise ValueError(f"pwcca(weights='svcca'): x, y have numerical ranks {qx.shape[1]}, {qy.shape[1]} below their "
                         f"{d1}, {d2} columns; the svcca code inverts their covariances (use the default weights)")
    if d1 > d2:
        raise ValueError(f"pwcca(weights='svcca'): x has more neurons ({d1}) than y ({d2}); the svcca code fails "
                         "there (it indexes x's rows with y's mask); use the default weights")
    # The value depends on the signs of the singular vectors u (a flipped u_i does not flip the
    # mean added to direction i), so u is taken as LAPACK's SVD (gesdd, numpy's and torch's CPU
    # driver) returns it for the same matrix Sxx^{-1/2} Sxy Syy^{-1/2}, computed on the CPU.
    yc = centred(y)
    xc_cpu, yc_cpu = xc.detach().cpu(), yc.detach().cpu()
    n = xc.shape[0]
    sxx, syy = xc_cpu.T @ xc_cpu / (n - 1), yc_cpu.T @ yc_cpu / (n - 1)
    xmax, ymax = sxx.abs().max(), syy.abs().max()  # svcca's rescaling, kept so LAPACK sees the same matrix
    sxx, syy, sxy = sxx / xmax, syy / ymax, xc_cpu.T @ yc_cpu / (n - 1) / torch.sqrt(xmax * ymax)
    arr = _inverse_sqrt(sxx) @ sxy @ _inverse_sqrt(syy)  # (d1, d2)
    u, rho, _ = torch.linalg.svd(arr)  # u (d1, d1), rho (d1,) descending
    u, rho = u.to(xc.device), rho.to(xc.device)
    directions = xc @ u + x.to(F64).mean(dim=0)[None, :]  # (n, d1): column i is Xc u_i + m_i 1
    p, _ = torch.linalg.qr(directions)  # (n, d1)
    alpha = (p.T @ x.to(F64)).abs().sum(dim=1)  # (d1,): over the uncentred neurons
    return (alpha * rho.clamp(0.0, 1.0)).sum() / alpha.sum()


def _inverse_sqrt(m: Tensor) -> Tensor:
    """M^{-1/2} of a symmetric positive definite m."""
    w, v = torch.linalg.eigh(m)
    return (v * w.rsqrt()[None, :]) @ v.T
