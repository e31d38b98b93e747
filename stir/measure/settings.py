"""What a STIR value's calibration is asked to do (``calibration.*`` of evaluate.py): plain data, no torch,
so that the command line is checked against it before torch is imported (``stir.measure.calibration``
does the work)."""
from __future__ import annotations

import math
from dataclasses import dataclass

CEILINGS = ("same_draws", "independent", "none")
FLOORS = ("iris", "images")
INTERVALS = ("half_sampling", "jackknife_corrected")
# Interval readings that were offered and failed their coverage check (bench/bench_coverage.py, issue 53): refused
# with the reason and the reading to use; results stored under them stay readable (Calibration.from_dict).
RETIRED = {
    "bootstrap": "its percentile interval of rows drawn with replacement covered 0-17% at the null (duplicated rows "
                 "raise linear CKA)",
    "jackknife": "the plain delete-one jackknife was 1.4 times too wide at the null (97-99% coverage)",
}
# Interval readings that failed their coverage check but under which shipped results were measured (zoo/store):
# a run under one is served those results, but measures nothing new (``refuse_new_measurement``); the store keys
# name the reading, so the shipped zoo stays served under profile=laptop while every new number is calibrated.
SERVED_ONLY = {
    "half_sampling": "it covers 94-100% by simulation, outside 92-98% in 23 of 40 cells at n = 100 (k = 1-5), "
                     "up to 2.5 times too wide (docs/benchmarks/calibration.md)",
}


class ServedOnlyReading(ValueError):
    """A measurement asked for under a reading of ``SERVED_ONLY``: the user's to fix (one line, exit 2)."""


def refuse_new_measurement(calibration: "CalibrationConfig", what: str) -> None:
    """Raise ``ServedOnlyReading`` if ``what`` (e.g. "STIR(b|a) at (penultimate, penultimate)"), not in the store,
    would be measured under a served-only interval reading; nothing is measured or written before it."""
    if calibration.interval in SERVED_ONLY and calibration.resamples > 0:
        raise ServedOnlyReading(
            f"calibration.interval={calibration.interval} serves the shipped results only: "
            f"{SERVED_ONLY[calibration.interval]}; {what} is not stored under it, so add "
            f"calibration.interval=jackknife_corrected to measure it (profile=laptop names half_sampling to serve the "
            f"shipped zoo)")


# The most permutations or resamples a calibration draws: far beyond any precision they buy (1000
# resamples give the interval's ends to about 1%), and within memory at n in the thousands.
MAX_DRAWS = 100_000


@dataclass
class CalibrationConfig:
    """How every STIR and STIR_adv value is calibrated (``stir.measure.calibration``'s docstring); ``calibration.*`` of
    evaluate.py. Part of the store key."""

    permutations: int = 199  # P: permutations of the p-value and the floors' spread (and of a floor with no closed form); 0: none
    floor: str = "iris"  # iris (S_r(m2(X), m2(X')[pi]): the pairing broken) | images (S_r(m2(X), m2(X)[pi])): which reading normalises
    ceiling: str = "same_draws"  # same_draws (m1 on the k draws) | independent (one more seed draw of m1) | none
    resamples: int = 1000  # B: resamples of the interval (0: no interval)
    interval: str = "jackknife_corrected"  # jackknife_corrected (delete-one over images, the k draws nested in
    # them, less half its Efron-Stein bias: coverage 92-97.5% by simulation, issue 53) | half_sampling (n/2 rows
    # without replacement, value +- z se: 94-100%, too wide from k = 2; served only (SERVED_ONLY): every shipped
    # result, zoo/store, was measured under it, profile=laptop names it, nothing new is measured under it)
    confidence: float = 0.95  # the interval's nominal coverage
    guard: float = 3.0  # the ceiling must stand this many permutation sds above its own floor, or normalised is NaN
    seed: int = 0  # the generator of the permutations and the resamples

    def __post_init__(self) -> None:
        if self.permutations < 0 or self.resamples < 0:
            raise ValueError(f"calibration.permutations and calibration.resamples must be >= 0, got "
                             f"{self.permutations}, {self.resamples}")
        for key, value in (("permutations", self.permutations), ("resamples", self.resamples)):
            if value > MAX_DRAWS:  # each is a (draws, n) index tensor and as many similarity evaluations
                raise ValueError(f"calibration.{key}={value} is beyond {MAX_DRAWS:,}: the interval and the p-value "
                                 f"settle long before (the defaults: 199 permutations, 1000 resamples); lower it")
        if self.floor not in FLOORS:
            raise ValueError(f"calibration.floor must be one of {FLOORS}, got {self.floor!r}")
        if self.ceiling not in CEILINGS:
            raise ValueError(f"calibration.ceiling must be one of {CEILINGS}, got {self.ceiling!r}")
        if self.interval in RETIRED:
            raise ValueError(f"calibration.interval={self.interval} is retired: {RETIRED[self.interval]} "
                             f"(docs/benchmarks/calibration.md); use calibration.interval=jackknife_corrected")
        if self.interval not in INTERVALS:
            raise ValueError(f"calibration.interval must be one of {INTERVALS}, got {self.interval!r}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"calibration.confidence must be in (0, 1), got {self.confidence}")
        if not (self.guard >= 0 and math.isfinite(self.guard)):
            raise ValueError(f"calibration.guard must be a finite number >= 0, got {self.guard}")
