"""The paper report's verdicts: each claim judged on its evidence (``judge``: holds / does not hold /
not testable here / not measured in this report, with the reason), the models each claim needs at
the least, and the summary line."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from stir.experiments.context import Context
from stir.experiments.paper.parts import PARTS, Availability, matrix_models, method_positions, table1_pairs
from stir.experiments.paper.readings import Evidence
from stir.experiments.paper_config import PaperConfig
from stir.paper import CLAIMS, HOLDS, NOT_RUN, NOT_TESTABLE, Verdict
from stir.paper import verdicts as v

def _needs(cfg: PaperConfig) -> Dict[int, List[str]]:
    """The models each claim's evidence needs at the least (for 'not testable here' when absent)."""
    pairs = table1_pairs(cfg)
    seeds = [n for kind in pairs.values() for p in kind for n in p]
    return {1: [n for p in pairs.get("vanilla", [])[:1] for n in p], 2: [n for p in pairs.get("at", [])[:1] for n in p],
            3: [n for p in pairs.get("cross", [])[:1] for n in p], 4: seeds[:2], 5: seeds, 6: seeds,
            7: list(cfg.robustness), 8: [n for c in cfg.chains.values() for n in c[:2]],
            9: [n for s, f in cfg.layer_settings.items() if s.startswith("cifar10 ") for p in f.values() for n in p],
            10: [n for f in cfg.layer_settings.values() for p in f.values() for n in p],
            11: matrix_models(cfg), 12: [n for m in cfg.methods.values() for n in (method_positions(m)[:1] or [{}])[0].values()],
            22: ["at_it10", "at_it1"], 23: seeds}


def unstored_rows(ctx: Context, cfg: PaperConfig, ok: Availability, chosen: Dict[str, Tuple[Any, Context]]) -> Dict[int, str]:
    """``stored_only``: claims 1-3 whose Table 1 row has models here but none of its seed pairs stored."""
    part = chosen.get("seeds")
    stored = {tuple(p) for p in part[0].pairs} if part else set()
    out = {}
    for kind, number in (("vanilla", 1), ("at", 2), ("cross", 3)):
        here = [tuple(p) for p in table1_pairs(cfg).get(kind, []) if ok.all(p)]
        if here and not stored.intersection(here):
            out[number] = (f"none of its {len(here)} seed pair(s) ({', '.join(f'{a} / {b}' for a, b in here)}) is in the "
                           "results store yet; experiment.stored_only=true")
    return out


def judge(cfg: PaperConfig, evidence: Dict[int, Evidence], ok: Availability,
          left_out: Optional[Dict[str, str]] = None, rows_left_out: Optional[Dict[int, str]] = None
          ) -> Dict[int, Tuple[Verdict, List[str]]]:
    """Each claim's verdict; a claim whose every part was skipped (``experiment.skip``) or ``left_out``
    ({part: why}: not stored, ``experiment.stored_only``) is "not measured in this report"."""
    out = {}
    needs = _needs(cfg)
    why = {**{part: "experiment.skip" for part in cfg.skip}, **{p: f"{w}; experiment.stored_only=true"
                                                                 for p, w in (left_out or {}).items()}}
    # the parts this config has (seeds_<objective> only for its stir_adv_objectives) feeding each claim
    # (graded_<i>, claim 7's graded family, is judged in the scorecard, not here: it does not feed claim 7's verdict)
    configured = [part for part in PARTS if (not part.startswith("seeds_") or part[len("seeds_"):] in cfg.stir_adv_objectives)
                  and not part.startswith("graded_")]
    feeding = {n: [part for part in configured if n in PARTS[part]] for n in range(1, len(CLAIMS) + 1)}
    absent = {n: parts for n, parts in feeding.items() if parts and all(p in why for p in parts)}
    for c in CLAIMS:
        if c.number in (rows_left_out or {}):
            out[c.number] = (Verdict(NOT_RUN, f"left out of this report: {rows_left_out[c.number]}"), [])
            continue
        if c.number in absent:
            missing = ok.why(needs.get(c.number, []))
            reasons = "; ".join(f"{p}: {why[p]}" for p in absent[c.number])
            out[c.number] = (Verdict(NOT_RUN, f"left out of this report ({reasons}); "
                                     f"{missing or 'its models are here: run without it to measure them'}"), [])
            continue
        e = evidence.get(c.number)
        if e is None or e.evidence is None:
            missing = (e.missing if e is not None and e.missing else "") or ok.why(needs.get(c.number, []))
            if c.number == 10 and c.not_testable_here:
                missing = c.not_testable_here + (f"; {missing}" if missing and c.not_testable_here not in missing else "")
            out[c.number] = (c.judge(None, missing=missing), [])
        else:
            out[c.number] = (c.judge(e.evidence), [n for n in e.notes if n])
    return out


def summary_line(verdicts: Dict[int, Tuple[Verdict, List[str]]]) -> str:
    """'4 of 12 claims hold, 3 do not (2 not resolved at this budget), 2 not testable here, ...': a
    claim that does not hold is either contradicted (its interval on the wrong side) or not resolved
    (its interval straddles the threshold), and the line says how many are which."""
    held = sum(vd.outcome == HOLDS for vd, _ in verdicts.values())
    failed = [vd for vd, _ in verdicts.values() if vd.outcome == v.FAILS]
    unresolved = sum(vd.reason.startswith(v.NOT_RESOLVED) for vd in failed)
    untestable = sum(vd.outcome == NOT_TESTABLE for vd, _ in verdicts.values())
    not_run = sum(vd.outcome == NOT_RUN for vd, _ in verdicts.values())
    return (f"{held} of {len(verdicts)} claims hold"
            + (f", {len(failed)} do not ({unresolved} not resolved at this budget)" if failed else "")
            + f", {untestable} not testable here"
            + (f", {not_run} not measured in this report" if not_run else ""))
