"""STIR evaluation: shared invariance between two networks (Nanda et al., ICML 2022).

Modules, bottom up: ``keys`` (what identifies a measurement), ``observe`` (representations,
predictions, a measure's value), ``convergence`` (IRI quality, STIR along the budget),
``direction`` (one direction: STIR, STIR_adv, agreement, difficulty), ``similarity`` (plain
S_r), ``pair`` (both directions + similarity), ``layers`` (every corresponding tap),
``experiments/`` (what evaluate.py runs), ``publish`` (reports).

Public API:
    evaluate_direction(m_ref, m_tgt, images, tap_ref, tap_tgt, *, measure, k, iri, inversion, ...)
        -> DirectionResult      STIR(tgt|ref) (eq. 6), STIR_adv (eq. 7), agreement, difficulty, quality
    evaluate_similarity(m1, m2, images, tap1, tap2, *, measure, ...) -> SimilarityResult
        plain S_r(m1(X), m2(X))
    evaluate_pair(m1, m2, images, tap1, tap2, *, measure, k, iri, inversion, directions, ...)
        -> PairResult           both directions + plain similarity; ``to_row()`` for tables
    evaluate_layers(m1, m2, images, *, taps, ...) -> LayerwiseResult     per corresponding tap pair,
        with least-squares slopes of STIR over relative depth
    corresponding_taps(taps1, taps2), depth_taps(model), layer_pairs(m1, m2, taps), fit_slope(depths, values)
    ResultStore(root)            one JSON per finished measurement, atomic; resumes after a kill
    make_plan, direction_key, similarity_key     the store keys (to plan or inspect a sweep)
"""
from stir.evaluation.layers import (
    corresponding_taps, depth_taps, evaluate_layers, fit_slope, layer_pairs, relative_depths, slope_reason,
)
from stir.evaluation.pair import (
    DEFAULT_TAP, Plan, direction_key, evaluate_direction, evaluate_pair, evaluate_similarity, make_plan,
    similarity_key,
)
from stir.evaluation.results import (
    DIRECTIONS, IRI_KINDS, DirectionResult, LayerwiseResult, PairResult, SimilarityResult, Stat,
)
from stir.evaluation.store import STORE_VERSION, ResultStore

__all__ = [
    "DEFAULT_TAP", "DIRECTIONS", "IRI_KINDS", "STORE_VERSION",
    "DirectionResult", "LayerwiseResult", "PairResult", "Plan", "ResultStore", "SimilarityResult", "Stat",
    "corresponding_taps", "depth_taps", "direction_key", "evaluate_direction", "evaluate_layers",
    "evaluate_pair", "evaluate_similarity", "fit_slope", "layer_pairs", "make_plan", "relative_depths",
    "similarity_key", "slope_reason",
]
