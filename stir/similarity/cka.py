"""Centered kernel alignment: linear (biased and debiased) and RBF.

All measures take x (n, d1) and y (n, d2), rows paired, any float dtype and
device, and return a 0-d float64 tensor on that device.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import check_pair
from ._hsic import centre_gram, cka_ratio, hsic_unbiased, linear_hsic_unbiased_terms, resolve_form
from ._linalg import centred_gram, centred_moment_norms, work_dtype
from .spec import INF, KORNBLITH, RIGID, measure

__all__ = ["linear_cka", "linear_cka_debiased", "rbf_cka"]


def _frob(t: Tensor) -> Tensor:
    return torch.linalg.vector_norm(t)


@measure(family="cka", symmetric=True, distance=False, range=(0, 1), identity=1.0, invariances=RIGID,
         reference=KORNBLITH, judging_default=True)
def linear_cka(x: Tensor, y: Tensor, *, form: str = "auto") -> Tensor:
    r"""Linear CKA with the biased HSIC estimator (Kornblith et al., ICML 2019, eq. 5).

    With Xc, Yc the column-centred x, y::

        CKA(X, Y) = ||Yc^T Xc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F)      (feature form)
                  = <K, L>_F / (||K||_F ||L||_F),  K = Xc Xc^T, L = Yc Yc^T   (Gram form)

    The two forms are equal; ``form="auto"`` picks the cheaper one from n, d1,
    d2 (feature form costs n (d1^2 + d1 d2 + d2^2), Gram form n^2 (d1 + d2)).
    The feature form makes one centred copy of x and y and forms only the
    symmetric halves it needs: on CPU (outside autograd) through numpy's BLAS,
    whose syrk builds Xc^T Xc and Yc^T Yc at half cost; elsewhere the upper block
    triangle of Z^T Z, Z = [Xc, Yc] (see
    :func:`~stir.similarity._linalg.centred_moment_norms`).
    Centring (in float64) precedes every product; products run in float64 for
    float64 input and in float32 otherwise, accumulated and reduced in float64.

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms and isotropic scaling of either side,
    translations. Not invariant to general invertible linear maps.
    Range: [0, 1]; 1 for identical representations. Symmetric.
    """
    return linear_cka_named(x, y, form, "linear_cka")


def linear_cka_named(x: Tensor, y: Tensor, form: str, measure: str) -> Tensor:
    """:func:`linear_cka` with its input errors named after ``measure`` (for the CKA distances)."""
    check_pair(x, y, measure=measure)
    n, d1, d2 = x.shape[0], x.shape[1], y.shape[1]
    dtype = work_dtype(x, y)
    if resolve_form(form, n, d1, d2, measure) == "gram":
        k, l = centred_gram(x, dtype), centred_gram(y, dtype)  # (n, n) each, already centred
        return torch.dot(k.reshape(-1), l.reshape(-1)) / (_frob(k) * _frob(l))
    m = centred_moment_norms(x, y, dtype=dtype)  # ||Xc^T Xc||_F^2, ||Yc^T Yc||_F^2, ||Xc^T Yc||_F^2
    return m["xy"] / (m["xx"].sqrt() * m["yy"].sqrt())


@measure(family="cka", symmetric=True, distance=False, range=(-INF, 1), identity=1.0, invariances=RIGID,
         reference=KORNBLITH, min_n=4, judging_default=True)
def linear_cka_debiased(x: Tensor, y: Tensor, *, form: str = "auto") -> Tensor:
    r"""Linear CKA with the unbiased HSIC estimator of Song et al. (JMLR 2012).

    ::

        CKA_u(X, Y) = HSIC_1(K, L) / sqrt(HSIC_1(K, K) HSIC_1(L, L)),   K = X X^T, L = Y Y^T
        HSIC_1(K, L) = [tr(K~ L~) + 1^T K~ 1 1^T L~ 1 / ((n-1)(n-2)) - 2/(n-2) 1^T K~ L~ 1] / (n(n-3))

    with K~ the Gram matrix with zeroed diagonal (the "debiased CKA" of
    Kornblith et al. 2019, used by Nguyen et al. 2021). HSIC_1 is unchanged by
    centring the features, so the features are centred first for stability.
    Computed on the n x n Gram matrices (Song et al.'s form) or, when cheaper,
    by the exactly equivalent feature form that uses ||Xc^T Yc||_F^2 and the
    squared row norms (``form`` as in :func:`linear_cka`).

    Shapes: x (n, d1), y (n, d2), n >= 4 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms and isotropic scaling of either side,
    translations. Not invariant to general invertible linear maps.
    Range: at most 1 (1 for identical representations); can be slightly
    negative for unrelated representations, since the estimator is unbiased.
    Symmetric. Raises ValueError if a self-HSIC is not positive.
    """
    check_pair(x, y, measure="linear_cka_debiased", min_n=4)
    n, d1, d2 = x.shape[0], x.shape[1], y.shape[1]
    terms = linear_hsic_unbiased_terms(x, y, resolve_form(form, n, d1, d2, "linear_cka_debiased"))
    return cka_ratio(*terms, measure="linear_cka_debiased")


def _median(values: Tensor) -> Tensor:
    """Median of a 1-D tensor, averaging the two middle values for an even count (as np.median)."""
    m = values.numel()
    lo = torch.kthvalue(values, (m + 1) // 2).values
    if m % 2:
        return lo
    return (lo + torch.kthvalue(values, m // 2 + 1).values) / 2


def rbf_gram(x: Tensor, threshold: float, side: str = "x", measure: str = "rbf_cka") -> Tensor:
    """RBF Gram matrix (n, n) with Kornblith et al.'s median bandwidth convention.

    K_ij = exp(-||x_i - x_j||^2 / (2 sigma^2)), sigma = threshold * sqrt(m), where m
    is the median of the full n x n squared-distance matrix, zero diagonal
    included (``np.median(sq_distances)`` in the reference code). Squared
    distances come from the float64 Gram matrix of the centred x, clamped at 0.
    """
    g = centred_gram(x)  # (n, n)
    sq = torch.diagonal(g)
    d2 = (sq[:, None] + sq[None, :] - 2.0 * g).clamp_(min=0.0)  # squared distances
    d2.fill_diagonal_(0.0)
    med = _median(d2.reshape(-1))
    if not bool(med > 0):
        raise ValueError(
            f"{measure}: the median squared distance between rows of {side} is 0 (at least half of the "
            "pairs of rows coincide), so the RBF bandwidth is undefined; remove duplicated rows"
        )
    return torch.exp(d2 / (-2.0 * threshold**2 * med))


@measure(family="cka", symmetric=True, distance=False, range=(0, 1), identity=1.0, invariances=RIGID,
         reference=KORNBLITH, judging_default=True)
def rbf_cka(x: Tensor, y: Tensor, *, threshold: float = 1.0, debiased: bool = False) -> Tensor:
    r"""CKA with RBF kernels (Kornblith et al., ICML 2019, section 3 and reference code).

    ::

        K_ij = exp(-||x_i - x_j||^2 / (2 sigma_x^2)),   sigma_x = threshold * sqrt(median_ij ||x_i - x_j||^2)
        CKA(K, L) = <HKH, HLH>_F / (||HKH||_F ||HLH||_F),  H = I - 11^T / n

    The median is over the full n x n squared-distance matrix including its
    zero diagonal (``np.median`` in Kornblith et al.'s code); each side gets its
    own bandwidth. With ``debiased=True`` the Song et al. unbiased HSIC replaces
    <HKH, HLH> (as in :func:`linear_cka_debiased`; needs n >= 4).

    Shapes: x (n, d1), y (n, d2), n >= 2 (4 if debiased) -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, isotropic scaling (the bandwidth scales
    with the data), translations. Not invariant to invertible linear maps.
    Range: [0, 1] (debiased: at most 1, can be slightly negative); 1 for
    identical representations. Symmetric.
    """
    measure = "rbf_cka"
    check_pair(x, y, measure=measure, min_n=4 if debiased else 2)
    if not threshold > 0:
        raise ValueError(f"{measure}: threshold must be > 0, got {threshold}")
    k = rbf_gram(x, threshold, "x", measure)
    l = rbf_gram(y, threshold, "y", measure)
    if debiased:
        return cka_ratio(hsic_unbiased(k, l), hsic_unbiased(k, k), hsic_unbiased(l, l), measure)
    k, l = centre_gram(k), centre_gram(l)
    return torch.dot(k.reshape(-1), l.reshape(-1)) / (_frob(k) * _frob(l))
