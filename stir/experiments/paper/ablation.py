"""The recipe question (issue 31): does a lever of the training recipe move the seed-pair STIR?

One arm per recipe (the fast recipe, and the fast recipe with one lever moved: configs/zoo.yaml),
each with its training seeds; a seed pair is every two seeds of one arm. Per arm and quantity
(STIR in each direction, their mean, CKA) the value is the random-effects estimate over the arm's seed
pairs (``stir.measure.seeds.seed_estimate``: the between-seed-pair spread and the image-level
variance together), and each arm is read against the first (the baseline) with Welch's interval of
the difference, its two-sided p-value, and an equivalence test (TOST) at a stated margin: "moves"
where the difference is resolved, "equivalent within +-margin" where TOST passes, "not resolved"
otherwise. An arm with one seed pair has no between-seed spread, so no test (its row says so).

The seed pairs of one arm share models ((a, b), (a, c), (b, c)): not independent, so the intervals
are somewhat too narrow (the paper kind's SHARED note). Pure functions of the readings; the paper
kind (``stir.experiments.paper``) builds the readings from the stored pair results.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from stir.experiments.context import Context
from stir.experiments.intervals import num as _num, se as _se
from stir.experiments.paper.parts import Availability, ablation_pairs
from stir.experiments.paper.readings import NAN, arm_estimate, direction_reading
from stir.experiments.paper_config import PaperConfig
from stir.measure.seeds import SeedEstimate, difference, z_value as _z
from stir.paper import Interval

# The quantities of the ablation table, in order; "STIR, mean of directions" is the arm's summary
# (a seed pair has no preferred direction: both models come from one recipe).
QUANTITIES = ("STIR(m1|m2)", "STIR(m2|m1)", "STIR, mean of directions", "CKA")


def mean_of_directions(a: Interval, b: Interval, confidence: float) -> Interval:
    """(a + b) / 2 with se = sqrt(se_a^2 + se_b^2) / 2 (the two directions read as independent;
    they share the images X, so this is a reading, not a bound); NaN where either is not measured."""
    if not (a.measured and b.measured):
        return Interval(math.nan, math.nan, math.nan)
    se = math.hypot(_se(a, confidence), _se(b, confidence)) / 2
    z = _z(confidence)
    mean = (a.value + b.value) / 2
    return Interval(mean, mean - z * se, mean + z * se)




def rows(arms: Mapping[str, Mapping[str, Sequence[Interval]]], margin: float, confidence: float,
         levers: Optional[Mapping[str, str]] = None) -> List[Dict[str, Any]]:
    """One row per arm and quantity: ``arms`` = {arm: {quantity: [one Interval per seed pair]}}, the
    first arm the baseline; ``levers``: {arm: the lever it moves, in words}."""
    names = list(arms)
    if not names:
        return []
    base = {q: arm_estimate(arms[names[0]].get(q, ()), confidence) for q in QUANTITIES}
    out = []
    for arm in names:
        for q in QUANTITIES:
            est = arm_estimate(arms[arm].get(q, ()), confidence)
            if est is None:
                continue
            row = {"arm": arm, "lever": (levers or {}).get(arm, ""), "quantity": q, "seed pairs": est.pairs,
                   "ours": _interval(est), "between-pair sd (tau)": _num(est.tau)}
            if arm == names[0]:
                row.update({"minus baseline": "baseline", "p (difference)": "-", f"TOST p (margin {margin:g})": "-",
                            "reading": "baseline"})
            else:
                row.update(_against(est, base[q], margin, confidence))
            out.append(row)
    return out


def absent_row(arm: str, lever: str, why: str, margin: float) -> Dict[str, Any]:
    """The row of an arm with no seed pair measured: the columns of ``rows``, ``why`` as its reading."""
    return {"arm": arm, "lever": lever, "quantity": "-", "seed pairs": 0, "ours": "not measured", "between-pair sd (tau)": "-",
            "minus baseline": "-", "p (difference)": "-", f"TOST p (margin {margin:g})": "-", "reading": why}


def _against(est: SeedEstimate, base: Optional[SeedEstimate], margin: float, confidence: float) -> Dict[str, str]:
    tost = f"TOST p (margin {margin:g})"
    if base is None:
        return {"minus baseline": "baseline not measured", "p (difference)": "-", tost: "-", "reading": "no test"}
    d = difference(est, base, margin, confidence)
    if not math.isfinite(d.se):
        return {"minus baseline": f"{d.difference:+.3f}", "p (difference)": "-", tost: "-",
                "reading": "no test: one seed pair in an arm (its between-seed spread is not measured)"}
    reading = ("moves it" if d.different else f"equivalent within +-{margin:g}" if d.equivalent else
               "not resolved (neither a difference nor equivalence at this number of seed pairs)")
    return {"minus baseline": f"{d.difference:+.3f} [{d.low:+.3f}, {d.high:+.3f}]", "p (difference)": _num(d.p_difference),
            tost: _num(d.p_equivalence), "reading": reading}


def _interval(est: SeedEstimate) -> str:
    if math.isfinite(est.low):
        return f"{est.mean:.3f} [{est.low:.3f}, {est.high:.3f}]"
    return f"{est.mean:.3f} (one seed pair)"


def recipe_ablation(ctx: Context, cfg: PaperConfig, ok: Availability,
                    part: Optional[Tuple[Any, Context]]) -> List[Dict[str, Any]]:
    """The recipe question's table (``stir.experiments.paper.ablation``): each arm's seed pairs that
    are measured; an arm with none says which of its models are missing."""
    if not cfg.ablation:
        return []
    conf = ctx.estimator.calibration.confidence
    measured = {tuple(p) for p in part[0].pairs} if part else set()
    arms: Dict[str, Dict[str, List[Interval]]] = {}
    absent = []
    for arm, pairs in ablation_pairs(cfg).items():
        results = [part[1].pair(ctx.model(a), ctx.model(b)) for a, b in pairs if (a, b) in measured]
        if not results:
            why = ok.why(cfg.ablation[arm]) or "not measured in this report"
            absent.append(absent_row(arm, cfg.ablation_levers.get(arm, ""), why, cfg.ablation_margin))
            continue
        s12 = [direction_reading(p.get("m1|m2")) for p in results]
        s21 = [direction_reading(p.get("m2|m1")) for p in results]
        cka = [Interval(p.similarity.value, p.similarity.value, p.similarity.value)
               if math.isfinite(p.similarity.value) else Interval(NAN, NAN, NAN) for p in results]
        arms[arm] = {"STIR(m1|m2)": s12, "STIR(m2|m1)": s21, "CKA": cka,
                     "STIR, mean of directions": [mean_of_directions(a, b, conf) for a, b in zip(s12, s21)]}
    return rows(arms, cfg.ablation_margin, conf, cfg.ablation_levers) + absent
