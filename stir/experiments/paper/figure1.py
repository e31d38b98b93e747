"""Figure 1 (claim 8): STIR(m_t|m_t-1) of consecutive models against m_t's training-set size, per
family, judged on the chance-corrected reading where every link has it."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from stir.experiments.context import Context
from stir.experiments.incremental import IncrementalConfig, links
from stir.experiments.intervals import num as _num
from stir.experiments.paper.parts import Availability
from stir.experiments.paper.readings import NAN, Evidence, calibrated, cell_text, direction_reading
from stir.experiments.paper_config import PaperConfig
from stir.paper import Interval, levels
from stir.paper import verdicts as v

def figure1(ctx: Context, cfg: PaperConfig, ok: Availability, part: Optional[Tuple[IncrementalConfig, Context]]):
    """Claim 8: STIR(m_t|m_t-1) against m_t's training-set size, per family; a family whose chain is
    left out or cut short (``parts``: at its first missing model) says so in the claim's notes."""
    if part is None:
        return [], None
    chains, pctx = part[0].chains, part[1]
    notes = []
    for family, chain in cfg.chains.items():
        kept = len(chains.get(family, ()))
        if kept < len(chain):
            what = "left out" if not kept else f"cut after {chain[kept - 1]} ({kept} of {len(chain)} models)"
            first = [n for n in chain[kept:] if n in ok.missing][:1]  # the first missing model cuts a chain
            notes.append(f"{family} chain {what}: {ok.why(first) if first else 'not measured in this report'}")
    raw, corrected, rows = {}, {}, []
    for family, chain in chains.items():
        raw[family], corrected[family] = [], []
        for prev, cur in links(chain):
            m_prev, m_cur = ctx.model(prev), ctx.model(cur)
            p = pctx.pair(m_prev, m_cur)
            d21, d12 = p.get("m2|m1"), p.get("m1|m2")
            s, c = direction_reading(d21), calibrated(d21, "chance_corrected")
            size = m_cur.data.train_size or NAN
            raw[family].append((size, s))
            corrected[family].append((size, c))
            cal = d21.calibration.get("stir") if d21 is not None else None
            rows.append({"family": family, "train size of m_t": size, "link": f"{prev} -> {cur}",
                         "STIR(m_t|m_t-1)": cell_text(s), "floor": _num(cal.floor if cal else None),
                         "chance-corrected": cell_text(c), "STIR(m_t-1|m_t)": cell_text(direction_reading(d12)),
                         "chance-corrected (m_t-1|m_t)": cell_text(calibrated(d12, "chance_corrected"))})
    curves, reading_note = _curve_reading(raw, corrected)
    seeds_note = ("one training seed per size: each link's interval is over images and draws only (the "
                  "between-seed spread of a size is not measured)")
    return rows, Evidence(v.CurveEvidence(curves), notes=notes + ([reading_note, seeds_note] if curves else []))

def _curve_reading(raw: Dict[str, List[Tuple[float, Interval]]],
                   corrected: Dict[str, List[Tuple[float, Interval]]]) -> Tuple[Dict[str, List[Tuple[float, Interval]]], str]:
    """The curves claim 8 is judged on, and the note that says which reading: the chance-corrected
    one (kappa(S, F) / kappa(C, F_C), the floor of each m_t removed: m_t's own X' statistics set
    it, and they change with the training-set size) where every link has it, else the raw STIR."""
    if all(i.measured for points in corrected.values() for _, i in points):
        return corrected, ("judged on the chance-corrected STIR(m_t|m_t-1) (kappa(S, F) / kappa(C, F_C): each link "
                           "read against its own floor); the raw values are beside them in the table")
    return raw, ("judged on the raw STIR(m_t|m_t-1): the chance-corrected reading is not measured at every link "
                 "(results stored before it existed)")


def reverse_curves(ctx: Context, inc: Optional[Tuple[IncrementalConfig, Context]]) -> Evidence:
    """Claim 16, Figure 1's other direction: STIR(m_t-1|m_t) (chance-corrected where measured) against
    m_t's training-set size, per family."""
    curves = {}
    if inc is not None:
        for family, chain in inc[0].chains.items():
            curves[family] = []
            for prev, cur in links(chain):
                m_prev, m_cur = ctx.model(prev), ctx.model(cur)
                d12 = inc[1].pair(m_prev, m_cur).get("m1|m2")
                c = calibrated(d12, "chance_corrected")
                curves[family].append((m_cur.data.train_size or NAN, c if c.measured else direction_reading(d12)))
    return Evidence(levels.RiseEvidence(curves) if curves else None, missing="the incremental part is not in this report",
                    notes=["chance-corrected STIR(m_t-1|m_t), as claim 8's other direction"])
