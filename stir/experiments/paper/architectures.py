"""Figures 4 and 8 (claim 11): STIR among residual nets against STIR between residual and VGG nets,
per family, within each training-seed position and pooled over the positions by random effects."""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from stir.experiments import matrix as matrix_kind
from stir.experiments.context import Context
from stir.experiments.matrix import MatrixConfig
from stir.experiments.paper.parts import Availability, architecture_positions, matrix_models
from stir.experiments.paper.readings import (Evidence, calibrated, cell_text, confidence_z, difference_of,
                                             direction_reading, mean_of, over_seed_pairs, positions_held)
from stir.experiments.paper_config import PaperConfig
from stir.paper import Interval, levels
from stir.paper import verdicts as v

def figures4_8(ctx: Context, cfg: PaperConfig, part: Optional[Tuple[MatrixConfig, Context]], ok: Availability):
    """Claim 11: mean STIR among residual nets minus mean STIR between residual and VGG nets, per family.

    The difference is taken within each training-seed position (``architecture_positions``: the
    models of one seed together, se = sqrt(se_a^2 + se_b^2)) and pooled over the positions by random
    effects (``over_seed_pairs``), as claim 12's, so its interval holds the between-seed spread; with
    one position it holds images and draws only, and the verdict cannot go beyond "not resolved"."""
    if part is None:
        return [], None
    mcfg, pctx = part
    conf, z = ctx.estimator.calibration.confidence, confidence_z(ctx)
    index = {n: i for i, n in enumerate(mcfg.models)}
    rows_ = [matrix_kind.measure_row(pctx, mcfg, i)[0] for i in range(len(mcfg.models))]

    def stir(a: str, b: str) -> Interval:  # STIR(b | a): row a is the reference
        return direction_reading(rows_[index[a]][index[b]])

    def corrected(a: str, b: str) -> Interval:  # the same, read against its target's own floor
        return calibrated(rows_[index[a]][index[b]], "chance_corrected")

    families = architecture_positions(cfg, lambda n: n in index)
    raw = {f: architecture_contrast(p, stir, z, conf) for f, p in families.items()}
    chance = {f: architecture_contrast(p, corrected, z, conf) for f, p in families.items()}
    # The targets differ in architecture, and so do their floors (a VGG's X' statistics are not a
    # ResNet's): judged on the chance-corrected reading where every cell has it, as claim 8.
    use_corrected = all(w.measured for c in chance.values() for w in c[2])  # a difference per position: every cell
    judged, read = (chance, corrected) if use_corrected else (raw, stir)
    diffs, seeds, rows = {}, {}, []
    for family, positions in families.items():
        among, across, within, d = judged[family]
        n = len(positions)
        name = f"{family}: residual/residual - residual/VGG"
        diffs[name], seeds[name] = d, n
        residual, vgg = positions[0]["residual"], positions[0]["vgg"]
        vgg_vgg = over_seed_pairs([mean_of([read(a, b) for a in p["vgg"] for b in p["vgg"] if a != b], z, conf)
                                   for p in positions], conf)[0]
        rows.append({"family": family, "residual": ", ".join(residual), "VGG": ", ".join(vgg),
                     "reading": "chance-corrected" if use_corrected else "raw",
                     "residual / residual": cell_text(among), "residual / VGG": cell_text(across), "difference": cell_text(d),
                     "per seed position": ", ".join(f"{w.value:+.3f}" for w in within),
                     "difference (raw STIR)": cell_text(raw[family][3]),
                     "VGG / VGG (not in the claim)": cell_text(vgg_vgg),
                     "directions per position": f"{len(residual) * (len(residual) - 1)} / {2 * len(residual) * len(vgg)}",
                     "seed positions": n, "interval holds": positions_held(n),
                     "paper": "> 0 (a figure: no printed value)"})
    names = matrix_models(cfg)
    why = {family: ok.why([n for names in groups.values() for n in names]) for family, groups in cfg.architectures.items()}
    notes = [f"{family} family left out: it needs two residual nets and one VGG here" + (f" ({why[family]})" if why[family] else "")
             for family in cfg.architectures if family not in families]
    notes += [f"left out: {ok.why(names)}"] if diffs and ok.why(names) else []
    if diffs:
        notes.append("judged on the chance-corrected STIR (kappa(S, F) / kappa(C, F_C): each direction read against its "
                     "target's own floor, which differs between architectures); the raw difference is beside it"
                     if use_corrected else "judged on the raw STIR: the chance-corrected reading is not measured in every "
                     "cell (results stored before it existed)")
    return rows, Evidence(v.ContrastEvidence(diffs, seed_positions=seeds) if diffs else None,
                          missing=ok.why(names), notes=notes)


