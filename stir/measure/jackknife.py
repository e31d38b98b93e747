"""The jackknife over images behind the ``jackknife_corrected`` interval reading: delete-one and
delete-two row sets, and the standard error they give. Pure functions of tensors; the statistic
itself (a STIR value, its normalised or chance-corrected form on the given rows) is computed by
``stir.measure.calibration``.

Why a correction. A statistic T of n exchangeable rows has the ANOVA (Hoeffding) decomposition
T = mu + sum_i a_i + sum_{i<j} b_ij + ..., with V_1 = var(sum a_i), V_2 = var(sum b_ij), ... and
var(T) = V_1 + V_2 + .... The delete-one jackknife variance

    V_J = (n - 1) / n sum_i (T_(i) - T_(.))^2

estimates V_1 + 2 V_2 + 3 V_3 + ... (Efron & Stein 1981, Ann. Stat. 9: its bias is sum_k (k - 1) V_k):
exact for a mean, too wide wherever the statistic has interactions. Linear CKA near its floor is such
a statistic (its HSIC numerator is degenerate when the pairing is weak): the plain jackknife was 1.4
times too wide at the null and covered 97-99% (bench/bench_coverage.py). The delete-two interactions

    D_ij = T_(ij) - T_(i) - T_(j) + T - (T_(i) + T_(j) - 2 T_(.)) / (n - 2)

(b_ij for a statistic of order 2; the last term takes out what a first-order part leaks into them,
so that a mean has no interactions at all) estimate the second-order part:
S_D = sum_{i<j} (D_ij - mean D)^2 estimates V_2 + 3 V_3 + .... V_J - S_D is unbiased through order 2
but over-corrects a ratio such as CKA, whose third order it takes off three times where V_J holds it
twice too many (measured at the null, n = 100: 0.84 of the true sd, 82% coverage at k = 1).
The reading takes the midpoint of the two, V_J - S_D / 2 (never below V_J / 2, the exact correction
of a purely second-order statistic): the plain jackknife's bias halved where it is second order.
That choice was made on the simulation (bench/bench_coverage.py, n = 100, k = 1 and 3) and is
checked on cells it was not chosen on (k = 5, n = 1000, real networks): docs/benchmarks/calibration.md.

S_D is the sum over all n (n - 1) / 2 pairs; above ``PAIRS`` pairs it is estimated from that many
pairs drawn at random (the correction is a small part of V_J away from the floor; 1000 pairs give it
to a few per cent).
"""
from __future__ import annotations

import math
from typing import Tuple

import torch
from torch import Tensor

PAIRS = 1000  # delete-two row sets behind the correction: all pairs up to this many, else a random sample


def leave_one_out(n: int) -> Tensor:
    """(n, n - 1) int64 row indices: row i holds every image but i."""
    full = torch.arange(n).expand(n, n)
    return full[~torch.eye(n, dtype=torch.bool)].view(n, n - 1)


def leave_two_out(n: int, generator: torch.Generator, limit: int = PAIRS) -> Tuple[Tensor, Tensor, Tensor, int]:
    """(rows (M, n - 2), first (M,), second (M,), total): the row sets without images first[m] <
    second[m], for every pair when there are at most ``limit`` (M = total = n (n - 1) / 2), else for
    ``limit`` distinct pairs drawn from ``generator``; ``total`` the number of pairs there are."""
    total = n * (n - 1) // 2
    if total <= limit:
        pairs = torch.combinations(torch.arange(n), 2)  # (total, 2), first < second
    else:  # pair p <-> (i, j) through a draw of distinct pair numbers, decoded row by row
        chosen = torch.randperm(total, generator=generator)[:limit]
        starts = torch.tensor([i * n - i * (i + 1) // 2 for i in range(n)])  # index of pair (i, i + 1)
        first = torch.searchsorted(starts, chosen, right=True) - 1
        second = chosen - starts[first] + first + 1
        pairs = torch.stack([first, second], 1)
    m = pairs.shape[0]
    keep = torch.ones(m, n, dtype=torch.bool)
    keep[torch.arange(m), pairs[:, 0]] = False
    keep[torch.arange(m), pairs[:, 1]] = False
    return torch.arange(n).expand(m, n)[keep].view(m, n - 2), pairs[:, 0], pairs[:, 1], total


def jackknife_se(leave_out: Tensor) -> float:
    """The delete-one jackknife standard error over images: se^2 = (n - 1) / n sum_i (t_(i) - t_(.))^2.

    ``leave_out`` (n,): the statistic without image i, here the mean over the k draws of S_r on the
    other n - 1 rows (the draws nested in the images: row i carries x_i and every x'_ij, which are
    independent across images, so the inversion's seed variance is in the spread of the t_(i))."""
    finite = leave_out[torch.isfinite(leave_out)]
    n = finite.numel()
    if n < 2:
        return math.nan
    return math.sqrt((n - 1) / n * float(((finite - finite.mean()) ** 2).sum()))


def corrected_jackknife_se(full: float, leave_one: Tensor, leave_two: Tensor, first: Tensor, second: Tensor,
                           total: int) -> float:
    """sqrt(max(V_J - S_D / 2, V_J / 2)) (module docstring): ``full`` the statistic on all n rows,
    ``leave_one`` (n,) without each image, ``leave_two`` (M,) without images first[m] and second[m],
    ``total`` the number of pairs S_D sums over (M of them measured). NaN where any is not finite."""
    v_j = jackknife_se(leave_one) ** 2
    n = leave_one.numel()
    d = leave_two - leave_one[first] - leave_one[second] + full  # (M,) the delete-two interactions
    # less what the first-order part leaks into them: (T_(i) + T_(j) - 2 T_(.)) / (n - 2), exact for a mean
    d = d - (leave_one[first] + leave_one[second] - 2 * leave_one.mean()) / (n - 2)
    if not (math.isfinite(v_j) and math.isfinite(full) and bool(torch.isfinite(d).all()) and leave_one.isfinite().all()):
        return math.nan
    s_d = float(((d - d.mean()) ** 2).mean()) * total
    return math.sqrt(max(v_j - s_d / 2, v_j / 2))
