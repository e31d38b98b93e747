"""Representational similarity analysis (Kriegeskorte, Mur & Bandettini, 2008; rsatoolbox).

A representation's RDM holds the dissimilarities of every pair of its samples;
RSA compares two RDMs. Only the n (n - 1) / 2 pairs i < j enter (the zero
diagonal and the mirrored half are left out), as rsatoolbox (``get_vectors``)
and ReSi (``squareform``) do: keeping the diagonal would add n guaranteed
agreements and inflate every comparison.
"""

from __future__ import annotations

import math

import scipy.stats
import torch
from torch import Tensor

from ._checks import check_pair
from ._linalg import F64, centred
from .distance_correlation import pairwise_distance_rows
from .spec import RESI, RIGID, RSATOOLBOX, declare, measure

__all__ = ["kendall_tau_a", "rdm_vector", "rsa", "spearman_ranks"]

_RDMS = ("correlation", "euclidean")
_COMPARES = ("spearman", "pearson", "kendall_tau_a", "cosine")
_BLOCK_ELEMS = 1 << 22


def rdm_vector(x: Tensor, rdm: str, side: str = "x", measure: str = "rsa") -> Tensor:
    """Upper triangle (i < j, row by row) of the RDM of x (n, d) -> (n (n - 1) / 2,) float64.

    ``rdm="correlation"``: 1 - Pearson r between the rows (rsatoolbox's
    ``calc_rdm_correlation``; rows are centred over features and scaled to unit
    norm first, so a constant row raises ValueError). ``rdm="euclidean"``:
    squared Euclidean distance divided by d (rsatoolbox's ``calc_rdm_euclidean``;
    a monotone map of ReSi's plain Euclidean distance, so rank comparisons agree).
    Built a block of rows at a time from Gram products.
    """
    n, d = x.shape
    if rdm == "correlation":
        z = x.to(F64, copy=True)
        z -= z.mean(dim=1, keepdim=True)
        norms = torch.linalg.vector_norm(z, dim=1, keepdim=True)
        if not bool((norms > 0).all()):
            row = int((norms[:, 0] == 0).nonzero()[0])
            raise ValueError(f"{measure}: row {row} of {side} is constant over its features, so its correlation "
                             "distance is undefined; use rdm='euclidean'")
        z /= norms
    else:
        z = centred(x)  # distances are translation invariant; centring keeps them accurate
        sq = z.square().sum(dim=1)
    out = torch.empty(n * (n - 1) // 2, dtype=F64, device=x.device)
    step = max(1, _BLOCK_ELEMS // n)
    pos = 0
    for start in range(0, n, step):
        rows = slice(start, min(n, start + step))
        if rdm == "correlation":
            block = 1.0 - z[rows] @ z.T  # (b, n)
        else:
            block = pairwise_distance_rows(z, sq, rows, squared=True) / d
        b = block.shape[0]
        i = torch.arange(start, start + b, device=x.device)
        upper = torch.arange(n, device=x.device)[None, :] > i[:, None]  # (b, n): j > i
        vals = block[upper]  # row-major: row i's j > i entries, rows in order
        out[pos : pos + vals.numel()] = vals
        pos += vals.numel()
    return out


def spearman_ranks(v: Tensor) -> Tensor:
    """Ranks 1..m of v (m,) with ties given their average rank (``scipy.stats.rankdata``), float64."""
    order = torch.argsort(v)
    s = v[order]
    m = v.numel()
    new = torch.ones(m, dtype=torch.bool, device=v.device)
    new[1:] = s[1:] != s[:-1]
    group = torch.cumsum(new, 0) - 1  # (m,) tie-group id in sorted order
    counts = torch.bincount(group)
    ends = torch.cumsum(counts, 0)  # 1-based rank of each group's last member
    avg = (ends - (counts - 1) / 2.0).to(F64)  # average of ranks ends - counts + 1 .. ends
    ranks = torch.empty(m, dtype=F64, device=v.device)
    ranks[order] = avg[group]
    return ranks


def _pearson(a: Tensor, b: Tensor) -> Tensor:
    a, b = a - a.mean(), b - b.mean()
    return torch.dot(a, b) / (torch.linalg.vector_norm(a) * torch.linalg.vector_norm(b))


def _dense_ranks(v: Tensor) -> tuple[Tensor, Tensor]:
    """(ranks 0..u-1 of v with equal values sharing a rank (int64), the number of pairs of equal values)."""
    order = torch.argsort(v)
    s = v[order]
    new = torch.ones(v.numel(), dtype=torch.bool, device=v.device)
    new[1:] = s[1:] != s[:-1]
    dense = torch.cumsum(new, 0) - 1  # (m,) in sorted order
    ranks = torch.empty_like(dense)
    ranks[order] = dense
    counts = torch.bincount(dense)
    return ranks, (counts * (counts - 1) // 2).sum()


def _inversions(r: Tensor) -> Tensor:
    """Number of pairs i < j with r_i > r_j, for nonnegative integers r (m,): O(m log max r).

    Most significant bit first: at bit b, the elements are grouped by the prefix
    r >> (b + 1), each group in the original order (a stable partition per
    level, a counting sort on r >> b, keeps that). An inverted pair has a unique
    highest differing bit, below which prefixes agree: it is counted at that level
    as a 1 before a 0. Group sizes and offsets come from one bincount of r >> b
    per level, so each level is a few passes over int32 arrays.
    """
    m = r.numel()
    dt = torch.int32 if m < 2**31 - 1 else torch.long
    bits = max(1, int(r.max()).bit_length())
    cur = r.to(dt)
    idx = torch.arange(m, device=r.device, dtype=dt)
    total = torch.zeros((), dtype=torch.long, device=r.device)
    for b in range(bits - 1, -1, -1):
        key = cur >> b  # (m,) = 2 * prefix + bit, nondecreasing in prefix
        bit = key & 1
        prefix = key >> 1
        c2 = torch.bincount(key, minlength=2 * (int(key[-1] >> 1) + 1))  # elements per (prefix, bit)
        zeros_g, ones_g = c2[0::2], c2[1::2]  # per prefix
        size_g = zeros_g + ones_g
        start_g = (torch.cumsum(size_g, 0) - size_g).to(dt)  # group offsets (groups are contiguous)
        ones_before_g = (torch.cumsum(ones_g, 0) - ones_g).to(dt)
        ones_excl = torch.cumsum(bit, 0, dtype=dt) - bit  # ones strictly before, globally
        ones_in = ones_excl - ones_before_g[prefix]  # ones before it within its group
        total += (ones_in.to(torch.long) * (1 - bit)).sum()  # each 0 pairs with the 1s before it
        start = start_g[prefix]
        pos = torch.where(bit == 0, idx - ones_in, start + zeros_g.to(dt)[prefix] + ones_in)  # stable partition
        nxt = torch.empty_like(cur)
        nxt[pos.long()] = cur
        cur = nxt
    return total


def _tied_pairs(v: Tensor) -> Tensor:
    """Pairs of equal values of v, sum over tie groups of c (c - 1) / 2 (one sort)."""
    _, counts = torch.unique_consecutive(torch.sort(v).values, return_counts=True)
    return (counts * (counts - 1) // 2).sum()


def kendall_tau_a(a: Tensor, b: Tensor, *, backend: str = "auto") -> Tensor:
    r"""Kendall's tau-a of two vectors (m,): (concordant - discordant) / (m (m - 1) / 2), ties not corrected.

    As rsatoolbox's ``compare_kendall_tau_a`` (scipy's counting with the tau-a
    denominator). ``backend="torch"``: sort by (a, b); the discordant pairs are the
    strict inversions of b's ranks in that order (:func:`_inversions`); then
    C - D = P - T_a - T_b + T_ab - 2 D with P all pairs and T the tied pairs.
    ``backend="scipy"``: C - D = tau_b sqrt((P - T_a)(P - T_b)) from
    ``scipy.stats.kendalltau`` (tau-b, the same merge-sort count in compiled code,
    ~5x faster than the torch passes on CPU). "auto" takes scipy on CPU, torch elsewhere.
    Time O(m log m), memory O(m).
    """
    m = a.numel()
    if backend == "auto":
        backend = "scipy" if a.device.type == "cpu" else "torch"
    if backend == "scipy":
        total = m * (m - 1) // 2
        tau_b = scipy.stats.kendalltau(a.detach().cpu().numpy(), b.detach().cpu().numpy()).statistic
        scale = math.sqrt((total - int(_tied_pairs(a))) * (total - int(_tied_pairs(b))))
        return a.new_tensor(tau_b * scale / total, dtype=F64).clamp(-1.0, 1.0)
    ra, ties_a = _dense_ranks(a)
    rb, ties_b = _dense_ranks(b)
    key = ra * (int(rb.max()) + 1) + rb  # lexicographic (a, b) as one integer
    sk, order = torch.sort(key)
    dis = _inversions(rb[order])
    new = torch.ones(m, dtype=torch.bool, device=a.device)
    new[1:] = sk[1:] != sk[:-1]
    counts = torch.bincount(torch.cumsum(new, 0) - 1)
    ties_ab = (counts * (counts - 1) // 2).sum()
    total = m * (m - 1) // 2
    con_minus_dis = total - ties_a - ties_b + ties_ab - 2 * dis
    return (con_minus_dis.to(F64) / total).clamp(-1.0, 1.0)


def _compare(a: Tensor, b: Tensor, compare: str) -> Tensor:
    if compare == "pearson":
        return _pearson(a, b)
    if compare == "spearman":
        return _pearson(spearman_ranks(a), spearman_ranks(b))
    if compare == "cosine":
        return torch.dot(a, b) / (torch.linalg.vector_norm(a) * torch.linalg.vector_norm(b))
    return kendall_tau_a(a, b)


@measure(family="rsa", symmetric=True, distance=False, range=(-1, 1), identity=1.0,
         invariances={"isotropic_scaling", "permutation"}, reference=f"{RSATOOLBOX} (spearman), {RESI}", min_n=3,
         judging_default=True)
def rsa(x: Tensor, y: Tensor, *, rdm: str = "correlation", compare: str = "spearman") -> Tensor:
    r"""RSA: the correlation of the two representational dissimilarity matrices (Kriegeskorte et al. 2008).

    ::

        v_X = (RDM_X[i, j])_{i < j},   RDM_X[i, j] = 1 - r(x_i, x_j)   (rdm="correlation")
                                                   = ||x_i - x_j||^2 / d  (rdm="euclidean")
        RSA(X, Y) = compare(v_X, v_Y)

    ``compare``: "spearman" (Pearson r of the ranks, ties averaged: rsatoolbox's
    "spearman", ReSi's default and scipy's spearmanr), "pearson" (rsatoolbox's
    "corr"), "kendall_tau_a" (rsatoolbox's "tau-a": no tie correction, the
    choice of Nili et al. 2014 for models that predict tied dissimilarities;
    scipy's default tau-b corrects for ties) or "cosine" (rsatoolbox's "cosine").
    Only the pairs i < j count (see the module docstring).

    Shapes: x (n, d1), y (n, d2), n >= 3 -> 0-d float64 tensor. Memory O(n^2)
    (the two RDM vectors, inherent to comparing them by ranks); time O(n^2 (d + log n)).
    Invariant to: isotropic scaling, permutations of neurons; rdm="euclidean" also to
    orthogonal transforms and translations. rdm="correlation" is not invariant to
    translations or rotations (it centres each row over the features).
    Range [-1, 1]; 1 for identical representations. Symmetric.
    Raises ValueError if an RDM is constant (its correlation is undefined).
    """
    measure = "rsa"
    check_pair(x, y, measure=measure, min_n=3)
    if rdm not in _RDMS:
        raise ValueError(f"{measure}: rdm must be one of {', '.join(_RDMS)}, got {rdm!r}")
    if compare not in _COMPARES:
        raise ValueError(f"{measure}: compare must be one of {', '.join(_COMPARES)}, got {compare!r}")
    a, b = rdm_vector(x, rdm, "x", measure), rdm_vector(y, rdm, "y", measure)
    for side, v in (("x", a), ("y", b)):
        # Equal up to the rounding of the Gram-based distances (~eps |x|^2): a correlation would rank noise.
        if compare != "cosine" and bool(v.max() - v.min() <= 1e-12 * v.abs().max()):
            raise ValueError(f"{measure}: every dissimilarity in the RDM of {side} is equal, so its correlation "
                             "with another RDM is undefined")
        if compare == "cosine" and not bool((v != 0).any()):
            raise ValueError(f"{measure}: the RDM of {side} is all zeros")
    return _compare(a, b, compare)


declare("rsa_pearson", rsa, options={"compare": "pearson"}, family="rsa", symmetric=True, distance=False,
        range=(-1, 1), identity=1.0, invariances={"isotropic_scaling", "permutation"},
        reference=f"{RSATOOLBOX} (corr)", min_n=3, judging_default=True)


declare("rsa_kendall", rsa, options={"compare": "kendall_tau_a"}, family="rsa", symmetric=True, distance=False,
        range=(-1, 1), identity=1.0, invariances={"isotropic_scaling", "permutation"},
        reference=f"{RSATOOLBOX} (tau-a)", min_n=3, judging_default=True)


declare("rsa_euclidean", rsa, options={"rdm": "euclidean"}, family="rsa", symmetric=True, distance=False,
        range=(-1, 1), identity=1.0, invariances=RIGID, reference=f"{RSATOOLBOX} (euclidean, spearman), {RESI}",
        min_n=3, judging_default=True)
