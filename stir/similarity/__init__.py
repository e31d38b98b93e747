"""Representation similarity measures: CKA family, CCA family, regression, Procrustes, G_ReLU.

Every measure is a pure function ``f(x, y) -> 0-d float64 tensor`` of two
representations x (n, d1) and y (n, d2) of the same n inputs (rows paired),
on any device and in any float dtype; options are keyword-only. Similarities
are higher for more similar representations (1 for identical ones); the
``*_distance`` measures are lower for more similar ones (0 for identical).

Example::

    from stir.similarity import get, names
    cka = get("linear_cka")               # the function itself
    rbf = get("rbf_cka", threshold=0.5)   # a functools.partial
    value = cka(x, y)                      # 0-d float64 tensor
"""

from .cca import cca, cca_squared, pwcca, svcca
from .cka import linear_cka, linear_cka_debiased, rbf_cka
from .minibatch import MinibatchCKA
from .procrustes import procrustes, procrustes_distance
from .registry import SYMMETRIC, UnknownMeasureError, get, is_distance, is_symmetric, names
from .regression import linear_regression
from .relu import relu_cka, relu_procrustes, relu_procrustes_distance

__all__ = [
    "SYMMETRIC",
    "MinibatchCKA",
    "UnknownMeasureError",
    "cca",
    "cca_squared",
    "get",
    "is_distance",
    "is_symmetric",
    "linear_cka",
    "linear_cka_debiased",
    "linear_regression",
    "names",
    "procrustes",
    "procrustes_distance",
    "pwcca",
    "rbf_cka",
    "relu_cka",
    "relu_procrustes",
    "relu_procrustes_distance",
    "svcca",
]
