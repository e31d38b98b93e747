"""Nearest-neighbour measures: how far the k-NN graphs of two representations agree.

Neighbours are by cosine similarity of the rows (no centring), each sample's own
row excluded, as in ReSi (``sklearn.neighbors.NearestNeighbors(metric="cosine")``,
dropping the first neighbour) and in platonic-rep (inner products of the L2-normalised
features with the diagonal masked out). They are found by one matrix product per
block of rows and ``torch.topk`` (memory O(rows x n), never the n x n matrix);
ties between equal similarities are broken by ``torch.topk``, so the value is
defined up to ties (which random continuous data does not have).

Shared by every measure here: x (n, d1), y (n, d2) with n >= k + 1; a row that is
all zeros raises ValueError (its cosine is undefined).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import check_pair
from ._linalg import F64, work_dtype
from .spec import INF, PLATONIC, RESI, ROWS, measure

__all__ = [
    "cknna",
    "cycle_knn",
    "jaccard_knn",
    "knn_indices",
    "mutual_knn",
    "rank_scores",
    "rank_similarity",
    "second_order_cosine",
]

# Elements of one (rows, n) block of similarities.
_BLOCK_ELEMS = 1 << 22


def _unit_rows(x: Tensor, side: str, measure: str, dtype: torch.dtype) -> Tensor:
    """x (n, d) with unit-norm rows, in ``dtype``; ValueError naming a zero row."""
    z = x.to(F64)
    norms = torch.linalg.vector_norm(z, dim=1, keepdim=True)  # (n, 1)
    if not bool((norms > 0).all()):
        row = int((norms[:, 0] == 0).nonzero()[0])
        raise ValueError(f"{measure}: row {row} of {side} is all zeros, so its cosine neighbours are undefined")
    return (z / norms).to(dtype)


def _check_k(k: int, n: int, measure: str, low: int = 1) -> None:
    if not isinstance(k, int) or k < low:
        raise ValueError(f"{measure}: k must be an integer >= {low}, got {k!r}")
    if n < k + 1:
        raise ValueError(f"{measure} needs at least {k + 1} samples (k + 1 for k = {k} neighbours), got {n}")


def _topk_rows(z: Tensor, k: int) -> Tensor:
    """Indices (n, k) of the k largest z_i . z_j over j != i, descending, by blocks of rows."""
    n = z.shape[0]
    out = torch.empty((n, k), dtype=torch.long, device=z.device)
    step = max(1, _BLOCK_ELEMS // n)
    for start in range(0, n, step):
        sims = z[start : start + step] @ z.T  # (b, n)
        b = sims.shape[0]
        sims[torch.arange(b, device=z.device), torch.arange(start, start + b, device=z.device)] = -torch.inf
        out[start : start + b] = torch.topk(sims, k, dim=1, sorted=True).indices
    return out


def knn_indices(x: Tensor, k: int, *, measure: str = "knn_indices") -> Tensor:
    """Cosine k nearest neighbours (n, k) of every row of x (n, d), self excluded, nearest first."""
    dtype = work_dtype(x)
    return _topk_rows(_unit_rows(x, "x", measure, dtype), k)


def _pair(x: Tensor, y: Tensor, k: int, measure: str, low: int = 1) -> tuple[Tensor, Tensor]:
    check_pair(x, y, measure=measure, min_n=2)
    _check_k(k, x.shape[0], measure, low)
    dtype = work_dtype(x, y)
    nx = _topk_rows(_unit_rows(x, "x", measure, dtype), k)
    ny = _topk_rows(_unit_rows(y, "y", measure, dtype), k)
    return nx, ny


def _matches(nx: Tensor, ny: Tensor) -> Tensor:
    """(n, k, k) bool: nx[i, a] == ny[i, b] (each neighbour appears at most once per row)."""
    return nx[:, :, None] == ny[:, None, :]


@measure(family="neighbours", symmetric=True, distance=False, range=(0, 1), identity=1.0, invariances=ROWS,
         reference=PLATONIC, min_n=11, judging_default=True)
def mutual_knn(x: Tensor, y: Tensor, *, k: int = 10) -> Tensor:
    r"""Mutual k-NN alignment (Huh, Cheung, Wang & Isola, ICML 2024, "platonic representations", eq. 11).

    ::

        m(X, Y) = (1/n) sum_i |N_k^X(i) intersect N_k^Y(i)| / k

    with N_k^X(i) the k cosine nearest neighbours of sample i in x (itself
    excluded); platonic-rep's ``mutual_knn`` on L2-normalised features.

    Shapes: x (n, d1), y (n, d2), n >= k + 1 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, isotropic scaling, permutations (and any
    positive rescaling of rows). Not to translations.
    Range [0, 1]; 1 for identical representations. Symmetric.
    """
    nx, ny = _pair(x, y, k, "mutual_knn")
    return _matches(nx, ny).any(dim=2).sum(dim=1).to(F64).mean() / k


@measure(family="neighbours", symmetric=True, distance=False, range=(0, 1), identity=1.0, invariances=ROWS,
         reference=RESI, min_n=11, judging_default=True)
def jaccard_knn(x: Tensor, y: Tensor, *, k: int = 10) -> Tensor:
    r"""Jaccard similarity of the k-NN sets (ReSi's JaccardSimilarity; Schumacher et al. 2021).

    ::

        J(X, Y) = (1/n) sum_i |N^X(i) intersect N^Y(i)| / |N^X(i) union N^Y(i)|

    Shapes: x (n, d1), y (n, d2), n >= k + 1 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, isotropic scaling, permutations. Not to translations.
    Range [0, 1]; 1 for identical representations. Symmetric.
    """
    nx, ny = _pair(x, y, k, "jaccard_knn")
    m = _matches(nx, ny).any(dim=2).sum(dim=1).to(F64)  # (n,) shared neighbours
    return (m / (2 * k - m)).mean()


@measure(family="neighbours", symmetric=False, distance=False, range=(0, 1), identity=None, invariances=ROWS,
         reference=PLATONIC, min_n=11, judging_default=True)
def cycle_knn(x: Tensor, y: Tensor, *, k: int = 10) -> Tensor:
    r"""Cycle k-NN (platonic-rep's ``cycle_knn``): does a neighbour-of-a-neighbour walk return?

    ::

        c(X, Y) = (1/n) sum_i [ i in N^X(j) for some j in N^Y(i) ]

    (first a y-neighbour j of i, then i among the x-neighbours of j).
    Asymmetric. Shapes: x (n, d1), y (n, d2), n >= k + 1 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, isotropic scaling, permutations. Not to translations.
    Range [0, 1]; 1 for identical representations whose k-NN graph has a mutual
    pair at every sample (always for k = n - 1); not guaranteed otherwise.
    """
    nx, ny = _pair(x, y, k, "cycle_knn")
    n = nx.shape[0]
    walk = nx[ny]  # (n, k, k): x-neighbours of each y-neighbour of i
    hit = (walk == torch.arange(n, device=nx.device)[:, None, None]).flatten(1).any(dim=1)
    return hit.to(F64).mean()


@measure(family="neighbours", symmetric=True, distance=False, range=(0, 1), identity=1.0, invariances=ROWS,
         reference=RESI, min_n=11, judging_default=True)
def rank_similarity(x: Tensor, y: Tensor, *, k: int = 10) -> Tensor:
    r"""Rank similarity of the k-NN lists (Wang et al. 2020; ReSi's RankSimilarity).

    For each sample i, the neighbours j in both lists, with ranks r^X_j, r^Y_j in 1..k::

        s_i = (1 / H_{m_i}) sum_{j in N^X(i) and N^Y(i)} 2 / ((1 + |r^X_j - r^Y_j|) (r^X_j + r^Y_j)),
        H_m = sum_{t=1}^{m} 1/t,  m_i = |N^X(i) intersect N^Y(i)|  (s_i = 0 if m_i = 0)
        RS(X, Y) = (1/n) sum_i s_i

    Shapes: x (n, d1), y (n, d2), n >= k + 1 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, isotropic scaling, permutations. Not to translations.
    Range [0, 1]; 1 for identical representations. Symmetric.
    """
    nx, ny = _pair(x, y, k, "rank_similarity")
    return rank_scores(nx, ny, k)[0].mean()


def rank_scores(nx: Tensor, ny: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """(s_i (n,) of :func:`rank_similarity`, m_i (n,) shared neighbours) of the k-NN lists nx, ny (n, k)."""
    eq = _matches(nx, ny).to(F64)  # (n, k, k)
    ranks = torch.arange(1, k + 1, dtype=F64, device=nx.device)
    rx, ry = ranks[None, :, None], ranks[None, None, :]
    score = (eq * 2.0 / ((1.0 + (rx - ry).abs()) * (rx + ry))).sum(dim=(1, 2))  # (n,)
    m = eq.sum(dim=(1, 2)).long()  # (n,) shared neighbours
    harmonic = torch.cat([torch.zeros(1, dtype=F64, device=nx.device), torch.cumsum(1.0 / ranks, 0)])  # H_0..H_k
    h = harmonic[m]
    return torch.where(m > 0, score / h.clamp(min=1.0), torch.zeros_like(score)), m


@measure(family="neighbours", symmetric=True, distance=False, range=(0, 1), identity=1.0, invariances=ROWS,
         reference=RESI, min_n=11, judging_default=True)
def second_order_cosine(x: Tensor, y: Tensor, *, k: int = 10) -> Tensor:
    r"""Second-order cosine similarity (Hamilton, Leskovec & Jurafsky 2016; ReSi's SecondOrderCosineSimilarity).

    For each sample i, U_i = N^X(i) union N^Y(i), and the cosine distances
    a_ij = 1 - cos(x_i, x_j), b_ij = 1 - cos(y_i, y_j) for j in U_i::

        S(X, Y) = (1/n) sum_i cos( (a_ij)_{j in U_i}, (b_ij)_{j in U_i} )

    The gathered vectors have at most 2k entries; duplicates (j in both lists) count once.
    Shapes: x (n, d1), y (n, d2), n >= k + 1 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, isotropic scaling, permutations. Not to translations.
    Range [0, 1] (cosine distances are >= 0); 1 for identical representations. Symmetric.
    """
    measure = "second_order_cosine"
    check_pair(x, y, measure=measure)
    _check_k(k, x.shape[0], measure)
    dtype = work_dtype(x, y)
    zx, zy = _unit_rows(x, "x", measure, dtype), _unit_rows(y, "y", measure, dtype)
    nx, ny = _topk_rows(zx, k), _topk_rows(zy, k)
    cand = torch.cat([nx, ny], dim=1)  # (n, 2k): U_i with y's duplicates masked below
    keep = torch.cat([torch.ones_like(nx, dtype=torch.bool), ~_matches(nx, ny).any(dim=1)], dim=1)
    n = x.shape[0]
    out = torch.empty(n, dtype=F64, device=x.device)
    step = max(1, _BLOCK_ELEMS // (2 * k * max(zx.shape[1], zy.shape[1])))
    for start in range(0, n, step):
        rows = slice(start, start + step)
        c = cand[rows]  # (b, 2k)
        a = 1.0 - torch.einsum("bd,bjd->bj", zx[rows], zx[c]).to(F64)  # cosine distances (b, 2k)
        b = 1.0 - torch.einsum("bd,bjd->bj", zy[rows], zy[c]).to(F64)
        a, b = a * keep[rows], b * keep[rows]
        denom = torch.linalg.vector_norm(a, dim=1) * torch.linalg.vector_norm(b, dim=1)
        if not bool((denom > 0).all()):
            raise ValueError(f"{measure}: a sample's neighbours all have cosine distance 0 (duplicated rows); "
                             "the second-order cosine is undefined")
        out[rows] = (a * b).sum(dim=1) / denom
    return out.mean()


def _hsic_u_sparse(rows: Tensor, cols: Tensor, kv: Tensor, lv: Tensor, n: int) -> Tensor:
    """platonic-rep's unbiased HSIC of two n x n matrices that are zero outside the same entries.

    A_ij = kv, B_ij = lv at (rows, cols) (no diagonal entries), zero elsewhere; A, B need not be
    symmetric. Song et al.'s estimator written as platonic-rep does for such matrices:
        [ sum(A o B^T) + sum(A) sum(B) / ((n-1)(n-2)) - 2/(n-2) sum(A B) ] / (n (n-3))
    with sum(A B) = (A^T 1) . (B 1). sum(A o B^T) pairs entry (i, j) of A with (j, i) of B.
    """
    key = rows * n + cols  # (m,) position of each entry
    order = torch.argsort(key)
    skey = key[order]
    tkey = cols * n + rows  # position of the transposed entry
    pos = torch.searchsorted(skey, tkey).clamp(max=skey.numel() - 1)
    found = skey[pos] == tkey
    bt = torch.where(found, lv[order][pos], torch.zeros_like(lv))  # B_ji for each entry (i, j) of A
    col_a = torch.zeros(n, dtype=F64, device=kv.device).index_add_(0, cols, kv)  # A^T 1
    row_b = torch.zeros(n, dtype=F64, device=kv.device).index_add_(0, rows, lv)  # B 1
    total = (kv * bt).sum() + kv.sum() * lv.sum() / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * torch.dot(col_a, row_b)
    return total / (n * (n - 3))


@measure(family="neighbours", symmetric=False, distance=False, range=(-INF, 1), identity=1.0, invariances=ROWS,
         reference=PLATONIC, min_n=11, judging_default=True)
def cknna(x: Tensor, y: Tensor, *, k: int = 10, normalize: bool = True, eps: float = 0.0) -> Tensor:
    r"""CKNNA: CKA restricted to mutual nearest neighbours (Huh et al., ICML 2024, eq. 12; platonic-rep).

    With K = X X^T, L = Y Y^T (uncentred inner products; of the L2-normalised rows
    when ``normalize``, as platonic-rep's pipeline does) and the mask
    ``alpha_ij = [j in topk_K(i)] [j in topk_L(i)]`` (neighbours by K, L themselves,
    diagonal excluded; masks are row-wise, so alpha o K need not be symmetric)::

        CKNNA(X, Y) = HSIC_1(alpha_KL o K, alpha_KL o L)
                      / sqrt( HSIC_1(alpha_KK o K, alpha_KK o K) HSIC_1(alpha_LL o L, alpha_LL o L) )

    HSIC_1 the unbiased estimator of Song et al. (2012) as platonic-rep writes it
    for non-symmetric matrices (see ``_hsic_u_sparse``), computed on the O(n k)
    masked entries only. A non-positive self term raises ValueError.

    ``eps`` (default 0) is added to the denominator, sqrt(HSIC_KK HSIC_LL) + eps:
    platonic-rep (minyoungg/platonic-rep @ dcd76ba, metrics.py ``cknna``, its
    return line) adds ``eps = 1e-6``, which changes the value of L2-normalised
    features, whose masked HSIC terms are small (about 1e-3 for 40 samples and
    k = 10), in the third decimal; ``eps=1e-6`` reproduces its value.

    Shapes: x (n, d1), y (n, d2), n >= k + 1, k >= 2 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, isotropic scaling, permutations (to scaling
    not exactly with ``normalize=False`` and ``eps > 0``). Not to translations.
    Range: at most 1 in practice (an unbiased estimate; can be negative); 1 for identical
    representations. Slightly asymmetric, as platonic-rep's: for the non-symmetric masked
    matrices its third term (A^T 1).(B 1) changes when A and B swap.
    """
    measure = "cknna"
    check_pair(x, y, measure=measure)
    _check_k(k, x.shape[0], measure, low=2)
    if not eps >= 0.0:
        raise ValueError(f"{measure}: eps must be >= 0 (platonic-rep adds 1e-6), got {eps!r}")
    n = x.shape[0]
    if normalize:
        zx, zy = _unit_rows(x, "x", measure, F64), _unit_rows(y, "y", measure, F64)
    else:
        zx, zy = x.to(F64), y.to(F64)
    dtype = work_dtype(x, y)  # the neighbour search in the work dtype; the kernel values below in float64
    nx, ny = _topk_rows(zx.to(dtype), k), _topk_rows(zy.to(dtype), k)  # by the (normalised) inner products

    def masked(nb: Tensor, keep: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        rows = torch.arange(n, device=x.device)[:, None].expand_as(nb)[keep]
        cols = nb[keep]
        kv = (zx[rows] * zx[cols]).sum(dim=1)  # K_ij on the kept entries
        lv = (zy[rows] * zy[cols]).sum(dim=1)
        return rows, cols, kv, lv

    both = _matches(nx, ny).any(dim=2)  # (n, k): x-neighbour also a y-neighbour
    r, c, kv, lv = masked(nx, both)
    hkl = _hsic_u_sparse(r, c, kv, lv, n)
    r, c, kv, _ = masked(nx, torch.ones_like(both))
    hkk = _hsic_u_sparse(r, c, kv, kv, n)
    r, c, _, lv = masked(ny, torch.ones_like(both))
    hll = _hsic_u_sparse(r, c, lv, lv, n)
    for side, h in (("x", hkk), ("y", hll)):
        if not bool(h > 0):
            raise ValueError(f"{measure}: the masked HSIC of {side} with itself is {float(h):.3g} (not positive), "
                             "so CKNNA is undefined")
    if eps == 0.0:
        return hkl / torch.sqrt(hkk * hll)
    return hkl / (torch.sqrt(hkk * hll) + eps)