def architecture_contrast(positions: Sequence[Mapping[str, Sequence[str]]], stir: Callable[[str, str], Interval],
                          z: float, confidence: float) -> Tuple[Interval, Interval, List[Interval], Interval]:
    """Claim 11's readings of one family over its seed positions ({"residual": [...], "vgg": [...]}
    each; ``stir(a, b)`` is STIR(b | a)): (STIR among residual nets, STIR between residual and VGG
    nets, the difference within each position, the difference pooled over the positions).

    Within a position, "among" is the mean over the ordered residual pairs and "across" over both
    directions of every residual / VGG pair (se of a mean of independent readings); the difference
    is among - across, and it is pooled over the positions by random effects (``over_seed_pairs``:
    Hartung-Knapp, so two positions that disagree widen it past either one's interval)."""
    among, across, within = [], [], []
    for p in positions:
        residual, vgg = p["residual"], p["vgg"]
        ma = mean_of([stir(a, b) for a in residual for b in residual if a != b], z, confidence)
        mb = mean_of([stir(a, b) for a in residual for b in vgg] + [stir(b, a) for a in residual for b in vgg], z, confidence)
        among.append(ma), across.append(mb), within.append(difference_of(ma, mb, z, confidence))
    sets = [tuple(n for names in p.values() for n in names) for p in positions]
    return (over_seed_pairs(among, confidence, sets)[0], over_seed_pairs(across, confidence, sets)[0], within,
            over_seed_pairs(within, confidence, sets)[0])


def across_types(ctx: Context, cfg: PaperConfig, arch: Optional[Tuple[MatrixConfig, Context]], z: float,
                 conf: float) -> Dict[int, Evidence]:
    """Claims 18 (STIR drops across training types: residual nets of one loss against AT / vanilla) and
    19 (AT residual nets and AT VGGs share highly), per seed position of the architectures matrix."""
    out: Dict[int, Evidence] = {}
    if arch is not None:
        mcfg, pctx = arch
        index = {n: i for i, n in enumerate(mcfg.models)}
        rows_ = [matrix_kind.measure_row(pctx, mcfg, i)[0] for i in range(len(mcfg.models))]

        def stir(a, b):
            return direction_reading(rows_[index[a]][index[b]])

        fams = architecture_positions(cfg, lambda n: n in index)
        van, at = fams.get("vanilla", []), fams.get("at", [])
        within, across_at = [], []
        for pv, pa in zip(van, at):
            rv, ra = pv["residual"], pa["residual"]
            same = mean_of([stir(a, b) for g in (rv, ra) for a in g for b in g if a != b], z, conf)
            cross = mean_of([stir(a, b) for a in rv for b in ra] + [stir(b, a) for a in rv for b in ra], z, conf)
            within.append(difference_of(same, cross, z, conf))
        for pa in at:
            across_at.append(mean_of([stir(a, b) for a in pa["residual"] for b in pa["vgg"]]
                                   + [stir(b, a) for a in pa["residual"] for b in pa["vgg"]], z, conf))
        if within:
            d = over_seed_pairs(within, conf)[0]
            out[18] = Evidence(v.ContrastEvidence({"same loss - across types (ResNets)": d},
                                                  {"same loss - across types (ResNets)": len(within)}),
                               notes=[f"{len(within)} seed position(s): " + ", ".join(f"{w.value:+.3f}" for w in within)])
        if across_at:
            out[19] = Evidence(levels.LevelEvidence({"AT residual / AT VGG": over_seed_pairs(across_at, conf)[0]},
                                                    v.HIGH_STIR, math.inf, f"above {v.HIGH_STIR}"),
                               notes=[f"{len(across_at)} seed position(s), raw STIR, both directions"])
    for n in (18, 19):
        out.setdefault(n, Evidence(missing="the architectures part is not in this report"))
    return out
