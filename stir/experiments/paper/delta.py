"""Claim 6 as the paper measured it: Table 3's Delta row (appendix C, eq. 8) beside ours, per start.

    rows = delta_rows(ctx, table3_pairs(cfg.recipes))            # served from the store, or measured

Table 3 has three columns of two directions each: the vanilla seed pair, the AT seed pair and AT
against vanilla (m1 = AT, m2 = vanilla). In a column "a|b" Delta(a|b) keeps b's representation (eq. 8's
m1, the reference, as in STIR(a|b)) and pushes a's (``stir.measure.delta``). Our models are Table 1's:
the first seed pair of each recipe, and the first AT model against the first vanilla one. Each
direction is measured from both starts of ``stir.inversion.stimuli`` (x with the attacker's random
start, and the inversion's noise seed), on the first ``n`` images of the evaluation's sample (``split``,
``image_seed``; the paper: 1000 training images, 5 runs).

Measuring (what is shipped in zoo/store was made by this, its sizes in ``DeltaConfig``'s defaults):

    python -m stir.experiments.paper.delta profile=laptop data.source=PATH [out_dir=DIR]
    python -m stir.zoo.ship_results DIR/store

``appendix_c_delta`` is what the paper report reads of it: the stored directions as claim 6's Delta.
"""
from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from stir.experiments.context import Context
from stir.experiments.paper.parts import Availability
from stir.inversion.stimuli import STARTS, StimulusConfig
from stir.measure.delta import DeltaResult, evaluate_delta
from stir.paper import Interval
from stir.paper.published import TABLE3_DELTA as _TABLE3_DELTA
from stir.store import NotStored

log = logging.getLogger(__name__)

# Table 3's Delta row (appendix C): {column: {direction: (mean, +- over 5 runs)}}; in the column "AT / vanilla"
# m1 is AT and m2 vanilla. The direction "m1|m2" keeps m2 (the reference) and pushes m1.
# Read from the paper's data (stir.paper.published.TABLE3_DELTA: per column, m1|m2 then m2|m1).
PAPER_DELTA: Dict[str, Dict[str, Tuple[float, float]]] = {
    column: {d.column.rsplit(", ", 1)[1]: (d.value, d.spread) for d in _TABLE3_DELTA[2 * i:2 * i + 2]}
    for i, column in enumerate(("vanilla / vanilla seed", "AT / AT seed", "AT / vanilla"))
}
NOT_STORED = "not measured (not in the results store; experiment.stored_only measures nothing)"


@dataclass(frozen=True)
class DeltaConfig:
    """The sizes and settings of our Delta row: ``n`` images, the solver (``StimulusConfig``'s fields but
    the start), each start in ``starts``."""

    n: int = 16
    steps: int = 1000
    step_size: float = 0.5
    objective: str = "paper"
    seed: int = 0
    starts: Tuple[str, ...] = STARTS

    def stimulus(self, start: str) -> StimulusConfig:
        return StimulusConfig(start=start, objective=self.objective, steps=self.steps, step_size=self.step_size,
                              seed=self.seed)


def table3_pairs(recipes: Mapping[str, Sequence[str]]) -> Dict[str, Tuple[str, str]]:
    """Table 3's columns on our models: {column: (m1, m2)} from the paper preset's ``recipes``
    ({"vanilla": [seeds...], "at": [seeds...]}): each recipe's first two seeds, and (at[0], vanilla[0])."""
    out: Dict[str, Tuple[str, str]] = {}
    if len(recipes.get("vanilla", ())) >= 2:
        out["vanilla / vanilla seed"] = (recipes["vanilla"][0], recipes["vanilla"][1])
    if len(recipes.get("at", ())) >= 2:
        out["AT / AT seed"] = (recipes["at"][0], recipes["at"][1])
    if recipes.get("at") and recipes.get("vanilla"):
        out["AT / vanilla"] = (recipes["at"][0], recipes["vanilla"][0])
    return out


def measure(ctx: Context, m1: str, m2: str, direction: str, start: str, cfg: DeltaConfig) -> DeltaResult:
    """Delta of one direction ("m1|m2": m2 kept, m1 pushed; "m2|m1" the other way) from one start, through
    the context's store (read-only there: ``NotStored``). X: the first ``cfg.n`` images of the reference's
    data set as the evaluation samples them (CIFAR-10's ``split`` for Table 3's models)."""
    if direction not in ("m1|m2", "m2|m1"):
        raise ValueError(f"direction must be 'm1|m2' or 'm2|m1', got {direction!r}")
    target, ref = (m1, m2) if direction == "m1|m2" else (m2, m1)
    r, t = ctx.model(ref), ctx.model(target)
    images = ctx.labelled_images(r, n=cfg.n)[0]
    return evaluate_delta(r.module, t.module, images, cfg=cfg.stimulus(start), names=(r.label, t.label),
                          ids=(r.identity, t.identity), store=ctx.store, record=ctx.record(r, t))


