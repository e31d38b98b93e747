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
    # without replacement, value +- z se: 94-100%, too wide from k = 2; kept because every shipped result,
    # zoo/store, was measured under it: profile=laptop names it, docs/benchmarks/calibration.md)
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
