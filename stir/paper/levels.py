"""Verdicts on the claims that state a level or a band (issue 52's claims 13-21): pure functions of
intervals, as ``stir.paper.verdicts``.

``within_band``: every value's interval inside [low, high] holds; one entirely outside contradicts;
otherwise not resolved. "high" is [HIGH_STIR, inf), "around 0.5" is [0.3, 0.7], "similar accuracy"
is a gap in [-0.05, 0.05]. ``spread_small``: a spread over draws (no interval of its own) read as a
point against a bound.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from stir.paper.verdicts import FAILS, HOLDS, NOT_RESOLVED, Interval, Verdict, _side, _unmeasured, not_testable

# "around 0.5" (section 5.3, claim 13): the band a line of best fit "around 0.5" reads in, half-width 0.2.
AROUND_HALF = (0.3, 0.7)
# "similar clean and robust accuracy" (section 5.3, claim 21): a gap within 5 accuracy points.
SIMILAR_ACCURACY = 0.05
# "fairly stable estimates" over seeds of X' (section 2.3, claim 14): the sd of STIR over the k draws
# below this: the paper's largest printed STIR spread over its 5 runs is 0.023 (Table 1), and 0.05
# (twice the largest) is "fairly".
STABLE_SD = 0.05


@dataclass(frozen=True)
class LevelEvidence:
    """Values that should each lie in [low, high] (``what`` names the band in words)."""

    values: Mapping[str, Interval]
    low: float
    high: float
    what: str


def within_band(e: LevelEvidence) -> Verdict:
    """Every interval inside [low, high]: holds; one entirely outside: contradicted; else not resolved."""
    if not e.values:
        return not_testable(f"no values for '{e.what}'")
    named = dict(e.values)
    return _unmeasured(named) or _side(
        named, lambda i: i.low >= e.low and i.high <= e.high, lambda i: i.high < e.low or i.low > e.high, e.what)


@dataclass(frozen=True)
class SpreadEvidence:
    """Per direction, the sd of STIR over its k draws of X' (one sd each; no interval)."""

    sd: Mapping[str, float]
    draws: int
    bound: float = STABLE_SD


def spread_small(e: SpreadEvidence) -> Verdict:
    """Claim 14: STIR is stable over the seeds of X': every direction's sd over its draws below ``bound``.
    With k = 2 draws an sd is |a - b| / 2: a point reading, so the largest is compared with the bound."""
    values = {k: s for k, s in e.sd.items() if math.isfinite(s)}
    if not values or e.draws < 2:
        return not_testable(f"{e.draws} draw(s) of X' per direction: a spread over seeds needs 2 or more")
    worst = max(values, key=values.get)
    numbers = {"draws": e.draws, "directions": len(values), "largest sd": values[worst],
               "median sd": sorted(values.values())[len(values) // 2]}
    text = (f"sd of STIR over k = {e.draws} draws of X' in {len(values)} directions: largest {values[worst]:.3f} "
            f"({worst}), median {numbers['median sd']:.3f}, bound {e.bound}")
    if values[worst] < e.bound:
        return Verdict(HOLDS, text, numbers)
    over = sum(s >= e.bound for s in values.values())
    if over > len(values) / 2:
        return Verdict(FAILS, f"contradicted: {text}; {over} directions at or above it", numbers)
    return Verdict(FAILS, f"{NOT_RESOLVED}: {text}; {over} of {len(values)} directions at or above it "
                          f"(k = {e.draws}: each sd is one pair of draws)", numbers)


@dataclass(frozen=True)
class RiseEvidence:
    """Per family, a curve of (training-set size, STIR) whose fitted rise (``verdicts.trend``) is judged."""

    curves: Mapping[str, object]  # family -> [(size, Interval)]


def rises(e: RiseEvidence) -> Verdict:
    """Claim 16: STIR(m_t-1|m_t) rises with the data in every family (Theil-Sen rise interval above 0;
    below 0: contradicted; else not resolved). The plateau is claim 8's."""
    from stir.paper.verdicts import trend

    if not e.curves:
        return not_testable("no incremental-data curves")
    rises_ = {}
    for family, curve in e.curves.items():
        points = sorted(curve, key=lambda p: p[0])
        missing = _unmeasured({f"{family} n={n}": i for n, i in points})
        if missing:
            return missing
        if len(points) < 3:
            return not_testable(f"{family}: {len(points)} links; a rise needs 3 or more")
        rises_[f"{family} fitted rise"] = trend(points)
    return _side(rises_, lambda i: i.above(0.0), lambda i: i.below(0.0), "the fitted rise above 0")
