"""Table 1 and Table 2 asked again where the X' really are IRIs (issue 53): for every direction of
Table 1's pairs and of Table 2's (``measure_table2``; the columns ``stir.experiments.paper.table2`` adds),
STIR at IRIs (``stir.measure.at_iris``: the IRI solver from the part's own seeds, images and draws, each
image stopped at the IRI tolerance r1 <= 0.02, images that never reach it left out and counted) beside
the published-procedure value, and claims 1-3 and Table 2's differences judged again on it by
the same rules (``stir.paper``), the verdict of each beside the published-procedure one (claim 7 on
Table 2's models, the verdict the claims table gives them).

Claim 5 (STIR tracks agreement) is not judged again: agreement on the IRIs is not measured.
``experiment.at_iris``: ``stored`` (the default) serves the readings the store holds and leaves the
others "not measured", so a fresh clone's report stays a matter of minutes; ``measure`` measures the
missing ones too (about 3x the published procedure's model evaluations per reference model, whose X'
every target shares; never under ``stored_only``); ``off`` leaves the column out.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

from stir.experiments import at_iris_table
from stir.experiments.context import Context
from stir.experiments.intervals import from_se, num
from stir.experiments.paper.parts import Availability, table1_pairs
from stir.experiments.paper.readings import NAN, cell_text, confidence_z, difference_of, direction_reading, over_seed_pairs
from stir.experiments.paper_config import PaperConfig
from stir.measure.at_iris import AtIRIsResult, stir_at_iris
from stir.measure.plan import DEFAULT_TAP  # Table 1's tap (the paper's penultimate layer)
from stir.paper import Interval, claim
from stir.paper import verdicts as v
from stir.store import NotStored

Readings = Dict[Tuple[str, str], AtIRIsResult]  # (target, ref) -> STIR(target|ref) at IRIs
def directions(ctx: Context, cfg: PaperConfig, ok: Availability) -> List[Tuple[str, str]]:
    """(ref, target) of both directions of every Table 1 pair whose models exist, grouped by reference
    (the X' of one reference are solved once and shared by its targets)."""
    out = [(r, t) for pairs in table1_pairs(cfg).values() for a, b in pairs if ok.all((a, b)) for r, t in ((a, b), (b, a))]
    return sorted(dict.fromkeys(out), key=lambda d: [r for r, _ in out].index(d[0]))


def read(ctx: Context, cfg: PaperConfig, seeds_ctx: Context, ref: str, target: str, store=None) -> AtIRIsResult:
    """STIR(target|ref) at IRIs on the seeds part's images, seeds and measure, ``cfg.at_iris_draws`` draws:
    served from ``store`` (the seeds part's by default) or measured and stored there."""
    est = seeds_ctx.estimator
    m1, m2 = ctx.model(ref), ctx.model(target)
    return stir_at_iris(m1.module, m2.module, seeds_ctx.images(m1), DEFAULT_TAP, DEFAULT_TAP, at_iris_table.solver(cfg),
                        measure=est.measure, k=cfg.at_iris_draws, seed=est.inversion.seed, names=(ref, target),
                        store=seeds_ctx.store if store is None else store)


def measure(ctx: Context, cfg: PaperConfig, ok: Availability, seeds_ctx: Optional[Context]) -> Readings:
    """STIR at IRIs of both directions of every Table 1 pair that exists, from the store or measured now
    (a direction not stored under ``stored_only`` is left out)."""
    if seeds_ctx is None or cfg.at_iris == "off":
        return {}
    return _read_all(ctx, cfg, seeds_ctx, directions(ctx, cfg, ok))


def measure_table2(ctx: Context, cfg: PaperConfig, part: Optional[Tuple[Any, Context]]) -> Readings:
    """STIR at IRIs of both directions of every pair of Table 2's models (the ``relative_robustness`` part:
    its images, seeds and measure), from the store or measured now; none without the part."""
    if part is None or cfg.at_iris == "off":
        return {}
    mcfg, pctx = part
    models = list(mcfg.models)
    return _read_all(ctx, cfg, pctx, [(r, t) for r in models for t in models if r != t])  # grouped by reference


def _read_all(ctx: Context, cfg: PaperConfig, part_ctx: Context, pairs: List[Tuple[str, str]]) -> Readings:
    """(target, ref) -> STIR(target|ref) at IRIs of each (ref, target) of ``pairs`` on ``part_ctx``'s images;
    under ``at_iris=stored`` only what its store holds."""
    store = at_iris_table.store_for(part_ctx.store, cfg)
    out: Readings = {}
    for ref, target in pairs:
        try:
            out[(target, ref)] = read(ctx, cfg, part_ctx, ref, target, store=store)
        except NotStored:
            continue
    return out


def value(r: Optional[AtIRIsResult], z: float) -> Interval:
    """A reading at IRIs as an Interval (value -+ z jackknife se); not measured without one."""
    if r is None or not math.isfinite(r.value):
        return Interval(NAN, NAN, NAN)
    return from_se(r.value, r.se, z)


def cell(r: Optional[AtIRIsResult], z: float) -> str:
    """'value [low, high] (reached%, r1 median m)' or why there is none."""
    if r is None:
        return "not measured"
    return f"{cell_text(value(r, z))} ({r.fraction_reached:.0%} at r1 <= {r.level:g})"


def rows(ctx: Context, cfg: PaperConfig, ok: Availability, readings: Readings,
         seeds_ctx: Optional[Context]) -> List[Dict[str, Any]]:
    """Per direction of every Table 1 pair whose models exist: the published-procedure value and its
    median residual beside STIR at IRIs."""
    z = confidence_z(ctx)
    out = []
    for kind, pairs in table1_pairs(cfg).items():
        for a, b in pairs:
            if not ok.all((a, b)):
                continue
            p = _published(ctx, seeds_ctx, a, b)
            for direction, (target, ref) in (("m2|m1", (b, a)), ("m1|m2", (a, b))):
                r = readings.get((target, ref))
                if r is None and p is None:
                    continue
                d = p.get(direction) if p is not None else None
                quality = d.quality.get("arbitrary", {}) if d is not None else {}
                out.append({"pair": f"{a} / {b}", "kind": kind, "quantity": f"STIR({target}|{ref})",
                            "published procedure": cell_text(direction_reading(d)),
                            "its median r1": num(quality.get("median_residual", NAN)),
                            "at IRIs": cell(r, z),
                            "median r1 at IRIs": num(_mean(r.median_residual) if r else NAN),
                            "model evaluations per image": num(_mean(r.evaluations) / r.n if r else NAN, 0)})
    return out


def verdicts(ctx: Context, cfg: PaperConfig, readings: Readings, seeds_ctx: Optional[Context],
             published: Dict[int, Tuple[Any, List[str]]], table2_evidence: Optional[Any] = None) -> List[Dict[str, Any]]:
    """Claims 1-3 (Table 1) and claim 7 on Table 2's models (``table2_evidence``: its differences at IRIs,
    ``table2.at_iris_evidence``) judged on STIR at IRIs, beside the published-procedure verdict: one row
    per claim, saying whether the conclusion changes."""
    conf, z = ctx.estimator.calibration.confidence, confidence_z(ctx)
    pairs = table1_pairs(cfg)
    have = {kind: [(a, b) for a, b in ps if (b, a) in readings and (a, b) in readings] for kind, ps in pairs.items()}
    evidence: Dict[int, Any] = {}
    if have.get("vanilla"):
        gaps = {d: [] for d in ("m1|m2", "m2|m1")}
        for a, b in have["vanilla"]:
            p = _published(ctx, seeds_ctx, a, b)
            cka = p.similarity.value if p is not None else NAN
            for d, (target, ref) in (("m2|m1", (b, a)), ("m1|m2", (a, b))):
                s = value(readings[(target, ref)], z)
                gaps[d].append(from_se(cka - s.value, (s.high - s.value) / z, z) if s.measured else Interval(NAN, NAN, NAN))
        evidence[1] = v.GapEvidence(over_seed_pairs(gaps["m1|m2"], conf, have["vanilla"])[0],
                                    over_seed_pairs(gaps["m2|m1"], conf, have["vanilla"])[0])
    if have.get("at"):
        s12 = [value(readings[(a, b)], z) for a, b in have["at"]]  # STIR(m1|m2): target a, ref b
        s21 = [value(readings[(b, a)], z) for a, b in have["at"]]
        evidence[2] = v.PairEvidence(over_seed_pairs(s12, conf, have["at"])[0], over_seed_pairs(s21, conf, have["at"])[0])
    if have.get("cross"):
        diffs = [difference_of(value(readings[(b, a)], z), value(readings[(a, b)], z), z, conf) for a, b in have["cross"]]
        est = over_seed_pairs(diffs, conf, have["cross"])[0]
        label = f"{have['cross'][0][0]} / {have['cross'][0][1]}" + (
            f" and {len(have['cross']) - 1} more seed pair(s)" if len(have["cross"]) > 1 else "")
        evidence[3] = v.DirectionEvidence({label: est})
    out = []
    for number in (1, 2, 3):
        before = published.get(number)
        was = before[0].outcome if before else "not judged"
        if number not in evidence:
            out.append({"claim": number, "published procedure": was, "at IRIs": "not measured", "changes": "-",
                        "reason at IRIs": "STIR at IRIs is not in this report for these pairs"})
            continue
        now = claim(number).judge(evidence[number])
        out.append({"claim": number, "published procedure": was, "at IRIs": now.outcome,
                    "changes": "no" if now.outcome == was else "yes", "reason at IRIs": now.reason})
    out.append({"claim": 5, "published procedure": published[5][0].outcome if 5 in published else "not judged",
                "at IRIs": "not judged", "changes": "-", "reason at IRIs": "agreement on the IRIs is not measured"})
    was7 = published[7][0].outcome if 7 in published else "not judged"
    if table2_evidence is None:
        out.append({"claim": "7 (Table 2's models)", "published procedure": was7, "at IRIs": "not measured",
                    "changes": "-", "reason at IRIs": "STIR at IRIs is not in this report for Table 2's pairs"})
    else:
        now = claim(7).judge(table2_evidence)
        out.append({"claim": "7 (Table 2's models)", "published procedure": was7, "at IRIs": now.outcome,
                    "changes": "no" if now.outcome == was7 else "yes", "reason at IRIs": now.reason})
    return out


def _published(ctx: Context, seeds_ctx: Optional[Context], a: str, b: str):
    if seeds_ctx is None:
        return None
    try:
        return seeds_ctx.pair(ctx.model(a), ctx.model(b))
    except NotStored:
        return None


def _mean(xs: List[float]) -> float:
    good = [x for x in xs if math.isfinite(x)]
    return sum(good) / len(good) if good else NAN


def with_column(table1_rows: List[Dict[str, Any]], readings: Readings, z: float) -> List[Dict[str, Any]]:
    """Table 1's rows with an "at IRIs" column beside "ours": the STIR rows' reading at IRIs, "-" elsewhere
    (CKA, STIR_adv). Nothing is added when no reading is there (``experiment.at_iris=false``)."""
    if not readings:
        return table1_rows
    out = []
    for row in table1_rows:
        a, _, b = row["pair"].partition(" / ")
        key = {"STIR(m1|m2)": (a, b), "STIR(m2|m1)": (b, a)}.get(row["quantity"])
        text = cell(readings.get(key), z) if key else "-"
        new: Dict[str, Any] = {}
        for k, v_ in row.items():  # the column right after "ours"
            new[k] = v_
            if k == "ours":
                new["at IRIs"] = text
        out.append(new)
    return out
