"""Figures 2-3 and 6-7 (claims 9, 10): the layer-wise slopes of the vanilla and AT seed pairs, per
data set and architecture.

Each slope is fitted to two calibrated readings of each tap (against its own floor and ceiling,
issue 29): the normalised STIR and the chance-corrected one (issue 31: 1 where S = C = 1 whatever the
floors); the claims are judged on the chance-corrected slopes where every tap has that reading, else
on the normalised ones (``_slope_reading``). Their interval propagates the per-tap intervals (over
images and draws, taps treated as independent).
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

from stir.experiments.context import Context
from stir.experiments.intervals import from_se as _from_se, num as _num
from stir.experiments.pairs import PairsConfig
from stir.experiments.paper.parts import Availability
from stir.experiments.paper.readings import NAN, NOT_STORED, Evidence, cell_text, confidence_z, direction_reading
from stir.experiments.paper_config import PaperConfig
from stir.measure.results import DIRECTIONS
from stir.measure.seeds import standard_error
from stir.paper import Interval, claim, levels
from stir.paper import verdicts as v

def normalised_slope(result, direction: str, z: float, confidence: float,
                     reading: str = "normalised") -> Tuple[Interval, str]:
    """(the least-squares slope of a calibrated STIR reading over relative depth, why it is not
    measured: "" when it is). ``reading``: "normalised" ((S - F) / (C - F_C)) or "chance_corrected"
    (kappa(S, F) / kappa(C, F_C), ``stir.measure.calibration``). Its interval propagates the per-tap
    intervals of that reading (taps read as independent)."""
    xs, ys, ses, undefined = [], [], [], []
    for depth, row in zip(result.depths, result.rows):
        d = row.get(direction)
        cal = d.calibration.get("stir") if d is not None else None
        value, low, high = ((getattr(cal, reading), getattr(cal, f"{reading}_low"), getattr(cal, f"{reading}_high"))
                            if cal is not None else (NAN, NAN, NAN))
        if not (math.isfinite(value) and math.isfinite(low)):
            undefined.append(row.similarity.tap_ref)
            continue
        xs.append(depth), ys.append(value)
        ses.append(standard_error(min(low, value), max(high, value), confidence))
    if undefined:  # a slope over the other taps would be another curve than the figure's
        what = "normalised" if reading == "normalised" else "chance-corrected"
        return Interval(NAN, NAN, NAN), (f"{what} STIR undefined at {', '.join(undefined)} (the ceiling not clear "
                                         "of its floor, no interval, or stored before the reading was measured: "
                                         "the pair's notes)")
    if len(xs) < 2 or max(xs) == min(xs):
        return Interval(NAN, NAN, NAN), f"{len(xs)} tap(s): a slope needs two depths"
    mx = sum(xs) / len(xs)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * y for x, y in zip(xs, ys)) / sxx
    se = math.sqrt(sum(((x - mx) / sxx) ** 2 * s ** 2 for x, s in zip(xs, ses)))
    return _from_se(slope, se, z), ""


def _slope_reading(normalised: Dict[str, Dict[str, Interval]],
                   corrected: Dict[str, Dict[str, Interval]]) -> Tuple[Dict[str, Dict[str, Interval]], str]:
    """The slopes one data set's claim is judged on, and the note that says which reading.

    The chance-corrected reading where every slope of both families has it: at taps where S and C
    are both near 1 the normalised value is a ratio of two floors (``stir.measure.calibration``), so
    a slope through it is not about shared invariance. Else the normalised one (results stored
    before the chance-corrected reading existed), said so."""
    if all(corrected.values()) and all(i.measured for fam in corrected.values() for i in fam.values()):
        return corrected, ("judged on the chance-corrected slopes (kappa(S, F) / kappa(C, F_C) per tap, 1 where S = C "
                           "= 1 whatever the floors); the normalised slopes are beside them in the table")
    return normalised, ("judged on the normalised slopes ((S - F) / (C - F_C) per tap): the chance-corrected "
                        "reading is not measured at every tap (results stored before it existed)")


def figures2_3(ctx: Context, cfg: PaperConfig, ok: Availability, part: Optional[Tuple[PairsConfig, Context]]):
    """Claims 9 and 10: the vanilla and AT seed pairs' layer-wise slopes, per data set and architecture."""
    conf, z = ctx.estimator.calibration.confidence, confidence_z(ctx)
    rows: List[Dict[str, Any]] = []
    by_dataset: Dict[str, Dict[str, Dict[str, Interval]]] = {}  # the normalised slopes
    corrected_by_dataset: Dict[str, Dict[str, Dict[str, Interval]]] = {}  # the chance-corrected ones
    missing: Dict[str, List[str]] = {}
    measured = {tuple(p) for p in part[0].pairs} if part else set()
    unmeasured: List[str] = []  # pairs here but cut from the part (experiment.stored_only: not stored yet)
    for setting, families in cfg.layer_settings.items():
        dataset, _, arch = setting.partition(" ")
        by_dataset.setdefault(dataset, {"vanilla": {}, "at": {}})
        corrected_by_dataset.setdefault(dataset, {"vanilla": {}, "at": {}})
        for family, pair in families.items():
            if part is None or not ok.all(pair):
                missing.setdefault(dataset, []).extend(pair)
                continue
            if tuple(pair) not in measured:
                unmeasured.append(f"{setting} {family} ({' / '.join(pair)})")
                continue
            result = part[1].layerwise(ctx.model(pair[0]), ctx.model(pair[1]))
            for direction in DIRECTIONS:
                slope, why_not = normalised_slope(result, direction, z, conf)
                corrected = normalised_slope(result, direction, z, conf, "chance_corrected")[0]
                raw = result.slope(direction, "stir")
                by_dataset[dataset][family][f"{arch} {direction}"] = slope
                corrected_by_dataset[dataset][family][f"{arch} {direction}"] = corrected
                rows.append({"data set": dataset, "architecture": arch, "family": family, "pair": " / ".join(pair),
                             "direction": direction, "taps": len(result.rows), "slope (normalised)": cell_text(slope),
                             "slope (chance-corrected)": cell_text(corrected),
                             "slope (raw)": _num(raw), "not measured because": why_not or "-", "paper": "vanilla < 0, AT flatter (a figure: no printed value)"})
    evidence: Dict[int, Evidence] = {}
    readings = {dataset: _slope_reading(by_dataset[dataset], corrected_by_dataset[dataset]) for dataset in by_dataset}
    c10, c10_note = readings.get("cifar10", ({"vanilla": {}, "at": {}}, ""))
    left_out = ok.why(missing.get("cifar10", []))
    not_here = [f"{NOT_STORED}: {', '.join(unmeasured)}"] if unmeasured else []
    if c10["vanilla"] and c10["at"]:
        evidence[9] = Evidence(v.SlopeEvidence(c10["vanilla"], c10["at"]),
                               notes=[c10_note] + ([f"settings left out: {left_out}"] if left_out else []) + not_here)
    else:  # one family's slopes alone cannot show the contrast the claim is about
        evidence[9] = Evidence(missing=left_out or "no CIFAR-10 layer-wise seed pairs configured")
    slopes = {}
    why = {}
    for dataset, (fam, _) in readings.items():
        if fam["vanilla"] and fam["at"]:
            slopes[dataset] = v.SlopeEvidence(fam["vanilla"], fam["at"])
        else:
            slopes[dataset] = None
            reason = ok.why(missing.get(dataset, []))
            why[dataset] = (claim(10).not_testable_here + "; " if dataset == "cifar100" else "") + reason
    evidence[10] = Evidence(v.DatasetSlopeEvidence(slopes, why),
                            notes=[f"{dataset}: {note}" for dataset, (fam, note) in readings.items() if fam["vanilla"] and fam["at"]])
    return rows, evidence


def at_taps(ctx: Context, cfg: PaperConfig, lay: Optional[Tuple[PairsConfig, Context]]) -> Evidence:
    """Claim 17: STIR at every tap of the CIFAR-10 AT seed pairs, both directions."""
    taps = {}
    if lay is not None:
        measured = {tuple(p) for p in lay[0].pairs}
        for setting, families in cfg.layer_settings.items():
            pair = tuple(families.get("at", ()))
            if setting.startswith("cifar10 ") and pair in measured:
                result = lay[1].layerwise(ctx.model(pair[0]), ctx.model(pair[1]))
                for depth, row in zip(result.depths, result.rows):
                    for d in DIRECTIONS:
                        taps[f"{setting.split(' ')[1]} {d} depth {depth:.2f}"] = direction_reading(row.get(d))
    return Evidence(levels.LevelEvidence(taps, v.HIGH_STIR, math.inf, f"every AT tap above {v.HIGH_STIR}")
                    if taps else None, missing="the layers part is not in this report")
