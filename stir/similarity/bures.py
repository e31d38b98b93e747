"""Bures distance between the Gram matrices of two representations (Harvey, Lipshutz & Williams, 2023)."""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import check_pair
from .procrustes import nuclear_terms
from .spec import INF, NETREP, NO_SCALE, RESI, measure

__all__ = ["bures_distance"]


@measure(family="bures", symmetric=True, distance=True, range=(0, INF), identity=0.0, invariances=NO_SCALE,
         reference=f"{RESI}, {NETREP}", metric=True, judging_default=True)
def bures_distance(x: Tensor, y: Tensor, *, form: str = "auto") -> Tensor:
    r"""Bures distance of the centred Gram matrices, = the Procrustes size-and-shape distance.

    With K = Xc Xc^T, L = Yc Yc^T (n, n) of the column-centred inputs::

        d_B(K, L)^2 = tr K + tr L - 2 tr (K^{1/2} L K^{1/2})^{1/2}
                    = ||Xc||_F^2 + ||Yc||_F^2 - 2 ||Xc^T Yc||_*  = min_Q ||Xc - Yc Q||_F^2

    (Harvey et al. 2023, "Duality of Bures and shape distances"; the fidelity
    term is the nuclear norm, Q orthogonal, narrower side zero-padded). Unscaled
    (no 1/n and no unit-norm normalisation), as ReSi's ProcrustesSizeAndShapeDistance
    and netrep's ``LinearMetric(alpha=1, score_method="euclidean")``. Its normalised
    form, the normalized Bures similarity NBS = ||Xc^T Yc||_* / (||Xc|| ||Yc||), is
    :func:`~stir.similarity.procrustes` (also registered under the id ``nbs-score``).
    ``form`` as in :func:`~stir.similarity.procrustes`.

    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: orthogonal transforms, translations, permutations. Not to scaling.
    Range [0, inf); 0 for identical representations. A metric. Symmetric. Lower is more similar.
    """
    check_pair(x, y, measure="bures_distance")
    nuc, fx, fy = nuclear_terms(x, y, form, "bures_distance")
    return torch.sqrt((fx + fy - 2.0 * nuc).clamp(min=0.0))
