"""Results as a person reads them: the cells of the report's tables and a short text of a pair.

One formatting of each quantity, shared by the report's rows (``stir.experiments.rows``) and the
printed form of a result (``print(pair_result)``), so the library and the command line say a value
the same way: ``0.128 [0.091, 0.170]`` (value and 95% interval), ``0.512 ± 0.010`` (mean ± std over
draws when there is no interval), ``not measured`` (a NaN value: the reason is in the notes).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, List, Optional, Tuple

from stir.measure.calibration import Calibration

if TYPE_CHECKING:  # the result types import this module for their printed form
    from stir.measure.results import DirectionResult, PairResult, Stat


def mean_std(mean: float, std: float) -> str:
    """'0.512 ± 0.010'."""
    return f"{mean:.3f} ± {std:.3f}"


def over_draws(stat: Optional["Stat"]) -> str:
    """'0.512 ± 0.010' (mean ± std over the k draws) for several draws, the value alone for one (a
    single draw has no spread to show: never '± 0.000'), '-' when not computed."""
    if stat is None:
        return "-"
    return mean_std(stat.mean, stat.std) if len(stat.values) > 1 else f"{stat.mean:.3f}"


def measure_range(measure: Optional[str]) -> Tuple[float, float]:
    """The values ``measure`` can take (linear CKA: (0, 1)); (-inf, inf) for an unknown or unnamed measure."""
    from stir.similarity.registry import info

    try:
        return tuple(float(end) for end in info(measure).range) if measure else (-math.inf, math.inf)
    except (KeyError, ValueError):
        return -math.inf, math.inf


def interval(stat: Optional["Stat"], cal: Optional[Calibration], measure: Optional[str] = None) -> str:
    """'0.128 [0.091, 0.170]' (the value and its interval); the mean ± std over draws when there is
    no interval and more than one draw; the value alone otherwise; '-' when not computed.

    With ``measure``, an interval reaching past the measure's range (half-sampling's value +- z se can:
    linear CKA's 0.975 [0.942, 1.008]) is shown clipped to it and says so, with the end it had:
    '0.975 [0.942, 1.000] (clipped to linear_cka's range [0, 1]; was [0.942, 1.008])'. The stored
    calibration keeps the interval as computed."""
    if stat is None:
        return "-"
    if not math.isfinite(stat.mean):
        return "not measured"  # the reason is in the notes (e.g. no adversarial X' reached the bound)
    if cal is not None and math.isfinite(cal.low):
        lo, hi = measure_range(measure)
        low, high = max(cal.low, lo), min(cal.high, hi)
        shown = f"{stat.mean:.3f} [{low:.3f}, {high:.3f}]"
        if (low, high) != (cal.low, cal.high):
            shown += (f" (clipped to {measure}'s range [{lo:g}, {hi:g}]; was [{cal.low:.3f}, {cal.high:.3f}])")
        return shown
    return over_draws(stat)


def normalised_cell(cal: Optional[Calibration]) -> str:
    """'0.38 [0.30, 0.46]': the normalised value with its interval (floors and ceiling resampled
    with it); '-' when undefined (the reason is in the notes)."""
    if cal is None or not math.isfinite(cal.normalised):
        return "-"
    if math.isfinite(cal.normalised_low):
        return f"{cal.normalised:.2f} [{cal.normalised_low:.2f}, {cal.normalised_high:.2f}]"
    return f"{cal.normalised:.2f}"


def _direction_lines(d: "DirectionResult") -> List[str]:
    lines = []
    for name, label in (("stir", "STIR"), ("stir_adv", "STIR_adv")):
        stat = getattr(d, name)
        if stat is None:
            continue
        cal = d.calibration.get(name)
        line = f"{label}({d.target}|{d.ref}) = {interval(stat, cal, d.measure)}"
        if cal is not None and math.isfinite(stat.mean):
            line += f", floor {cal.floor:.3f}, normalised {normalised_cell(cal)}"
        lines.append(line)
    reason = next((note for note in d.notes if note.startswith("STIR_adv: not measured")), None)
    if reason is not None:
        lines.append(f"  {reason.split(';')[0]}")
    return lines


def pair_text(pair: "PairResult") -> str:
    """A few lines: each direction's STIR and STIR_adv with interval, floor and normalised value,
    then the plain similarity; what the report's pairs table says first."""
    s = pair.similarity
    first = next(iter(pair.directions.values()), None)
    setup = f" (n={s.n}" + (f", k={first.k}, {first.settings.get('inversion', {}).get('steps', '?')} steps)"
                            if first is not None else ")")
    lines = [f"{s.ref} vs {s.target}{setup}, {s.measure} at {s.tap_ref}"
             + ("" if s.tap_ref == s.tap_target else f" / {s.tap_target}")]
    for d in pair.directions.values():
        lines += [f"  {line}" for line in _direction_lines(d)]
    value = f"{s.value:.3f}" if math.isfinite(s.value) else "undefined"
    lines.append(f"  {s.measure}({s.ref}, {s.target}) = {value}")
    return "\n".join(lines)
