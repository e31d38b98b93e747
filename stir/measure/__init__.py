"""STIR as a library on ``nn.Module``s: no Hydra, no session, no files (but an optional results store).

Nanda et al., ICML 2022. Modules, bottom up: ``calibration`` (floor, ceiling, interval of a value),
``plan`` (what is measured: ``Estimator``; the checked inputs of one call; the store keys),
``observe`` (representations, predictions, a measure's value), ``convergence`` (IRI quality, STIR
along the budget), ``direction`` (one direction: STIR, STIR_adv, agreement, difficulty), ``similarity``
(plain S_r), ``pair`` (both directions + similarity), ``layers`` (every corresponding tap), ``results``.

Public API:
    evaluate_direction(ref, target, images, tap_ref, tap_target, estimator, *, run, names, ids, store, record)
        -> DirectionResult      STIR(tgt|ref) (eq. 6), STIR_adv (eq. 7), agreement, difficulty, quality, calibration
    evaluate_similarity(m1, m2, images, tap1, tap2, measure, ...) -> SimilarityResult     plain S_r(m1(X), m2(X))
    evaluate_pair(m1, m2, images, tap1, tap2, estimator, *, directions, ...) -> PairResult
    evaluate_layers(m1, m2, images, estimator, *, taps, reduce, count, ...) -> LayerwiseResult
    evaluate_delta(ref, target, images, tap_ref, tap_target, cfg, *, names, ids, store, record) -> DeltaResult
                                Table 3's Delta (appendix C, eq. 8): mean ||x - x_c||_2, interval over images
    Estimator(measure, k, iri, inversion, difficulty, min_fraction_iri, calibration)
    CalibrationConfig, Calibration, calibrate          what a STIR value means
"""
from stir.lazy import lazy_attributes

from stir.measure.settings import CalibrationConfig

# Imported on first use (PEP 562), so that stir.measure.settings is read without torch.
_LAZY = {
    "Calibration": "stir.measure.calibration",
    "calibrate": "stir.measure.calibration",
    "evaluate_direction": "stir.measure.direction",
    "DeltaResult": "stir.measure.delta",
    "evaluate_delta": "stir.measure.delta",
    "evaluate_layers": "stir.measure.layers",
    "fit_slope": "stir.measure.layers",
    "slope_reason": "stir.measure.layers",
    "evaluate_pair": "stir.measure.pair",
    "DEFAULT_TAP": "stir.measure.plan",
    "IRI_KINDS": "stir.measure.plan",
    "Estimator": "stir.measure.plan",
    "Plan": "stir.measure.plan",
    "make_plan": "stir.measure.plan",
    "DIRECTIONS": "stir.measure.results",
    "DirectionResult": "stir.measure.results",
    "LayerwiseResult": "stir.measure.results",
    "PairResult": "stir.measure.results",
    "SimilarityResult": "stir.measure.results",
    "Stat": "stir.measure.results",
    "evaluate_similarity": "stir.measure.similarity",
}

__all__ = [
    "DEFAULT_TAP", "DIRECTIONS", "IRI_KINDS", "Calibration", "CalibrationConfig", "DeltaResult", "DirectionResult",
    "Estimator", "LayerwiseResult", "PairResult", "Plan", "SimilarityResult", "Stat", "calibrate", "evaluate_direction",
    "evaluate_delta", "evaluate_layers", "evaluate_pair", "evaluate_similarity", "fit_slope", "make_plan", "slope_reason",
]


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())
