"""K x K matrices of one measure over many representations, preparing each representation once.

``pairwise(measure, reps)`` returns M (K, K) with M[i, j] = f(reps[i], reps[j]).
For the measures below, the per-representation work (centring, the Gram matrix
or its factor, the RDM and its ranks, the k-NN lists) is done once per
representation and each pair costs one inner product or one small
decomposition; every other measure is called pair by pair (for a symmetric
one, on i <= j only). Values equal the pair-by-pair calls to rounding
(the prepared paths reorder the same sums).

Prepared: linear_cka, cka_angular, cka_euclidean; procrustes, procrustes_distance,
procrustes_angular, bures_distance, shape_metric at alpha = 1; rsa (all but
Kendall's tau); mutual_knn, jaccard_knn; distance_correlation (n <= 4096).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from ._checks import check_pair
from ._linalg import F64, centred, centred_gram, prefer_gram
from .distance_correlation import pairwise_distance_rows
from .neighbours import _check_k, _matches, _topk_rows, _unit_rows
from .procrustes import _gram_factor
from .registry import resolve
from .rsa import rdm_vector, spearman_ranks

__all__ = ["pairwise"]

# Largest n for which distance correlation keeps one n x n matrix per representation.
_DCOR_MAX_N = 4096


def _cka_state(x: Tensor) -> tuple[str, Tensor]:
    n, d = x.shape
    if prefer_gram(n, d, d):
        k = centred_gram(x)  # (n, n)
        return "gram", k / torch.linalg.vector_norm(k)
    xc = centred(x)  # (n, d)
    return "feature", xc / torch.linalg.vector_norm(xc.T @ xc).sqrt()


def _cka_combine(a: tuple[str, Tensor], b: tuple[str, Tensor]) -> Tensor:
    (ka, ta), (kb, tb) = a, b
    if ka == kb == "gram":
        return torch.dot(ta.reshape(-1), tb.reshape(-1))
    if ka == kb == "feature":
        return (ta.T @ tb).square().sum()  # ||Xc^T Yc||_F^2 of the scaled sides
    k, f = (ta, tb) if ka == "gram" else (tb, ta)
    return ((k @ f) * f).sum()  # <K, F F^T>


def _factor_state(x: Tensor) -> tuple[Tensor, Tensor]:
    """(F (n, r) with F F^T = Xc Xc^T, ||Xc||_F^2): Xc itself unless d > n."""
    n, d = x.shape
    if d <= n:
        xc = centred(x)
        return xc, xc.square().sum()
    k = centred_gram(x)
    return _gram_factor(k), torch.trace(k)


def _nuclear(a: tuple[Tensor, Tensor], b: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    return torch.linalg.svdvals(a[0].T @ b[0]).sum(), a[1], b[1]


def _unit(v: Tensor) -> Tensor:
    return v / torch.linalg.vector_norm(v)


def _rsa_state(x: Tensor, rdm: str, compare: str) -> Tensor:
    v = rdm_vector(x, rdm, "x", "rsa")
    if compare == "spearman":
        v = spearman_ranks(v)
    if compare != "cosine":
        v = v - v.mean()
    return _unit(v)


def _dcor_state(x: Tensor) -> Tensor:
    """The double-centred distance matrix of x scaled to unit Frobenius norm (n, n)."""
    n = x.shape[0]
    xc = centred(x)
    d = pairwise_distance_rows(xc, xc.square().sum(dim=1), slice(0, n))
    r = d.mean(dim=1)
    a = d - r[:, None] - r[None, :] + r.mean()
    return _unit(a.reshape(-1))


def _prepared(name: str, options: dict, n: int) -> tuple[Callable, Callable] | None:
    """(prepare(x) -> state, combine(state_a, state_b) -> value) for a prepared measure, else None."""
    procrustes_like = {
        "procrustes": lambda nuc, fx, fy: (nuc / torch.sqrt(fx * fy)).clamp(0.0, 1.0),
        "procrustes_distance": lambda nuc, fx, fy: torch.sqrt((2.0 - 2.0 * (nuc / torch.sqrt(fx * fy)).clamp(0.0, 1.0)).clamp(min=0.0)),
        "procrustes_angular": lambda nuc, fx, fy: torch.arccos((nuc / torch.sqrt(fx * fy)).clamp(-1.0, 1.0)),
        "bures_distance": lambda nuc, fx, fy: torch.sqrt((fx + fy - 2.0 * nuc).clamp(min=0.0)),
    }
    if name == "shape_metric" and options.get("alpha", 0.5) == 1.0:
        name = "procrustes_angular" if options.get("distance", "angular") == "angular" else "bures_distance"
        options = {}
    cka_like = {
        "linear_cka": lambda c: c,
        "cka_angular": lambda c: torch.arccos(c.clamp(-1.0, 1.0)),
        "cka_euclidean": lambda c: torch.sqrt((2.0 - 2.0 * c).clamp(min=0.0)),
    }
    if name in cka_like and options.get("form", "auto") == "auto":
        post = cka_like[name]
        return _cka_state, lambda a, b: post(_cka_combine(a, b))
    if name in procrustes_like and options.get("form", "auto") == "auto":
        post = procrustes_like[name]
        return _factor_state, lambda a, b: post(*_nuclear(a, b))
    if name == "rsa" and options.get("compare", "spearman") != "kendall_tau_a":
        rdm, compare = options.get("rdm", "correlation"), options.get("compare", "spearman")
        return (lambda x: _rsa_state(x, rdm, compare)), torch.dot
    if name in ("mutual_knn", "jaccard_knn"):
        k = int(options.get("k", 10))
        _check_k(k, n, name)

        def knn(x: Tensor) -> Tensor:
            return _topk_rows(_unit_rows(x, "x", name, F64 if x.dtype == F64 else torch.float32), k)

        def shared(a: Tensor, b: Tensor) -> Tensor:
            m = _matches(a, b).any(dim=2).sum(dim=1).to(F64)
            return (m / k).mean() if name == "mutual_knn" else (m / (2 * k - m)).mean()

        return knn, shared
    if name == "distance_correlation" and n <= _DCOR_MAX_N:
        return _dcor_state, lambda a, b: torch.sqrt(torch.dot(a, b).clamp(0.0, 1.0))
    return None


def pairwise(measure: str, reps: Sequence[Tensor], *, errors: str = "raise", **options: object) -> Tensor:
    r"""M[i, j] = f(reps[i], reps[j]) (K, K) float64 for K representations (n, d_i) of the same n inputs.

    ``measure`` is a registered name or id (as for :func:`~stir.similarity.get`),
    ``options`` its keyword options. The prepared measures (module docstring) centre
    and decompose each representation once: K preparations and K^2 cheap
    combinations instead of K^2 full calls. Symmetric measures are computed on
    i <= j and mirrored. ``errors="nan"`` puts NaN in a cell where the measure
    raises ValueError (undefined on that pair, e.g. CCA with d >= n) instead of raising.

    Shapes: reps K >= 1 tensors (n, d_i) -> (K, K) float64 on the first one's device.
    """
    if errors not in ("raise", "nan"):
        raise ValueError(f"pairwise: errors must be 'raise' or 'nan', got {errors!r}")
    entry, fixed = resolve(measure)
    options = {**fixed, **options}
    reps = list(reps)
    if not reps:
        raise ValueError("pairwise: need at least one representation")
    count, n = len(reps), reps[0].shape[0] if reps[0].ndim == 2 else -1
    for r in reps:  # same validation as the pair calls, once per representation
        check_pair(reps[0], r, measure=entry.name, min_n=entry.min_n, allow_constant=True)
    out = torch.full((count, count), math.nan, dtype=F64, device=reps[0].device)
    prepared = _prepared(entry.name, options, n)
    if prepared is not None:
        prepare, combine = prepared
        states = []
        for r in reps:
            try:
                check_pair(r, r, measure=entry.name, min_n=entry.min_n)  # constant representations raise
                states.append(prepare(r))
            except ValueError:
                if errors == "raise":
                    raise
                states.append(None)  # its row and column stay NaN
        for i in range(count):
            for j in range(i, count):
                if states[i] is not None and states[j] is not None:
                    out[i, j] = out[j, i] = combine(states[i], states[j])
        return out
    fn = entry.fn
    for i in range(count):
        for j in range(i if entry.symmetric else 0, count):
            try:
                value = fn(reps[i], reps[j], **options)
            except ValueError:
                if errors == "raise":
                    raise
                continue
            out[i, j] = value
            if entry.symmetric:
                out[j, i] = value
    return out
