"""Figures 5 and 9 (claim 12): STIR(AT, TRADES) against STIR(AT, MART) and STIR(TRADES, MART) at the
penultimate layer, per setting, within each training-seed position and pooled over the positions."""
from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from stir.experiments.context import Context
from stir.experiments.intervals import from_se as _from_se
from stir.experiments.pairs import PairsConfig
from stir.experiments.paper.parts import METHOD_LABELS, METHOD_PAIRS, Availability, method_positions
from stir.experiments.paper.readings import (NAN, NOT_STORED, Evidence, cell_text, confidence_z, difference_of,
                                             direction_reading, mean_of, over_seed_pairs, positions_held)
from stir.experiments.paper.table2 import robustness_gap
from stir.experiments.paper_config import PaperConfig
from stir.measure.results import DIRECTIONS
from stir.paper import Interval, levels
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
        within = [difference_of(p[METHOD_PAIRS[0]], p[other], z, confidence) for p in positions]
        name = f"STIR(AT, TRADES) - STIR({METHOD_LABELS[other[0]]}, {METHOD_LABELS[other[1]]})"
        diffs[name] = over_seed_pairs(within, confidence)[0]
    shared = len({m for names in models for m in names}) < sum(len(names) for names in models)
    return values, diffs, positions_held(len(positions), shared)


def figures5_9(ctx: Context, cfg: PaperConfig, ok: Availability, part: Optional[Tuple[PairsConfig, Context]]):
    """Claim 12: STIR(AT, TRADES) against STIR(AT, MART) and STIR(TRADES, MART), both directions' mean at the
    last tap (the penultimate layer), per setting, over its training-seed positions (``method_contrasts``)."""
    conf, z = ctx.estimator.calibration.confidence, confidence_z(ctx)
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
            positions.append({key: mean_of([direction_reading(part[1].layerwise(ctx.model(a), ctx.model(b)).rows[-1].get(d))
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
                     **{f"{METHOD_LABELS[a]} / {METHOD_LABELS[b]}": cell_text(values[(a, b)]) for a, b in METHOD_PAIRS},
                     **{name: cell_text(d) for name, d in contrast.items()}, "interval holds": held,
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


def _layer_mean(pctx, ctx, a: str, b: str, z: float, conf: float) -> Interval:
    result = pctx.layerwise(ctx.model(a), ctx.model(b))
    return mean_of([direction_reading(row.get(d)) for row in result.rows for d in DIRECTIONS], z, conf)


def method_layer_means(ctx, cfg, part, z: float, conf: float) -> Dict[str, List[Dict[Tuple[str, str], Interval]]]:
    """Per methods setting, per seed position whose three pairs are measured: the layer mean of STIR
    (every tap, both directions) of each method pair."""
    if part is None:
        return {}
    measured = {tuple(p) for p in part[0].pairs}
    out = {}
    for setting, m in cfg.methods.items():
        positions = []
        for names in method_positions(m):
            pairs = [(names[a], names[b]) for a, b in METHOD_PAIRS]
            if all(p in measured for p in pairs):
                positions.append({key: _layer_mean(part[1], ctx, *p, z, conf) for key, p in zip(METHOD_PAIRS, pairs)})
        if positions:
            out[setting] = positions
    return out


def layer_mean_evidence(ctx: Context, cfg: PaperConfig, ok: Availability, part: Optional[Tuple[PairsConfig, Context]],
                        z: float, conf: float) -> Dict[int, Evidence]:
    """Claims 12 (layer-wise: the layer mean of Figures 5/9), 13 (section 5.3's "around 0.5") and 20
    (VGG16's methods share more than ResNet18's), from the layer mean of each method pair's STIR per
    setting and seed position (``method_layer_means``)."""
    out: Dict[int, Evidence] = {}
    means = method_layer_means(ctx, cfg, part, z, conf)
    diffs, seeds, band = {}, {}, {}
    for setting, positions in means.items():
        models = [tuple(p.values()) for p in method_positions(cfg.methods[setting])][:len(positions)]
        _, contrast, _ = method_contrasts(positions, models, z, conf)
        diffs.update({f"{setting}: {k}": d for k, d in contrast.items()})
        seeds.update({f"{setting}: {k}": len(positions) for k in contrast})
        for pair in METHOD_PAIRS:
            band[f"{setting}: {METHOD_LABELS[pair[0]]}/{METHOD_LABELS[pair[1]]}"] = \
                over_seed_pairs([p[pair] for p in positions], conf)[0]
    why_methods = "" if means else (ok.why([n for m in cfg.methods.values() for ns in m.values() for n in ns])
                                    or "the at_methods part is not in this report")
    out[12] = Evidence(v.ContrastEvidence(diffs, seeds) if diffs else None, missing=why_methods,
                       notes=["layer mean: every tap, both directions, pooled over seed positions"])
    first = {k: i for k, i in band.items() if k.startswith("resnet18 beta 1.0")}
    out[13] = Evidence(levels.LevelEvidence(first, *levels.AROUND_HALF, "layer-mean STIR within [0.3, 0.7]")
                       if first else None, missing=why_methods,
                       notes=["ResNet18 at beta 1.0 (Appendix B); the other settings: " + ", ".join(
                           f"{k} {i}" for k, i in band.items() if k not in first)] if first else [])
    if "resnet18 beta 1.0" in means and "vgg16 beta 1.0" in means:
        vgg, res = means["vgg16 beta 1.0"], means["resnet18 beta 1.0"]
        d20 = {f"VGG16 - ResNet18 {METHOD_LABELS[a]}/{METHOD_LABELS[b]}":
               difference_of(over_seed_pairs([p[(a, b)] for p in vgg], conf)[0],
                           over_seed_pairs([p[(a, b)] for p in res], conf)[0], z, conf) for a, b in METHOD_PAIRS}
        out[20] = Evidence(v.ContrastEvidence(d20, {k: len(vgg) for k in d20}),
                           notes=[f"VGG16 {len(vgg)} seed position(s), ResNet18 {len(res)}"])
    else:
        out[20] = Evidence(missing=why_methods or "the VGG16 or ResNet18 beta 1.0 setting is not measured")
    return out


def accuracy_gaps(ctx: Context, cfg: PaperConfig, ok: Availability, z: float) -> Evidence:
    """Claim 21, the premise of section 5.3: AT, TRADES and MART (ResNet18, beta 1.0) of one seed
    position are about as accurate, clean and robust (zoo/models accuracies, two-proportion intervals)."""
    gaps = {}
    setting = cfg.methods.get("resnet18 beta 1.0", {})
    for i, names in enumerate(method_positions(setting) if setting else []):
        if not ok.all(list(names.values())):
            continue
        for a, b in METHOD_PAIRS:
            ma, mb = ctx.model(names[a]), ctx.model(names[b])
            gaps[f"robust {names[a]} - {names[b]}"] = robustness_gap(ma, mb, z)
            acc = [m.metrics.get("test/acc", NAN) for m in (ma, mb)]
            if all(math.isfinite(x) for x in acc):  # the 10,000 CIFAR-10 test images each
                gaps[f"clean {names[a]} - {names[b]}"] = _from_se(acc[0] - acc[1], math.sqrt(sum(x * (1 - x) / 10000
                                                                                                 for x in acc)), z)
    return Evidence(levels.LevelEvidence(gaps, -levels.SIMILAR_ACCURACY, levels.SIMILAR_ACCURACY,
                                         f"accuracy gaps within +-{levels.SIMILAR_ACCURACY}") if gaps else None,
                    missing="the methods' models are not here")
