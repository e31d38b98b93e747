"""The null of a similarity value: what S_r gives when the rows of two representations no longer
correspond, exactly where a closed form exists, by permutations elsewhere, and the permutation
p-value of an observed value against it.

The permutation null keeps both marginal distributions and breaks only the pairing: for a STIR value
S = 1/k sum_j S_r(m2(X), m2(X'_j)) it permutes the rows of every m2(X'_j) (one permutation pi shared
by the k draws, so that what the draws have in common is kept) against m2(X) (the ``iris`` reading).
The ``images`` reading, S_r(m2(X), m2(X)[pi]), keeps the spectrum of m2(X) on both sides; it is the
right null only when m2(X') has the spectrum of m2(X), which the X' of an inversion need not have.

Closed forms (centred Gram matrices K = Xc Xc^T, L = Yc Yc^T of n rows; both are permutation
invariant in their Frobenius norms, so the mean of the ratio is the ratio of the mean):

    linear CKA:  E_pi <K, P L P^T> = sum_i K_ii E L_pi(i)pi(i) + sum_{i != j} K_ij E L_pi(i)pi(j)
                                   = tr K tr L / n + (1^T K 1 - tr K)(1^T L 1 - tr L) / (n (n-1))
                                   = tr K tr L / (n - 1)            (1^T K 1 = 0 for a centred K)
                 so F = tr K tr L / ((n-1) ||K||_F ||L||_F) = sqrt(PR(X) PR(Y)) / (n - 1),
                 PR = (tr S)^2 / ||S||_F^2 the participation ratio of the covariance S = Xc^T Xc.
    debiased linear CKA (Song et al.'s unbiased HSIC): every term of the U-statistic averages
                 k_ij l_qr over distinct indices, and a permutation maps distinct indices to
                 uniformly distributed distinct indices: E_pi HSIC_1(K, P L P^T) = k l - 2 k l + k l = 0,
                 with k, l the means of the off-diagonal entries. F = 0 exactly.

Every random draw comes from the generator passed in: nothing here touches the global RNG.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import torch
from torch import Tensor

from stir import similarity

GRAM_LIMIT = 5000  # n above which the closed form and the permutations go through feature products
ZERO_FLOOR = ("linear_cka_debiased",)  # measures whose permutation mean is exactly 0


def centred_gram(z: Tensor) -> Tensor:
    """Hc Z Z^T Hc (n, n) in float64: the Gram matrix of the column-centred rows."""
    z = z.detach().double()
    z = z - z.mean(dim=0, keepdim=True)
    return z @ z.T


def participation_ratio(z: Tensor) -> float:
    """PR(Z) = (tr S)^2 / ||S||_F^2 of the covariance S = Zc^T Zc of the centred rows (n, d).

    Between 1 (one direction holds all the variance) and rank(S) (isotropic within it); NaN for a
    constant representation. Computed on the smaller of the (n, n) Gram and the (d, d) covariance
    (they share their non-zero spectrum).
    """
    z = z.detach().double()
    z = z - z.mean(dim=0, keepdim=True)
    s = z @ z.T if z.shape[0] <= z.shape[1] else z.T @ z
    tr, frob2 = float(torch.trace(s)), float((s * s).sum())
    return tr * tr / frob2 if frob2 > 0 else math.nan


def closed_form_floor(measure: str, x: Tensor, y: Tensor) -> Optional[float]:
    """The exact permutation mean of S_r(x, y[pi]) over all row permutations pi (module docstring),
    or None where ``measure`` has no closed form here. x (n, d1), y (n, d2)."""
    if measure == "linear_cka":
        n = x.shape[0]
        return math.sqrt(participation_ratio(x) * participation_ratio(y)) / (n - 1)
    if measure in ZERO_FLOOR:
        return 0.0
    return None


def permutation_null(measure: str, x: Tensor, ys: Sequence[Tensor], permutations: int,
                     generator: torch.Generator) -> Tensor:
    """(P,) float64: 1/k sum_j S_r(x, y_j[pi_b]) for P random permutations pi_b shared by the k draws.

    Linear CKA goes through the centred Gram matrices (one (n, n) gather per permutation and draw,
    no re-centring: the Frobenius norms do not change under a permutation); any other measure is
    called on the permuted rows. NaN where the measure is undefined on a permutation (ValueError).
    """
    n = x.shape[0]
    if permutations == 0:
        return torch.empty(0, dtype=torch.float64)
    perms = [torch.randperm(n, generator=generator) for _ in range(permutations)]
    if measure == "linear_cka" and n <= GRAM_LIMIT:
        k = centred_gram(x)
        k_norm = k.norm()
        out = torch.zeros(permutations, dtype=torch.float64)
        for y in ys:
            l = centred_gram(y).to(k.device)
            den = k_norm * l.norm()
            for b, p in enumerate(perms):
                p = p.to(l.device)
                out[b] += float((k * l[p][:, p]).sum() / den) if den > 0 else math.nan
        return out / len(ys)
    out = torch.zeros(permutations, dtype=torch.float64)
    for y in ys:
        for b, p in enumerate(perms):
            out[b] += _value(measure, x, y[p.to(y.device)])
    return out / len(ys)


def p_value(observed: float, null: Tensor, distance: bool = False) -> float:
    """The permutation p-value (1 + #{null at least as extreme}) / (1 + P) of "more similar than
    chance": null values >= observed for a similarity, <= observed for a distance. NaN without a
    finite null or value. Its smallest possible value is 1 / (1 + P): say P beside it."""
    finite = null[torch.isfinite(null)]
    if finite.numel() == 0 or not math.isfinite(observed):
        return math.nan
    extreme = (finite <= observed) if distance else (finite >= observed)
    return (1 + int(extreme.sum())) / (1 + finite.numel())


def _value(measure: str, x: Tensor, y: Tensor) -> float:
    """S_r(x, y) as a float; NaN where the measure is undefined on this data (ValueError)."""
    try:
        return float(similarity.get(measure)(x, y))
    except ValueError:
        return math.nan
