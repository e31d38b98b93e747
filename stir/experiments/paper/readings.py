"""The paper report's readings, shared by every claim group's module: a stored value with its
calibrated interval (``reading``, ``direction_reading``, ``calibrated``), a recipe's value over its seed
pairs (``over_seed_pairs``: random effects), differences and means of intervals, a cell's text, and
``Evidence`` (what one claim is judged on).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Tuple

from stir.experiments.context import Context
from stir.experiments.intervals import from_se as _from_se, se as _se
from stir.measure.calibration import Calibration
from stir.measure.results import DirectionResult, Stat
from stir.measure.seeds import SeedEstimate, seed_estimate, z_value
from stir.paper import Interval

NAN = math.nan
ONE_PAIR = "one seed pair: between-seed spread not measured"
SHARED = ("the seed pairs of one recipe share models ((a, b), (a, c), (b, c)): they are not independent, "
          "so the random-effects interval over them is somewhat too narrow")
DISJOINT = "the seed pairs share no model ((a_i, b_i) by seed): they are independent"
# What a claim says of models that are here but whose results are not (experiment.stored_only).
NOT_STORED = "not measured in this report (not in the results store yet)"

def confidence_z(ctx: Context) -> float:
    return z_value(ctx.estimator.calibration.confidence)


def reading(stat: Optional[Stat], cal: Optional[Calibration]) -> Interval:
    """A value with its calibrated interval (over images and draws); NaN: not measured."""
    if stat is None or cal is None or not math.isfinite(stat.mean):
        return Interval(NAN, NAN, NAN)
    low, high = min(cal.low, stat.mean), max(cal.high, stat.mean)
    return Interval(stat.mean, low, high)

def arm_estimate(values: Sequence[Interval], confidence: float) -> Optional[SeedEstimate]:
    """The random-effects estimate over an arm's measured seed pairs; None where none is measured.
    A value without spread (CKA of one pair) has standard error 0, kept at 1e-12 for the weights."""
    measured = [i for i in values if i.measured]
    if not measured:
        return None
    ses = [max(_se(i, confidence), 1e-12) for i in measured]
    return seed_estimate([i.value for i in measured], ses, confidence)

def over_seed_pairs(values: Sequence[Interval], confidence: float,
                    pairs: Optional[Sequence[Tuple[str, str]]] = None) -> Tuple[Interval, str, float]:
    """(a recipe's value over its seed pairs, what its interval holds, tau): the random-effects
    estimate for two or more pairs; the one pair's own interval otherwise. ``pairs`` (the models of
    each value, in order) says whether the pairs share models: a recipe's (a, b), (a, c), (b, c) do,
    AT vs vanilla's (at_i, vanilla_i) do not; without them the pairs are read as sharing."""
    kept = [k for k, i in enumerate(values) if i.measured]
    measured = [values[k] for k in kept]
    if not measured:
        return Interval(NAN, NAN, NAN), "not measured", NAN
    if len(measured) == 1:
        return measured[0], f"{ONE_PAIR} (interval over images and draws of that pair)", NAN
    est = arm_estimate(measured, confidence)
    models = [m for k in kept for m in pairs[k]] if pairs is not None else []
    disjoint = pairs is not None and len(models) == len(set(models))  # the measured pairs share no model
    return (Interval(est.mean, min(est.low, est.mean), max(est.high, est.mean)),
            est.method + "; " + (DISJOINT if disjoint else SHARED), est.tau)


def difference_of(a: Interval, b: Interval, z: float, confidence: float) -> Interval:
    """a - b, se = sqrt(se_a^2 + se_b^2) (the two read as independent)."""
    return _from_se(a.value - b.value, math.hypot(_se(a, confidence), _se(b, confidence)), z)


def cell_text(i: Interval) -> str:
    if not i.measured:
        return "not measured"
    return f"{i.value:.3f}" if i.low == i.high else str(i)  # a value without spread (CKA of one pair)

@dataclass
class Evidence:
    """What one claim is judged on: the verdict function's argument, or the reason there is none."""

    evidence: Any = None
    missing: str = ""
    notes: List[str] = field(default_factory=list)


def direction_reading(d: Optional[DirectionResult], name: str = "stir") -> Interval:
    if d is None:
        return Interval(NAN, NAN, NAN)
    return reading(getattr(d, name), d.calibration.get(name))

def calibrated(d: Optional[DirectionResult], reading: str, name: str = "stir") -> Interval:
    """A direction's calibrated reading of ``name`` ("normalised" or "chance_corrected",
    ``stir.measure.calibration``) with its interval from the same resamples; NaN: not measured (a
    result stored before that reading existed, or an undefined one)."""
    cal = d.calibration.get(name) if d is not None else None
    if cal is None:
        return Interval(NAN, NAN, NAN)
    value, low, high = getattr(cal, reading), getattr(cal, f"{reading}_low"), getattr(cal, f"{reading}_high")
    if not (math.isfinite(value) and math.isfinite(low) and math.isfinite(high)):
        return Interval(NAN, NAN, NAN)
    return Interval(value, min(low, value), max(high, value))

def positions_held(n: int, shared: bool = False) -> str:
    """What an interval pooled over n training-seed positions holds (claims 11, 12)."""
    if n == 1:
        return "one seed position: between-seed spread not measured (interval over images and draws of its models)"
    return (f"random effects over {n} seed positions (Hartung-Knapp interval on {n - 1} df): holds the between-seed "
            "and the image-level variance; " + ("the positions share models: not independent" if shared
                                                else "the positions share no model: independent"))


def mean_of(values: List[Interval], z: float, conf: float) -> Interval:
    """The mean of several values, se = sqrt(sum se_i^2) / m (read as independent)."""
    if not values or not all(i.measured for i in values):
        return Interval(NAN, NAN, NAN)
    m = len(values)
    return _from_se(sum(i.value for i in values) / m, math.sqrt(sum(_se(i, conf) ** 2 for i in values)) / m, z)