def delta_rows(ctx: Context, pairs: Mapping[str, Tuple[str, str]], cfg: Optional[DeltaConfig] = None) -> List[Dict[str, Any]]:
    """One row per column of ``pairs`` ({column: (m1, m2)}, e.g. ``table3_pairs``), direction and start:
    ours (mean [interval over images]) beside the paper's Delta (mean +- sd over its 5 runs).

    Columns named as in ``PAPER_DELTA`` carry the paper's value; others "-". Results come from the
    context's store (shipped ones included) or are measured now; with a read-only store (the paper
    kind's ``stored_only``) a missing one is a row that says so, never measured. Row keys: column, m1,
    m2, direction, start, "Delta (ours)", low, high, n, steps, "Delta (paper)", "paper sd",
    "median r1", "median r2" (how well the reference still sees x_c, how far the target moved), "along"
    ({step: Delta of the best iterate so far}: the budget's effect), why (empty where measured).
    """
    cfg = cfg or DeltaConfig()
    out: List[Dict[str, Any]] = []
    for column, (m1, m2) in pairs.items():
        for direction in ("m1|m2", "m2|m1"):
            paper = PAPER_DELTA.get(column, {}).get(direction)
            for start in cfg.starts:
                row: Dict[str, Any] = {"column": column, "m1": m1, "m2": m2, "direction": direction, "start": start,
                                       "n": cfg.n, "steps": cfg.steps, "Delta (paper)": paper[0] if paper else None,
                                       "paper sd": paper[1] if paper else None}
                try:
                    d = measure(ctx, m1, m2, direction, start, cfg)
                except NotStored:
                    out.append({**row, "Delta (ours)": None, "low": None, "high": None, "median r1": None,
                                "median r2": None, "along": {}, "why": NOT_STORED})
                    continue
                out.append({**row, "Delta (ours)": d.delta, "low": d.low, "high": d.high,
                            "median r1": _median(d.r1), "median r2": _median(d.r2), "along": d.along, "why": ""})
    return out


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    return (s[(len(s) - 1) // 2] + s[len(s) // 2]) / 2


def main(argv: Sequence[str]) -> None:
    """Measure Table 3's Delta row of the paper preset's models into ``out_dir/store`` and log it.

    ``argv``: evaluate.py's key=value overrides (profile=laptop data.source=PATH out_dir=DIR); the
    recipes are the paper preset's (``experiment=paper``)."""
    from stir.experiments.library import open_evaluation

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    ctx = open_evaluation("experiment=paper", *argv)
    exp = ctx.config["experiment"]
    recipes, cfg = exp["recipes"], DeltaConfig(n=exp["delta_n"], steps=exp["delta_steps"])
    # start by start: every direction of the first start is stored before the second start begins
    rows = [row for start in cfg.starts for row in delta_rows(ctx, table3_pairs(recipes), replace(cfg, starts=(start,)))]
    for row in rows:
        log.info("%s %s (%s) start=%s: Delta %.3f [%.3f, %.3f] (paper %s), median r1 %.3f, r2 %.3f", row["column"],
                 row["direction"], f"{row['m1']} / {row['m2']}", row["start"], row["Delta (ours)"], row["low"],
                 row["high"], row["Delta (paper)"], row["median r1"], row["median r2"])
        log.info("  along the budget: %s", row["along"])



def appendix_c_delta(ctx, cfg) -> Dict[str, Interval]:
    """Claim 6's Delta = mean ||x - x_c||_2 after eq. 8, per direction and start ("target|ref from
    START" -> Interval over images), for Table 3's columns on the preset's Table 1 models; the
    directions not in the store are left out (a read-only store measures nothing)."""
    ok = Availability(ctx)
    here = {column: pair for column, pair in table3_pairs(cfg.recipes).items() if ok.all(list(pair))}
    out: Dict[str, Interval] = {}
    # the columns whose models are here (the others: not testable), at the paper kind's sizes
    for row in delta_rows(ctx, here, DeltaConfig(n=cfg.delta_n, steps=cfg.delta_steps)):
        if row["Delta (ours)"] is None:
            continue
        target, ref = (row["m1"], row["m2"]) if row["direction"] == "m1|m2" else (row["m2"], row["m1"])
        out[f"{target}|{ref} from {row['start']}"] = Interval(row["Delta (ours)"], row["low"], row["high"])
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
