"""Verdicts on the paper's claims: pure functions of our measured values (with intervals).

Each function takes the evidence one claim needs (a small dataclass of ``Interval``s, built by the
runner from its readings) and returns a ``Verdict``: ``holds``, ``does not hold`` or ``not testable
here``, with the reason and the numbers behind it. A claim holds only where the intervals show it:
an interval that straddles the threshold is "does not hold (not resolved at this budget)", one that
lies on the wrong side is "does not hold (contradicted)"; a value that was not measured (NaN, or no
evidence at all) makes the claim not testable, with the reason.

Notation as in the paper and ``docs/evaluation.md``: STIR(m2|m1) is S_r(m2(X), m2(X')) for IRIs X' of
m1: how much m2 shares m1's invariances.

The qualitative words of the claims ("well below", "high", "near 0", "flat", "tracks", "plateaus")
are the thresholds below, each chosen against the paper's own numbers where it gives them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from scipy import stats

HOLDS, FAILS, NOT_TESTABLE = "holds", "does not hold", "not testable here"
# A claim whose models exist but whose part this report left out (experiment.skip): measurable here,
# not measured yet; never counted as held or failed.
NOT_RUN = "not measured in this report"
# The reason of a FAILS whose interval straddles the threshold (not one on the wrong side: "contradicted").
NOT_RESOLVED = "not resolved at this budget"

# "STIR well below CKA" (claim 1): CKA - STIR above this. The paper's vanilla pair: 0.967 - 0.605 = 0.36.
WELL_BELOW = 0.1
# "STIR high" (claim 2): above this. The paper's AT pair: 0.934 / 0.939.
HIGH_STIR = 0.8
# "STIR_adv near 0" (claim 4): below this. The paper's Table 1 row: 0.05-0.10.
NEAR_ZERO = 0.15
# "flat" (claims 9, 10): |slope of STIR over relative depth 0..1| below this (a change of 0.1 over the network).
FLAT_SLOPE = 0.1
# "tracks" (claims 5, 6): Spearman rank correlation at least this, over at least MIN_POINTS points.
TRACKS_RHO = 0.5
MIN_POINTS = 3
# "plateaus" (claim 8): the fitted rise over the last third of the steps between sizes at most this
# fraction of the whole fitted rise (a straight line's is a third or more at evenly spaced sizes).
PLATEAU_FRACTION = 0.25


@dataclass(frozen=True)
class Interval:
    """A measured value and its interval (e.g. the calibrated reading's bootstrap interval, or one
    that includes the between-seed spread). NaN anywhere: not measured."""

    value: float
    low: float
    high: float

    def __post_init__(self):
        if self.measured and not self.low <= self.value <= self.high:
            raise ValueError(f"interval [{self.low}, {self.high}] does not hold its value {self.value}")

    @property
    def measured(self) -> bool:
        return all(math.isfinite(v) for v in (self.value, self.low, self.high))

    def above(self, threshold: float) -> bool:
        return self.low > threshold

    def below(self, threshold: float) -> bool:
        return self.high < threshold

    def within(self, low: float, high: float) -> bool:
        return self.low >= low and self.high <= high

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


@dataclass(frozen=True)
class Verdict:
    outcome: str  # HOLDS | FAILS | NOT_TESTABLE | NOT_RUN
    reason: str
    numbers: Dict[str, Any] = field(default_factory=dict)  # what the reason rests on, by name

    @property
    def holds(self) -> bool:
        return self.outcome == HOLDS


def not_testable(reason: str, **numbers: Any) -> Verdict:
    return Verdict(NOT_TESTABLE, reason, numbers)


def _unmeasured(named: Mapping[str, Interval]) -> Optional[Verdict]:
    """NOT_TESTABLE naming the values that were not measured (None when all were)."""
    missing = [name for name, v in named.items() if not v.measured]
    if missing:
        return not_testable(f"not measured: {', '.join(missing)}", **{k: str(v) for k, v in named.items()})
    return None


def _side(intervals: Mapping[str, Interval], test, fails, what: str) -> Verdict:
    """HOLDS when ``test`` is true of every interval; else FAILS, 'contradicted' where ``fails`` is
    true of one (its interval on the wrong side), 'not resolved' otherwise."""
    numbers = {k: str(v) for k, v in intervals.items()}
    bad = [k for k, v in intervals.items() if not test(v)]
    if not bad:
        return Verdict(HOLDS, f"{what}: " + ", ".join(f"{k} {v}" for k, v in intervals.items()), numbers)
    contradicted = [k for k in bad if fails(intervals[k])]
    if contradicted:
        return Verdict(FAILS, f"contradicted: {', '.join(f'{k} {intervals[k]}' for k in contradicted)} ({what} "
                              "is not so)", numbers)
    return Verdict(FAILS, f"{NOT_RESOLVED}: the interval of {', '.join(f'{k} {intervals[k]}' for k in bad)} "
                          f"includes the threshold ({what})", numbers)


# ---- claims 1-4, 7: intervals against thresholds --------------------------------------------------


@dataclass(frozen=True)
class GapEvidence:
    """CKA - STIR in each direction of a seed pair, each with its interval (of the difference)."""

    cka_minus_stir_m1_m2: Interval
    cka_minus_stir_m2_m1: Interval


def stir_well_below_cka(e: GapEvidence) -> Verdict:
    """Claim 1: on vanilla seed pairs STIR is well below CKA (both directions, by more than WELL_BELOW)."""
    named = {"CKA - STIR(m1|m2)": e.cka_minus_stir_m1_m2, "CKA - STIR(m2|m1)": e.cka_minus_stir_m2_m1}
    return _unmeasured(named) or _side(named, lambda v: v.above(WELL_BELOW), lambda v: v.below(WELL_BELOW),
                                       f"CKA - STIR above {WELL_BELOW}")


@dataclass(frozen=True)
class PairEvidence:
    """STIR in both directions of one pair."""

    stir_m1_m2: Interval
    stir_m2_m1: Interval


def stir_high(e: PairEvidence) -> Verdict:
    """Claim 2: on AT seed pairs STIR is high (both directions above HIGH_STIR)."""
    named = {"STIR(m1|m2)": e.stir_m1_m2, "STIR(m2|m1)": e.stir_m2_m1}
    return _unmeasured(named) or _side(named, lambda v: v.above(HIGH_STIR), lambda v: v.below(HIGH_STIR),
                                       f"STIR above {HIGH_STIR}")


@dataclass(frozen=True)
class DirectionEvidence:
    """STIR(m2|m1) - STIR(m1|m2) per ordered pair (m1 the more robust model), with its interval."""

    differences: Mapping[str, Interval]  # pair label (m1/m2) -> STIR(m2|m1) - STIR(m1|m2)


def more_robust_shares_less(e: DirectionEvidence) -> Verdict:
    """Claims 3 and 7: when m1 is more robust than m2, STIR(m2|m1) > STIR(m1|m2) (every pair's
    difference interval above 0). Claim 3 is the pair AT / vanilla: STIR(AT|vanilla) < STIR(vanilla|AT)."""
    if not e.differences:
        return not_testable("no pair of models of different robustness")
    named = {f"STIR(m2|m1) - STIR(m1|m2) for {k}": v for k, v in e.differences.items()}
    return _unmeasured(named) or _side(named, lambda v: v.above(0.0), lambda v: v.below(0.0), "above 0")


@dataclass(frozen=True)
class AdversarialEvidence:
    """STIR_adv per direction of each pair (NaN: not measured, e.g. no adversarial X' reached the bound)."""

    stir_adv: Mapping[str, Interval]  # "STIR_adv(m2|m1) for at/vanilla" -> value


def stir_adv_near_zero(e: AdversarialEvidence) -> Verdict:
    """Claim 4: STIR_adv is near 0 for every pair (every interval below NEAR_ZERO)."""
    if not e.stir_adv:
        return not_testable("STIR_adv was not measured")
    return _unmeasured(dict(e.stir_adv)) or _side(dict(e.stir_adv), lambda v: v.below(NEAR_ZERO),
                                                  lambda v: v.above(NEAR_ZERO), f"STIR_adv below {NEAR_ZERO}")


# ---- claims 5, 6: one quantity tracks another --------------------------------------------------------


@dataclass(frozen=True)
class TrackingEvidence:
    """Per direction or pair (label), STIR and the quantity that should track it."""

    stir: Mapping[str, Interval]
    other: Mapping[str, Interval]  # agreement on X' (claim 5) or controversial-stimulus difficulty (claim 6)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN when a side is constant."""
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for m in range(i, j + 1):
                r[order[m]] = (i + j) / 2
            i = j + 1
        return r

    rx, ry = ranks(list(x)), ranks(list(y))
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx, syy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else float("nan")


def tracks(e: TrackingEvidence, what: str) -> Verdict:
    """``what`` tracks STIR: Spearman's rho of the point values at least TRACKS_RHO over at least
    MIN_POINTS labels (the labels both sides have, all measured)."""
    labels = [k for k in e.stir if k in e.other]
    named = {**{f"STIR {k}": e.stir[k] for k in labels}, **{f"{what} {k}": e.other[k] for k in labels}}
    missing = _unmeasured(named)
    if missing:
        return missing
    if len(labels) < MIN_POINTS:
        return not_testable(f"{len(labels)} paired values of STIR and {what}; a rank correlation needs {MIN_POINTS}",
                            labels=labels)
    rho = spearman([e.stir[k].value for k in labels], [e.other[k].value for k in labels])
    numbers = {"spearman_rho": rho, "points": len(labels), **{k: str(v) for k, v in named.items()}}
    if math.isnan(rho):
        return Verdict(FAILS, f"{what} or STIR is the same for every pair: nothing to track", numbers)
    if rho >= TRACKS_RHO:
        return Verdict(HOLDS, f"{what} tracks STIR: Spearman rho {rho:.2f} over {len(labels)} (>= {TRACKS_RHO})", numbers)
    return Verdict(FAILS, f"{what} does not track STIR: Spearman rho {rho:.2f} over {len(labels)} (< {TRACKS_RHO})",
                   numbers)


def agreement_tracks_stir(e: TrackingEvidence) -> Verdict:
    """Claim 5: agreement (argmax m1(X') = argmax m2(X')) on IRIs is ordered like STIR."""
    return tracks(e, "agreement")


def controversial_harder_for_higher_stir(e: TrackingEvidence) -> Verdict:
    """Claim 23 (Table 3's caption): controversial stimuli are harder to find (higher difficulty) for
    pairs of higher STIR, over every direction."""
    return tracks(e, "controversial difficulty")


@dataclass(frozen=True)
class DeltaEvidence:
    """Eq. 8's Delta (mean ||x - x_c||_2) per direction of the vanilla seed pair and of the AT seed pair."""

    vanilla: Mapping[str, Interval]
    at: Mapping[str, Interval]


def controversial_easier_for_vanilla(e: DeltaEvidence) -> Verdict:
    """Claim 6 (section 3.3): controversial stimuli are easier for the vanilla seed pair than for the AT
    seed pair: every vanilla direction's Delta interval below every AT direction's (disjoint) holds; every
    one above contradicts; else not resolved."""
    if not e.vanilla or not e.at:
        return not_testable(f"Delta of the {'vanilla' if not e.vanilla else 'AT'} seed pair not measured")
    named = {**{f"vanilla {k}": i for k, i in e.vanilla.items()}, **{f"AT {k}": i for k, i in e.at.items()}}
    missing = _unmeasured(named)
    if missing:
        return missing
    numbers = {k: str(i) for k, i in named.items()}
    shown = ", ".join(f"{k} {i}" for k, i in named.items())
    if max(i.high for i in e.vanilla.values()) < min(i.low for i in e.at.values()):
        return Verdict(HOLDS, f"every vanilla Delta below every AT Delta (disjoint intervals): {shown}", numbers)
    if min(i.low for i in e.vanilla.values()) > max(i.high for i in e.at.values()):
        return Verdict(FAILS, f"contradicted: every vanilla Delta above every AT Delta: {shown}", numbers)
    return Verdict(FAILS, f"{NOT_RESOLVED}: the vanilla and AT Delta intervals overlap: {shown}", numbers)


# ---- claim 8: a curve that rises and plateaus ---------------------------------------------------------


@dataclass(frozen=True)
class CurveEvidence:
    """Per family (vanilla, at): STIR between consecutive incremental models, by training-set size;
    ``confidence``: the level of the points' intervals (and of the trend's)."""

    curves: Mapping[str, Sequence[Tuple[int, Interval]]]  # family -> [(train size, STIR)], sizes increasing
    confidence: float = 0.95


def trend(points: Sequence[Tuple[float, Interval]], confidence: float = 0.95) -> Interval:
    """The rise of a curve over its sizes: the Theil-Sen slope of the values on u = (size - first
    size) / (last size - first size) in [0, 1] (the median of the slopes between every two points;
    Sen 1968), so the fitted rise from the first size to the last, with Sen's interval at
    ``confidence`` from the distribution of Kendall's statistic.

    The interval is distribution-free: it holds whatever spread the points have about the curve,
    with one training seed per size the between-seed spread that no point's own interval holds, so
    the rise of a curve is never read off two points. It reads the points' order, not their own
    intervals; a least-squares line would take a rise that saturates (the claim's shape) for lack
    of fit. Needs 3 or more points; NaN otherwise."""
    sizes = [float(n) for n, _ in points]
    if len(points) < 3 or sizes[-1] == sizes[0]:
        return Interval(math.nan, math.nan, math.nan)
    u = [(n - sizes[0]) / (sizes[-1] - sizes[0]) for n in sizes]
    fit = stats.theilslopes([i.value for _, i in points], u, alpha=confidence)
    return Interval(float(fit.slope), float(min(fit.low_slope, fit.slope)), float(max(fit.high_slope, fit.slope)))


def rises_and_plateaus(e: CurveEvidence) -> Verdict:
    """Claim 8: in every family STIR rises with data (the fitted rise over the sizes, ``trend``, with
    an interval above 0) and plateaus (the fitted rise over the last third of the steps between sizes
    with an interval at most PLATEAU_FRACTION of the whole fitted rise).

    As for the interval claims (``_side``): "contradicted" where an interval is on the wrong side (a
    rise below 0: falls; a last-third rise above the plateau bound: still rising), "not resolved"
    where one straddles its threshold and none is on the wrong side. A last third of two sizes has
    no interval: its rise (their difference) is then read as a point."""
    if not e.curves:
        return not_testable("no incremental-data curves")
    numbers: Dict[str, Any] = {}
    contradicted, unresolved = [], []
    for family, curve in e.curves.items():
        points = sorted(curve, key=lambda point: point[0])  # by size (Intervals have no order)
        named = {f"{family} n={n}": v for n, v in points}
        missing = _unmeasured(named)
        if missing:
            return missing
        if len(points) < 4:
            return not_testable(f"{family}: {len(points)} training-set sizes; rise and plateau need 4 or more")
        rise = trend(points, e.confidence)
        tail = points[-(math.ceil((len(points) - 1) / 3) + 1):]  # the last third of the steps between sizes
        # the fitted rise from the tail's first size to its last (two points: their difference, no interval)
        if len(tail) >= 3:
            tail_rise = trend(tail, e.confidence)
        else:
            step = tail[-1][1].value - tail[0][1].value
            tail_rise = Interval(step, step, step)
        numbers[family] = {"first": str(points[0][1]), "last": str(points[-1][1]), "rise": str(rise),
                           "last_third_rise": str(tail_rise)}
        fitted = f"fitted rise {rise} over {len(points)} sizes: Theil-Sen, its interval from the points' order"
        if rise.below(0.0):
            contradicted.append(f"{family}: falls with data ({fitted})")
            continue
        if not rise.above(0.0):
            unresolved.append(f"{family}: the rise ({fitted}) includes 0")
            continue
        bound = PLATEAU_FRACTION * rise.value
        if tail_rise.above(bound):
            contradicted.append(f"{family}: still rising over the last third (fitted rise {tail_rise} over "
                                f"{len(tail)} sizes, above the plateau bound {bound:.3f}: a quarter of the "
                                f"whole rise {rise.value:.3f})")
        elif tail_rise.high > bound:  # straddles the bound (a point at or below it plateaus)
            unresolved.append(f"{family}: rises ({fitted}); its plateau is not resolved: the last third's "
                              f"fitted rise {tail_rise} over {len(tail)} sizes includes the plateau bound "
                              f"{bound:.3f} (a quarter of the whole rise)")
    if contradicted:
        return Verdict(FAILS, "contradicted: " + "; ".join(contradicted + unresolved), numbers)
    if unresolved:
        return Verdict(FAILS, f"{NOT_RESOLVED}: " + "; ".join(unresolved), numbers)
    return Verdict(HOLDS, "rises and plateaus in " + ", ".join(f"{f} (fitted rise {numbers[f]['rise']})"
                                                               for f in e.curves), numbers)


# ---- claims 9, 10: layer-wise slopes ----------------------------------------------------------------


@dataclass(frozen=True)
class SlopeEvidence:
    """Least-squares slope of STIR over relative depth (0 first tap, 1 last), per setting (an
    architecture, or a data set): vanilla seed pair and AT seed pair."""

    vanilla: Mapping[str, Interval]
    at: Mapping[str, Interval]


def vanilla_falls_at_flat(e: SlopeEvidence) -> Verdict:
    """Claim 9: layer-wise, the vanilla slope is negative and the AT slope flat (within +-FLAT_SLOPE)
    in every setting; claim 10 asks it of each data set."""
    if not e.vanilla and not e.at:
        return not_testable("no layer-wise slopes")
    named = {**{f"vanilla slope {k}": v for k, v in e.vanilla.items()}, **{f"AT slope {k}": v for k, v in e.at.items()}}
    missing = _unmeasured(named)
    if missing:
        return missing
    return _slopes(e)


def _slopes(e: SlopeEvidence) -> Verdict:
    vanilla = {f"vanilla slope {k}": v for k, v in e.vanilla.items()}
    at = {f"AT slope {k}": v for k, v in e.at.items()}
    numbers = {k: str(v) for k, v in {**vanilla, **at}.items()}
    failed = [v for v in (
        _side(vanilla, lambda v: v.below(0.0), lambda v: v.above(0.0), "negative") if vanilla else None,
        _side(at, lambda v: v.within(-FLAT_SLOPE, FLAT_SLOPE),
              lambda v: v.above(FLAT_SLOPE) or v.below(-FLAT_SLOPE), f"within +-{FLAT_SLOPE}") if at else None,
    ) if v is not None and not v.holds]
    if not vanilla or not at:
        lacking = "vanilla" if not vanilla else "AT"
        return not_testable(f"no {lacking} layer-wise slope", **numbers)
    if failed:
        return Verdict(FAILS, "; ".join(f.reason for f in failed), numbers)
    return Verdict(HOLDS, "vanilla slopes negative, AT slopes flat: " + ", ".join(f"{k} {v}" for k, v in
                                                                                   {**vanilla, **at}.items()), numbers)


@dataclass(frozen=True)
class DatasetSlopeEvidence:
    """Claim 9's slopes per data set; None for a data set not measured, with the reason in ``missing``."""

    by_dataset: Mapping[str, Optional[SlopeEvidence]]  # "cifar10" / "cifar100" -> slopes
    missing: Mapping[str, str] = field(default_factory=dict)  # data set -> why it was not measured


def same_across_datasets(e: DatasetSlopeEvidence) -> Verdict:
    """Claim 10: claim 9 holds on every data set (CIFAR-10 and CIFAR-100). A data set without evidence
    makes the claim not testable, with its reason (e.g. CIFAR-100 not available on this machine)."""
    absent = [d for d, ev in e.by_dataset.items() if ev is None]
    if len(e.by_dataset) < 2:
        return not_testable(f"slopes of {len(e.by_dataset)} data set(s); the claim compares two")
    if absent:
        return not_testable("; ".join(f"{d}: {e.missing.get(d, 'not measured')}" for d in absent))
    verdicts = {d: vanilla_falls_at_flat(ev) for d, ev in e.by_dataset.items()}
    numbers = {d: {"outcome": v.outcome, **v.numbers} for d, v in verdicts.items()}
    untestable = [d for d, v in verdicts.items() if v.outcome == NOT_TESTABLE]
    if untestable:
        return not_testable("; ".join(f"{d}: {verdicts[d].reason}" for d in untestable), **numbers)
    failed = [d for d, v in verdicts.items() if not v.holds]
    if failed:
        return Verdict(FAILS, "; ".join(f"{d}: {verdicts[d].reason}" for d in failed), numbers)
    return Verdict(HOLDS, f"on every data set ({', '.join(verdicts)}): vanilla slopes negative, AT flat", numbers)


# ---- claims 11, 12: one group shares more than another -------------------------------------------------


@dataclass(frozen=True)
class ContrastEvidence:
    """Differences of mean STIR between two groups of pairs, each with its interval (group A - group B),
    and the number of training seeds of each group's models behind each difference (its seed positions:
    position i holds the i-th seed of every model; absent: not stated, read as several)."""

    differences: Mapping[str, Interval]  # e.g. "residual/residual - residual/VGG" -> interval
    seed_positions: Mapping[str, int] = field(default_factory=dict)  # the same names -> positions


def shares_more(e: ContrastEvidence) -> Verdict:
    """Claims 11 and 12: every difference (the group the paper says shares more, minus the other) is
    above 0. Claim 11: STIR among residual nets minus STIR between residual and non-residual nets;
    claim 12: STIR(AT, TRADES) minus STIR(AT, MART) and minus STIR(TRADES, MART).

    These compare model families (architectures, training methods), so a difference that rests on one
    training seed per model decides nothing: its interval holds the images and IRI draws, not the
    between-seed spread, which is as large as the differences compared (claim 12: -0.089 [-0.123,
    -0.056] at one seed, -0.079 [-0.203, 0.044] over two). Such a difference is shown and reads "not
    resolved", unless another difference over several seeds contradicts the claim."""
    if not e.differences:
        return not_testable("no pairs of the groups compared")
    named = dict(e.differences)
    unmeasured = _unmeasured(named)
    if unmeasured:
        return unmeasured
    above_0 = lambda d: _side(d, lambda v: v.above(0.0), lambda v: v.below(0.0), "above 0")  # noqa: E731
    one = [k for k in named if e.seed_positions.get(k, 2) < 2]
    judged = {k: v for k, v in named.items() if k not in one}
    if not one:
        return above_0(named)
    numbers = {k: str(v) for k, v in named.items()}
    if any(v.below(0.0) for v in judged.values()):  # contradicted over several seeds whatever the others read
        return Verdict(FAILS, above_0(judged).reason, numbers)
    return Verdict(FAILS, f"{NOT_RESOLVED}: one training seed per model behind "
                          + ", ".join(f"{k} {named[k]}" for k in one)
                          + " (the interval holds images and IRI draws, not the between-seed spread; a comparison "
                            "of model families needs several training seeds of each)"
                          + ("; " + ", ".join(f"{k} {v}" for k, v in judged.items()) if judged else ""), numbers)
