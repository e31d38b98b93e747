"""k-NN measures that read the order of the neighbour lists: joint rank-Jaccard and the longest common subsequence.

Neighbours as in :mod:`.neighbours` (cosine similarity of the rows, each sample's own
row excluded, nearest first; defined up to ties). Shared by every measure here:
x (n, d1), y (n, d2) with n >= k + 1; a row that is all zeros raises ValueError.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._linalg import F64
from .neighbours import _matches, _pair, rank_scores
from .spec import INF, PLATONIC, RESI, ROWS, declare, measure

__all__ = ["joint_rank_jaccard", "lcs_knn"]


@measure(family="neighbours", symmetric=True, distance=False, range=(0, 1), identity=1.0, invariances=ROWS,
         reference=RESI, min_n=11, judging_default=False)
def joint_rank_jaccard(x: Tensor, y: Tensor, *, k: int = 10) -> Tensor:
    r"""Joint rank-Jaccard similarity of the k-NN lists (ReSi's ``joint_rank_jaccard_similarity``).

    The product, per sample, of the Jaccard similarity of the two neighbour sets and
    the rank similarity of the shared neighbours (:func:`~stir.similarity.jaccard_knn`,
    :func:`~stir.similarity.rank_similarity`; Wang et al. 2020)::

        JRJ(X, Y) = (1/n) sum_i  m_i / (2k - m_i)  *  s_i,   m_i = |N^X(i) intersect N^Y(i)|

    with s_i the rank score of :func:`~stir.similarity.rank_similarity` (0 when m_i = 0).
    ReSi (mklabunde/resi @ 24ab9e5, repsim/measures/nearest_neighbor.py) defines the
    function but lists no measure class for it.

    Shapes: x (n, d1), y (n, d2), n >= k + 1 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, isotropic scaling, permutations. Not to translations.
    Range [0, 1]; 1 for identical representations. Symmetric.
    """
    nx, ny = _pair(x, y, k, "joint_rank_jaccard")
    s, m = rank_scores(nx, ny, k)
    m = m.to(F64)
    return (m / (2 * k - m) * s).mean()


def _lcs_lengths(nx: Tensor, ny: Tensor) -> Tensor:
    """Length (n,) of the longest common subsequence of each pair of rows of nx, ny (n, k)."""
    eq = _matches(nx, ny)  # (n, k, k): nx[i, a] == ny[i, b]
    n, k = nx.shape
    prev = torch.zeros((n, k + 1), dtype=torch.long, device=nx.device)  # row a - 1 of the DP table
    for a in range(k):
        cur = torch.zeros_like(prev)
        for b in range(k):
            cur[:, b + 1] = torch.where(eq[:, a, b], prev[:, b] + 1, torch.maximum(prev[:, b + 1], cur[:, b]))
        prev = cur
    return prev[:, k]


@measure(family="neighbours", symmetric=True, distance=False, range=(0, 1), identity=1.0, invariances=ROWS,
         reference=PLATONIC, min_n=11, judging_default=False)
def lcs_knn(x: Tensor, y: Tensor, *, k: int = 10, normalize: bool = True) -> Tensor:
    r"""Longest-common-subsequence k-NN alignment (platonic-rep's ``lcs_knn``; Huh et al., ICML 2024).

    With N^X(i) = (j_1, ..., j_k) the k cosine nearest neighbours of sample i in x,
    nearest first (itself excluded), and LCS the length of the longest common
    subsequence of two sequences (the classic dynamic programme)::

        lcs(X, Y) = (1/n) sum_i LCS(N^X(i), N^Y(i)) / k

    ``normalize=False`` drops the 1/k: platonic-rep (minyoungg/platonic-rep @ dcd76ba,
    metrics.py ``lcs_knn``) returns the mean length, in [0, k], which is what the id
    ``measure/platonic/lcs_knn-topk=...`` and the name ``lcs_knn_length`` give. Order
    matters, unlike :func:`~stir.similarity.mutual_knn` (which is the same mean count of
    shared neighbours without it, so lcs_knn <= mutual_knn).

    Shapes: x (n, d1), y (n, d2), n >= k + 1 -> 0-d float64 tensor. Cost O(n k^2) after the search.
    Invariant to: orthogonal transforms, isotropic scaling, permutations. Not to translations.
    Range [0, 1] (``normalize=False``: [0, k]); 1 (k) for identical representations. Symmetric.
    """
    nx, ny = _pair(x, y, k, "lcs_knn")
    mean = _lcs_lengths(nx, ny).to(F64).mean()
    return mean / k if normalize else mean


declare("lcs_knn_length", lcs_knn, options={"normalize": False}, family="neighbours", symmetric=True,
        distance=False, range=(0, INF), identity=None, invariances=ROWS, reference=PLATONIC, min_n=11,
        judging_default=False)
