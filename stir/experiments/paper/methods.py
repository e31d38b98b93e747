"""Figures 5 and 9 (claim 12): STIR(AT, TRADES) against STIR(AT, MART) and STIR(TRADES, MART) at the
penultimate layer, per setting, within each training-seed position and pooled over the positions."""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from stir.experiments.context import Context
from stir.experiments.pairs import PairsConfig
from stir.experiments.paper.parts import METHOD_LABELS, METHOD_PAIRS, Availability, method_positions
from stir.experiments.paper.readings import (NOT_STORED, Evidence, _cell, _difference, _direction_stir, _mean,
                                             _positions_held, _z, over_seed_pairs)
from stir.experiments.schema import PaperConfig
from stir.measure.results import DIRECTIONS
from stir.paper import Interval
from stir.paper import verdicts as v

def method_contrasts(positions: Sequence[Mapping[Tuple[str, str], Interval]], models: Sequence[Sequence[str]],
                     z: float, confidence: float) -> Tuple[Dict[Tuple[str, str], Interval], Dict[str, Interval], str]:
    """Claim 12's readings of one setting: ``positions`` holds, per training-seed position, the STIR
    of each method pair of METHOD_PAIRS ({("at", "trades"): Interval, ...}); ``models``, per position,
    its three models. Returns ({method pair: its value over the positions}, {"STIR(AT, TRADES) -
    STIR(AT, MART)" and "... - STIR(TRADES, MART)": interval}, what the intervals hold).

    Each difference is taken within a seed position (the three models of one seed, se = sqrt(se_a^2 +
    se_b^2)) and then pooled over the positions by random effects (``over_seed_pairs``), so its
    interval holds the between-seed spread; with one position it is that position's interval over
    images and draws, and the note says the spread is not measured."""
    values = {pair: over_seed_pairs([p[pair] for p in positions], confidence)[0] for pair in METHOD_PAIRS}
    diffs = {}
    for other in METHOD_PAIRS[1:]:
        within = [_difference(p[METHOD_PAIRS[0]], p[other], z, confidence) for p in positions]
        name = f"STIR(AT, TRADES) - STIR({METHOD_LABELS[other[0]]}, {METHOD_LABELS[other[1]]})"
        diffs[name] = over_seed_pairs(within, confidence)[0]
    shared = len({m for names in models for m in names}) < sum(len(names) for names in models)
    return values, diffs, _positions_held(len(positions), shared)


def figures5_9(ctx: Context, cfg: PaperConfig, ok: Availability, part: Optional[Tuple[PairsConfig, Context]]):
    """Claim 12: STIR(AT, TRADES) against STIR(AT, MART) and STIR(TRADES, MART), both directions' mean at the
    last tap (the penultimate layer), per setting, over its training-seed positions (``method_contrasts``)."""
    conf, z = ctx.estimator.calibration.confidence, _z(ctx)
    diffs, seeds, rows, absent, notes = {}, {}, [], [], []
    measured = {tuple(p) for p in part[0].pairs} if part else set()
    unmeasured: List[str] = []  # settings whose models are here but not their pairs (stored_only: not stored yet)
    for setting, m in cfg.methods.items():
        positions, models, left = [], [], []
        for i, names in enumerate(method_positions(m)):
            pairs = [(names[a], names[b]) for a, b in METHOD_PAIRS]
            if not ok.all(list(names.values())) or not all(p in measured for p in pairs):
                left.append((i, list(names.values())))
                continue
            positions.append({key: _mean([_direction_stir(part[1].layerwise(ctx.model(a), ctx.model(b)).rows[-1].get(d))
                                          for d in DIRECTIONS], z, conf) for key, (a, b) in zip(METHOD_PAIRS, pairs)})
            models.append(tuple(names.values()))
        if not positions:
            if left and ok.all(left[0][1]):
                unmeasured.append(f"{setting} ({' / '.join(left[0][1])})")
            else:
                absent += left[0][1] if left else []
            continue
        if left:
            notes.append(f"{setting}: seed position(s) {', '.join(str(i) for i, _ in left)} left out: {_why_left(ok, left)}")
        values, contrast, held = method_contrasts(positions, models, z, conf)
        diffs.update({f"{setting}: {name}": d for name, d in contrast.items()})
        seeds.update({f"{setting}: {name}": len(positions) for name in contrast})
        notes.append(f"{setting}: {held}")
        rows.append({"setting": setting, "seed positions": len(positions),
                     **{f"{METHOD_LABELS[a]} / {METHOD_LABELS[b]}": _cell(values[(a, b)]) for a, b in METHOD_PAIRS},
                     **{name: _cell(d) for name, d in contrast.items()}, "interval holds": held,
                     "paper": "AT / TRADES highest (a figure: no printed value)"})
    not_here = f"{NOT_STORED}: {', '.join(unmeasured)}" if unmeasured else ""
    if diffs and absent:
        notes.append(f"settings left out: {ok.why(absent)}")
    notes += [not_here] if diffs and not_here else []
    return rows, Evidence(v.ContrastEvidence(diffs, seed_positions=seeds) if diffs else None,
                          missing="; ".join(filter(None, [ok.why(absent), not_here])), notes=notes)


def _why_left(ok: Availability, left: List[Tuple[int, List[str]]]) -> str:
    """Why the seed positions ``left`` ([(position, its models)]) are out of a setting: the missing
    models' reasons, and the positions whose models are all here but not measured in this report."""
    unmeasured = [str(i) for i, names in left if ok.all(names)]
    return "; ".join(filter(None, [ok.why([n for _, names in left for n in names]),
                                   f"position(s) {', '.join(unmeasured)} {NOT_STORED}" if unmeasured else ""]))
