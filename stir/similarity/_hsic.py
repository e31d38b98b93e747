"""HSIC estimators (biased and Song et al. 2012 unbiased) on Gram matrices and features.

All functions take and return float64 tensors; callers have validated input.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._linalg import centred_gram, centred_moment_norms, prefer_gram, work_dtype

__all__ = [
    "centre_gram",
    "cka_ratio",
    "hsic_unbiased",
    "linear_hsic_unbiased_terms",
    "resolve_form",
]


def resolve_form(form: str, n: int, d1: int, d2: int, measure: str) -> str:
    """Map ``form`` ("auto", "feature" or "gram") to the form to compute."""
    if form == "auto":
        return "gram" if prefer_gram(n, d1, d2) else "feature"
    if form not in ("feature", "gram"):
        raise ValueError(f"{measure}: form must be 'auto', 'feature' or 'gram', got {form!r}")
    return form


def centre_gram(k: Tensor) -> Tensor:
    """H K H for a symmetric K (n, n), without forming H = I - 11^T / n.

    (HKH)_ij = K_ij - mean_i - mean_j + grand mean, using row means of K.
    """
    row = k.mean(dim=1)  # (n,); equals the column means for symmetric K
    return k - row[:, None] - row[None, :] + row.mean()


def _dot(a: Tensor, b: Tensor) -> Tensor:
    # <A, B>_F = sum_ij A_ij B_ij without an (n, n) temporary.
    return torch.dot(a.reshape(-1), b.reshape(-1))


def hsic_unbiased(k: Tensor, l: Tensor) -> Tensor:
    """Unbiased HSIC of Song et al. (2012, eq. 5) from Gram matrices K, L (n, n), n >= 4.

        HSIC_1 = [ tr(K~ L~) + (1^T K~ 1)(1^T L~ 1) / ((n-1)(n-2))
                   - 2/(n-2) 1^T K~ L~ 1 ] / (n (n-3))

    where K~, L~ are K, L with the diagonal set to zero. The diagonal is
    subtracted term by term instead of being copied out.
    """
    n = k.shape[0]
    kd, ld = torch.diagonal(k), torch.diagonal(l)  # (n,)
    tr_kl = _dot(k, l) - torch.dot(kd, ld)  # tr(K~ L~) = sum_{i != j} K_ij L_ij
    k1 = k.sum(dim=1) - kd  # K~ 1, (n,)
    l1 = l.sum(dim=1) - ld  # L~ 1, (n,)
    total = tr_kl + k1.sum() * l1.sum() / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * torch.dot(k1, l1)
    # Divide by the product n(n-3): writing `/ n * (n - 3)` multiplies by (n - 3)
    # instead, an error that cancels in a single CKA ratio but not across batches.
    return total / (n * (n - 3))


def _hsic_unbiased_features(cross_sq: Tensor, kx: Tensor, ky: Tensor, n: int) -> Tensor:
    """Song et al. unbiased HSIC of linear kernels, from centred features.

    For column-centred X, Y with K = Xc Xc^T, L = Yc Yc^T (never formed):
    K 1 = 0, so K~ 1 = -diag(K) = -kx, 1^T K~ 1 = -sum(kx), and
    tr(K~ L~) = ||Xc^T Yc||_F^2 - kx . ky. ``cross_sq`` is ||Xc^T Yc||_F^2.
    Exact (not an approximation) and O(n d1 d2) instead of O(n^2 (d1 + d2)).
    """
    kl = torch.dot(kx, ky)
    total = (cross_sq - kl) + kx.sum() * ky.sum() / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * kl
    return total / (n * (n - 3))


def linear_hsic_unbiased_terms(x: Tensor, y: Tensor, form: str) -> tuple[Tensor, Tensor, Tensor]:
    """(HSIC_1(K, L), HSIC_1(K, K), HSIC_1(L, L)) for linear kernels of x (n, d1), y (n, d2).

    ``form`` is "feature" or "gram" (already resolved). The unbiased estimator
    is invariant to centring the features, so both forms centre first for
    numerical stability; products run in :func:`work_dtype`.
    """
    n, dtype = x.shape[0], work_dtype(x, y)
    if form == "gram":
        k, l = centred_gram(x, dtype), centred_gram(y, dtype)  # (n, n) each
        return hsic_unbiased(k, l), hsic_unbiased(k, k), hsic_unbiased(l, l)
    m = centred_moment_norms(x, y, row_norms=True, dtype=dtype)  # squared norms of the moments, row norms
    kx, ky = m["kx"], m["ky"]
    return (
        _hsic_unbiased_features(m["xy"], kx, ky, n),
        _hsic_unbiased_features(m["xx"], kx, kx, n),
        _hsic_unbiased_features(m["yy"], ky, ky, n),
    )


def cka_ratio(hxy: Tensor, hxx: Tensor, hyy: Tensor, measure: str) -> Tensor:
    """hxy / sqrt(hxx * hyy), with a clear error when a self-HSIC is not positive.

    The unbiased self-HSIC can be <= 0 for tiny or nearly constant samples, in
    which case CKA is undefined (the square root would be NaN).
    """
    for side, h in (("x", hxx), ("y", hyy)):
        if not bool(h > 0):
            raise ValueError(
                f"{measure}: the HSIC of {side} with itself is {float(h):.3g} (not positive), so CKA is "
                f"undefined; {side} is (nearly) constant or the sample is too small for this estimator"
            )
    return hxy / torch.sqrt(hxx * hyy)

