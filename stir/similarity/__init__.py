"""Representation similarity measures: CKA, CCA, regression, Procrustes, G_ReLU, RSA, k-NN, shape metrics, ...

Every measure is a pure function ``f(x, y) -> 0-d float64 tensor`` of two
representations x (n, d1) and y (n, d2) of the same n inputs (rows paired),
on any device and in any float dtype; options are keyword-only. Similarities
are higher for more similar representations (1 for identical ones); distances
(``is_distance(name)``) are lower for more similar ones (0 for identical).
Each registered measure has property flags (:func:`info`): range, symmetry,
metric, invariances, family and the public implementation it is checked against.

Example::

    from stir.similarity import get, names, pairwise
    cka = get("linear_cka")               # the function itself
    rbf = get("rbf_cka", threshold=0.5)   # a functools.partial
    value = cka(x, y)                      # 0-d float64 tensor
    ang = get("measure/netrep/procrustes-distance=angular")   # a similarity-repository id
    names(kind="distance")                 # the registered distances
    grid = pairwise("linear_cka", [a, b, c])                    # (3, 3), one Gram per representation
"""

from .alignment import aligned_cosine, permutation_procrustes, uncentred_procrustes
from .bures import bures_distance
from .cca import cca, cca_squared, pwcca, svcca
from .cka import linear_cka, linear_cka_debiased, rbf_cka
from .cka_distances import cka_angular, cka_euclidean
from .correlation_match import hard_correlation_match, soft_correlation_match
from .distance_correlation import distance_correlation
from .geometry import concentricity_difference, magnitude_difference, uniformity_difference
from .minibatch import MinibatchCKA
from .neighbour_lists import joint_rank_jaccard, lcs_knn
from .neighbours import cknna, cycle_knn, jaccard_knn, mutual_knn, rank_similarity, second_order_cosine
from .pairwise import pairwise
from .predictivity import linear_predictivity
from .procrustes import procrustes, procrustes_distance
from .registry import (
    INVARIANCES,
    SYMMETRIC,
    MeasureInfo,
    UnknownMeasureError,
    get,
    info,
    is_distance,
    is_symmetric,
    names,
)
from .regression import linear_regression
from .relu import relu_cka, relu_procrustes, relu_procrustes_distance
from .rsa import rsa
from .rsm import rsm_norm_difference
from .shape_metrics import permutation_metric, procrustes_angular, shape_metric
from .subspace import eigenspace_overlap, gulp

__all__ = [
    "INVARIANCES",
    "SYMMETRIC",
    "MeasureInfo",
    "MinibatchCKA",
    "UnknownMeasureError",
    "aligned_cosine",
    "bures_distance",
    "cca",
    "cca_squared",
    "cka_angular",
    "cka_euclidean",
    "cknna",
    "concentricity_difference",
    "cycle_knn",
    "distance_correlation",
    "eigenspace_overlap",
    "get",
    "gulp",
    "hard_correlation_match",
    "info",
    "is_distance",
    "is_symmetric",
    "jaccard_knn",
    "joint_rank_jaccard",
    "lcs_knn",
    "linear_cka",
    "linear_cka_debiased",
    "linear_predictivity",
    "linear_regression",
    "magnitude_difference",
    "mutual_knn",
    "names",
    "pairwise",
    "permutation_metric",
    "permutation_procrustes",
    "procrustes",
    "procrustes_angular",
    "procrustes_distance",
    "pwcca",
    "rank_similarity",
    "rbf_cka",
    "relu_cka",
    "relu_procrustes",
    "relu_procrustes_distance",
    "rsa",
    "rsm_norm_difference",
    "second_order_cosine",
    "shape_metric",
    "soft_correlation_match",
    "svcca",
    "uncentred_procrustes",
    "uniformity_difference",
]
