"""Results of a measurement that has no number: one of its models is not finite.

A model with a NaN or an infinity in a weight, a buffer or its outputs (``stir.models.finite``)
gives NaN representations, and argmax still picks a class of NaN logits: prediction agreement,
controversial difficulty and the early steps of an inversion would then report numbers that
mean nothing. Such a measurement is not made at all: every derived number is NaN (counts of
work done are 0), the same ``DirectionResult`` / ``SimilarityResult`` shape as a measured one, with
the reason in its notes. Nothing is inverted, and nothing is stored (the result costs nothing to
make again, and a stored entry made before this check is never served for such a model).
``evaluate.py`` with ``allow_nonfinite=false`` (its default) refuses such a model instead
(``NonFiniteOnImagesError``, one line, exit 2): the NaN results are for ``allow_nonfinite=true``
and for the library, which has no such setting.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

from torch import nn

from stir.measure.calibration import Calibration
from stir.measure.plan import Plan
from stir.measure.results import DirectionResult, SimilarityResult, Stat
from stir.models.finite import nonfinite_reason

PROBE = 4  # images of X the outputs are checked on
_NAN = math.nan
_CENSORED = ("fraction", "median", "median_censored", "restricted_mean", "max_distance", "median_low", "median_high",
             "restricted_mean_low", "restricted_mean_high")


class NonFiniteOnImagesError(ValueError):
    """A model passed the load check (on noise images) but is not finite on the images of X, and
    ``allow_nonfinite`` is false: evaluate.py says so in one line and exits 2."""


def nonfinite_models(plan: Plan, models: Sequence[Tuple[str, nn.Module]], taps: Sequence[str] = ()) -> Optional[str]:
    """"model 'm2' is not finite (parameter conv.weight (8, 3, 3, 3): 1 NaN, 0 Inf of 216)" for the
    first of ``models`` whose tensors, or outputs on the first images of X, or reading at its tap
    (``taps[i]`` of ``models[i]``), are not finite; else None."""
    probe = plan.images[:PROBE]
    for i, (name, module) in enumerate(models):
        reason = nonfinite_reason(module, probe, taps[i:i + 1])
        if reason is not None:
            return f"model {name!r} is not finite ({reason})"
    return None


def _stat(k: int) -> Stat:
    return Stat(_NAN, _NAN, [_NAN] * k)


def _calibration(plan: Plan) -> Calibration:
    cal = plan.estimator.calibration
    return Calibration(
        value=_NAN, floor=_NAN, floor_std=_NAN, floor_images=_NAN, floor_iris=_NAN, ceiling=_NAN,
        ceiling_independent=_NAN, ceiling_same_draws=_NAN, normalised=_NAN, low=_NAN, high=_NAN,
        normalised_low=_NAN, normalised_high=_NAN, confidence=cal.confidence, resamples=0,
        method="not computed: a model is not finite", floor_reading=cal.floor, ceiling_reading=cal.ceiling,
        interval_reading=cal.interval)


def _convergence(plan: Plan) -> Dict[str, List[float]]:
    steps = [float(t) for t in plan.cfg.snapshot_steps]
    nan = [_NAN] * len(steps)
    return {"steps": steps, "stir": list(nan), "stir_std": list(nan), "median_residual": list(nan),
            "fraction_iri": list(nan)}


def undefined_direction(plan: Plan, names: Tuple[str, str], ids: Tuple[str, str], taps: Tuple[str, str],
                        reason: str) -> DirectionResult:
    """The ``DirectionResult`` of ``measure_direction`` with every number NaN and ``reason`` in its notes."""
    est = plan.estimator
    kinds = [kind for kind, on in (("arbitrary", est.arbitrary), ("adversarial", est.adversarial)) if on]
    quality = {kind: {"median_residual": _NAN, "fraction_iri": _NAN, "fraction_iri_std": _NAN, "evaluations": 0.0}
               for kind in kinds}
    calibration = {} if plan.resampled else {  # as measure_direction: every kind calibrated on one fixed X
        name: _calibration(plan) for name, kind in (("stir", "arbitrary"), ("stir_adv", "adversarial")) if kind in kinds}
    note = f"{reason}: every number of this direction is NaN; nothing was inverted"
    return DirectionResult(
        ref=names[0], target=names[1], ref_id=ids[0], target_id=ids[1], tap_ref=taps[0], tap_target=taps[1],
        measure=est.measure, n=plan.n, k=est.k, iri=est.iri,
        stir=_stat(est.k) if est.arbitrary else None,
        stir_adv=_stat(est.k) if est.adversarial else None,
        agreement=_stat(est.k) if est.arbitrary else None,
        difficulty=_stat(est.k) if est.adversarial else None,
        difficulty_fraction=_stat(est.k) if est.adversarial else None,
        difficulty_censored={reading: dict.fromkeys(_CENSORED, _NAN) for reading in ("walk", "perturbation")}
        if est.adversarial else {},
        quality=quality, convergence={kind: _convergence(plan) for kind in kinds}, calibration=calibration,
        notes=[note], settings={**plan.settings, "fake_relu_applied": {}})


def undefined_similarity(plan: Plan, names: Tuple[str, str], ids: Tuple[str, str], taps: Tuple[str, str],
                         reason: str) -> SimilarityResult:
    """The plain similarity as NaN with ``reason``."""
    return SimilarityResult(names[0], names[1], ids[0], ids[1], taps[0], taps[1], plan.measure, plan.n, _NAN,
                            [f"{reason}: the similarity is NaN"])
