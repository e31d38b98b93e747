"""Normal-approximation arithmetic on the paper kind's readings (``stir.paper.Interval``), shared by
the paper report (``stir.experiments.paper``) and its recipe ablation (``stir.experiments.paper.ablation``).

A reading's standard error is recovered from its symmetric interval, se = (high - low) / (2 z) with
z = Phi^-1(0.5 + confidence / 2) (``stir.measure.seeds.standard_error``); a derived value (a
difference, a mean of directions, a gap to CKA) gets value +- z se back. NaN in, NaN out: a value
that was not measured never becomes a number.
"""
from __future__ import annotations

import math
from typing import Optional

from stir.measure.seeds import standard_error
from stir.paper import Interval

NAN = float("nan")


def se(i: Interval, confidence: float) -> float:
    """The standard error behind ``i``'s interval; NaN where ``i`` was not measured."""
    return standard_error(i.low, i.high, confidence) if i.measured else NAN


def from_se(value: float, se_: float, z: float) -> Interval:
    """value +- z se; the not-measured Interval where either is not finite."""
    if not (math.isfinite(value) and math.isfinite(se_)):
        return Interval(NAN, NAN, NAN)
    return Interval(value, value - z * se_, value + z * se_)


def num(x: Optional[float], digits: int = 3) -> str:
    """A table cell: ``x`` to ``digits`` decimals, "-" where it is None or not finite."""
    return f"{x:.{digits}f}" if x is not None and math.isfinite(x) else "-"
