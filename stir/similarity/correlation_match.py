"""Neuron matching by correlation: hard (one-to-one) and soft (best match) correlation match (Li et al., ICLR 2016).

Both start from the Pearson correlations of every neuron (column) of x with every
neuron of y, as ReSi's ``hard_correlation_match`` and ``soft_correlation_match``
(mklabunde/resi @ 24ab9e5, repsim/measures/correlation_match.py) compute them: the
cosine of the centred columns, clipped to [-1, 1]. A constant neuron (a dead ReLU
unit, say) correlates 0 with every neuron, as there (scikit-learn's cosine of a zero
vector). Shared: x (n, d1), y (n, d2), n >= 2; invariant to permutations of neurons,
isotropic scaling and translations, not to rotations.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import Tensor

from ._checks import check_pair
from ._linalg import centred
from .spec import RESI, measure

__all__ = ["correlation_matrix", "hard_correlation_match", "soft_correlation_match"]

_MATCH = frozenset({"permutation", "isotropic_scaling", "translation"})


def correlation_matrix(x: Tensor, y: Tensor) -> Tensor:
    """Pearson correlations (d1, d2) float64 of the columns of x (n, d1) with those of y (n, d2).

    A constant column correlates 0 (scikit-learn's cosine of a zero vector, as in ReSi).
    """
    xc, yc = centred(x), centred(y)  # float64
    nx, ny = torch.linalg.vector_norm(xc, dim=0), torch.linalg.vector_norm(yc, dim=0)  # (d1,), (d2,)
    xc = xc / torch.where(nx > 0, nx, torch.ones_like(nx))
    yc = yc / torch.where(ny > 0, ny, torch.ones_like(ny))
    return (xc.T @ yc).clamp(-1.0, 1.0)


@measure(family="correlation_match", symmetric=True, distance=False, range=(-1, 1), identity=1.0,
         invariances=_MATCH, reference=RESI, assignment=True, judging_default=False)
def hard_correlation_match(x: Tensor, y: Tensor) -> Tensor:
    r"""Hard correlation match: the mean correlation of the best one-to-one matching of neurons.

    With C_ab = corr(x_{:,a}, y_{:,b}) (d1, d2) and M the matchings of min(d1, d2) pairs
    (Hungarian algorithm, ``scipy.optimize.linear_sum_assignment``, on the CPU)::

        HCM(X, Y) = max_{M} (1 / min(d1, d2)) sum_{(a, b) in M} C_ab

    Li, Yosinski, Clune, Lipson & Hopcroft (ICLR 2016, "Convergent learning"); ReSi's
    HardCorrelationMatch. The neurons of the wider side left unmatched do not count.

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor. Cost O(n d1 d2 + d^3).
    Invariant to: permutations, isotropic scaling, translations. Not to rotations.
    Range [-1, 1]; 1 for identical representations without constant neurons. Symmetric.
    """
    check_pair(x, y, measure="hard_correlation_match")
    c = correlation_matrix(x, y)
    rows, cols = linear_sum_assignment(c.detach().cpu().numpy(), maximize=True)
    index = (torch.as_tensor(np.asarray(rows), device=c.device), torch.as_tensor(np.asarray(cols), device=c.device))
    return c[index].mean()


@measure(family="correlation_match", symmetric=True, distance=False, range=(-1, 1), identity=1.0,
         invariances=_MATCH, reference=RESI, judging_default=False)
def soft_correlation_match(x: Tensor, y: Tensor) -> Tensor:
    r"""Soft correlation match: each neuron's best correlation on the other side, averaged both ways.

    With C_ab = corr(x_{:,a}, y_{:,b}) (d1, d2)::

        SCM(X, Y) = ( (1/d1) sum_a max_b C_ab + (1/d2) sum_b max_a C_ab ) / 2

    Li et al. (ICLR 2016, "Convergent learning", the semi-matching); ReSi's
    SoftCorrelationMatch, which averages the two directions to make it symmetric.

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor. Cost O(n d1 d2).
    Invariant to: permutations, isotropic scaling, translations. Not to rotations.
    Range [-1, 1]; 1 for identical representations without constant neurons. Symmetric.
    """
    check_pair(x, y, measure="soft_correlation_match")
    c = correlation_matrix(x, y)
    return (c.max(dim=1).values.mean() + c.max(dim=0).values.mean()) / 2
