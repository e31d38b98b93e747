"""Experiment kind ``paper``: every claim of Nanda et al. (ICML 2022) asked of the zoo, in one report.

The kind composes the presets the paper's claims need (``seeds``, ``relative_robustness``,
``incremental``, ``layers``, ``architectures``, ``at_methods``) as the ``suite`` kind composes its
parts: each part runs through its own kind (``pairs``, ``matrix``, ``incremental``) with the
evaluation's store, images and estimator, its tables and figures entering the report under the
part's name. What the paper kind adds:

* **Only the models that exist.** A zoo name that is neither a finished local run nor shipped in
  ``zoo/`` is not trained (unless ``train_missing=true``): the parts run on the models there are,
  and every claim whose evidence needs a missing model says "not testable here: <model> is not
  trained or shipped (<its train command>)". The report is written for what could be measured.
* **Claims judged.** Each claim's evidence (``stir.paper.verdicts``' dataclasses of ``Interval``s)
  is built from the stored results and judged by ``Claim.judge``: holds / does not hold / not
  testable here, with the reason and the numbers.
* **Seed pairs.** Where a recipe has several training seeds (``recipes``: vanilla, vanilla_s1,
  vanilla_s2, ...), a recipe's value is ``stir.measure.seeds.seed_estimate`` over its seed pairs
  (random effects: between-seed-pair spread and image-level variance together). The pairs of one
  recipe share models ((a, b), (a, c), (b, c)), so they are not independent: the interval is then
  somewhat too narrow, and the report says so. One seed pair: the image-level interval of that pair,
  "one seed pair: between-seed spread not measured".
* **Ours beside theirs.** Table 1 with the published values (``stir.paper.claims``), each of ours
  with its calibrated reading (floor, normalised value with its interval, p-value).

Layer-wise slopes (claims 9, 10) are fitted to two calibrated readings of each tap (against its own
floor and ceiling, issue 29): the normalised STIR and the chance-corrected one (issue 31: 1 where
S = C = 1 whatever the floors); the claims are judged on the chance-corrected slopes where every
tap has that reading, else on the normalised ones (``_slope_reading``). Their interval propagates
the per-tap intervals (over images and draws, taps treated as independent).
"""
from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from stir.experiments import matrix as matrix_kind
from stir.experiments import paper_ablation, paper_scorecard, paper_table2
from stir.experiments.paper_stored import stored_parts
from stir.experiments.config import LayersConfig
from stir.experiments.schema import PaperConfig  # noqa: F401  (the kind's config: stir.experiments.schema)
from stir.experiments.context import Context
from stir.experiments.incremental import IncrementalConfig, links
from stir.experiments.matrix import MatrixConfig
from stir.experiments.pairs import PairsConfig
from stir.experiments.intervals import from_se as _from_se, num as _num, se as _se
from stir.experiments.registry import Kind, Unit, get, register
from stir.inversion.config import ADVERSARIAL_OBJECTIVES
from stir.measure.calibration import Calibration
from stir.measure.results import DIRECTIONS, DirectionResult, PairResult, Stat
from stir.measure.seeds import standard_error, z_value
from stir.paper import CLAIMS, HOLDS, NOT_RUN, NOT_TESTABLE, Interval, Verdict, claim
from stir.paper import verdicts as v
from stir.reporting import Report, Table
from stir.store import NotStored
from stir.zoo import MissingModelError

log = logging.getLogger(__name__)
NAN = math.nan
ONE_PAIR = "one seed pair: between-seed spread not measured"
SHARED = ("the seed pairs of one recipe share models ((a, b), (a, c), (b, c)): they are not independent, "
          "so the random-effects interval over them is somewhat too narrow")
DISJOINT = "the seed pairs share no model ((a_i, b_i) by seed): they are independent"
# What a claim says of models that are here but whose results are not (experiment.stored_only).
NOT_STORED = "not measured in this report (not in the results store yet)"
# The parts of the report (PaperConfig.skip names them) and the claims each one's evidence is.
PARTS = {"seeds": (1, 2, 3, 4, 5, 6, 14), **{f"seeds_{o}": (4,) for o in ADVERSARIAL_OBJECTIVES},
         "relative_robustness": (7,), "incremental": (8, 16), "layers": (9, 10, 17), "architectures": (11, 18, 19),
         "at_methods": (12, 13, 20), **{f"graded_{i}": (7,) for i in range(3)},
         "recipe_ablation": ()}
# The objective the published STIR_adv came from (the original code's r1 - 0.1 r2): claim 4 is judged on it.
PAPER_OBJECTIVE = "original"
# The published Table 1 pair of each row kind of ours.
TABLE1_PAIRS = {"vanilla": "vanilla / vanilla seed", "at": "AT / AT seed", "cross": "AT / vanilla"}


# ------------------------------------------------------------------------------------- which models exist


class Availability:
    """Which zoo names resolve to a model here (a finished run, a shipped model, or trained now with
    ``train_missing=true``) and, for those that do not, why (their train command)."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.missing: Dict[str, str] = {}  # name -> "not trained or shipped (python train.py ...)"
        self._ok: Dict[str, bool] = {}

    def __call__(self, name: str) -> bool:
        if name not in self._ok:
            try:
                self.ctx.model(name)
                self._ok[name] = True
            except MissingModelError as err:
                self._ok[name] = False
                partly = "; an unfinished run is there: allow_unfinished=true evaluates its checkpoint" \
                    if "unfinished run" in str(err) else ""
                self.missing[name] = f"{name} is not trained or shipped ({self.command(name)}{partly})"
        return self._ok[name]

    def command(self, name: str) -> str:
        try:
            return self.ctx.zoo.recipes.resolve(name).command
        except MissingModelError as err:  # warm-started from a parent that is missing
            return str(err).split("\n")[0]

    def all(self, names: Sequence[str]) -> bool:
        return all([self(n) for n in names])  # every name checked: each missing one is recorded

    def why(self, names: Sequence[str]) -> str:
        """'not testable here' reasons of the missing ones among ``names``."""
        return "; ".join(self.missing[n] for n in dict.fromkeys(names) if n in self.missing)


# ----------------------------------------------------------------------------------------- the parts


def _pairs(cfg: PaperConfig) -> Dict[str, List[Tuple[str, str]]]:
    """Table 1's pairs by row kind: each recipe's seed pairs, and AT vs vanilla by seed position."""
    out = {name: list(itertools.combinations(seeds, 2)) for name, seeds in cfg.recipes.items()}
    out["cross"] = list(zip(cfg.recipes.get("at", []), cfg.recipes.get("vanilla", [])))
    return out


def _ablation_pairs(cfg: PaperConfig) -> Dict[str, List[Tuple[str, str]]]:
    """The recipe ablation's seed pairs by arm: every two seeds of an arm."""
    return {arm: list(itertools.combinations(seeds, 2)) for arm, seeds in cfg.ablation.items()}


def _layer_pairs(cfg: PaperConfig) -> List[Tuple[str, str]]:
    return [tuple(p) for s in cfg.layer_settings.values() for p in s.values()]


# Claim 12's method pairs, in the order the figure and the differences name them.
METHOD_PAIRS = (("at", "trades"), ("at", "mart"), ("trades", "mart"))
METHOD_LABELS = {"at": "AT", "trades": "TRADES", "mart": "MART"}


def method_positions(m: Mapping[str, Sequence[str]]) -> List[Dict[str, str]]:
    """A setting's models by training-seed position: [{at: at_i, trades: trades_i, mart: mart_i}, ...]
    (the i-th name of each method's list)."""
    return [dict(zip(m, names)) for names in zip(*m.values())]


def _method_pairs(cfg: PaperConfig) -> List[Tuple[str, str]]:
    out: List[Tuple[str, str]] = []
    for m in cfg.methods.values():
        for position in method_positions(m):
            for a, b in METHOD_PAIRS:
                if (position[a], position[b]) not in out:
                    out.append((position[a], position[b]))
    return out


def _matrix_models(cfg: PaperConfig) -> List[str]:
    return list(dict.fromkeys(n for family in cfg.architectures.values() for group in family.values() for n in group))


def architecture_positions(cfg: PaperConfig, ok: Callable[[str], bool]) -> Dict[str, List[Dict[str, List[str]]]]:
    """Claim 11's training-seed positions, per family: [{"residual": [...], "vgg": [...]} per position].

    Position 0 is ``architectures`` as written, cut to the models here; position i replaces each of
    those models by its i-th later seed (``architecture_seeds``). A family's positions run while every
    one of its models has that seed here, so each position compares the same architectures, and two
    positions share no model (independent). A family needs two residual nets and one VGG at least."""
    out: Dict[str, List[Dict[str, List[str]]]] = {}
    for family, groups in cfg.architectures.items():
        first = {g: [n for n in names if ok(n)] for g, names in groups.items()}
        if len(first.get("residual", [])) < 2 or not first.get("vgg"):
            continue
        members = [n for names in first.values() for n in names]
        positions = [first]
        while all(len(cfg.architecture_seeds.get(n, [])) >= len(positions) for n in members) and \
                all(ok(cfg.architecture_seeds[n][len(positions) - 1]) for n in members):
            i = len(positions) - 1
            positions.append({g: [cfg.architecture_seeds[n][i] for n in names] for g, names in first.items()})
        out[family] = positions
    return out


def parts(ctx: Context, cfg: PaperConfig, ok: Availability) -> Dict[str, Tuple[Any, Context]]:
    """{part: (its kind's config on the models that exist, its context)}; a part with nothing to
    measure is left out (its claims say which models are missing)."""
    out: Dict[str, Tuple[Any, Context]] = {}

    def with_iri(iri: str, layers: Optional[LayersConfig] = None) -> Context:
        changes: Dict[str, Any] = {"estimator": dataclasses.replace(ctx.estimator, iri=iri)}
        changes["layers"] = layers or LayersConfig()
        return dataclasses.replace(ctx, **changes)

    seeds = [list(p) for kind in _pairs(cfg).values() for p in kind if ok.all(p)]
    if seeds:
        out["seeds"] = (PairsConfig(name="seeds", kind="pairs", pairs=seeds,
                                    description="Table 1: seed pairs and AT vs vanilla"), with_iri(cfg.seeds_iri))
        out.update(_adversarial_parts(ctx, cfg, seeds))
    out.update(paper_table2.graded_parts(cfg, ok, with_iri))
    robust = [n for n in cfg.robustness if ok(n)]
    if len(robust) >= 2:
        out["relative_robustness"] = (MatrixConfig(name="relative_robustness", kind="matrix", models=robust,
                                                   description="Table 2: STIR matrix, most robust first"),
                                      with_iri("arbitrary"))
    chains = {}
    for family, chain in cfg.chains.items():
        present = [n for n in chain if ok(n)]
        # consecutive links only: a chain is cut at its first missing model
        cut = chain[:next((i for i, n in enumerate(chain) if n not in present), len(chain))]
        if len(cut) >= 2:
            chains[family] = cut
    if chains:
        out["incremental"] = (IncrementalConfig(name="incremental", kind="incremental", chains=chains,
                                                description="Figure 1: consecutive models of growing training sets"),
                              with_iri("arbitrary"))
    layers = [list(p) for p in _layer_pairs(cfg) if ok.all(p)]
    if layers:
        out["layers"] = (PairsConfig(name="layers", kind="pairs", pairs=layers,
                                     description="Figures 2-3, 6-7: layer-wise STIR of seed pairs"),
                         with_iri("arbitrary", cfg.layers))
    # position 0 of every family (the figure), then the later seeds of the families claim 11 reads
    seeded = [n for f in architecture_positions(cfg, ok).values() for p in f[1:] for names in p.values() for n in names]
    models = list(dict.fromkeys([n for n in _matrix_models(cfg) if ok(n)] + seeded))
    if len(models) >= 2:
        twins = {m: seeds[0] for m, seeds in cfg.architecture_seeds.items() if m in models and seeds and ok(seeds[0])}
        out["architectures"] = (MatrixConfig(name="architectures", kind="matrix", models=models, seed_twins=twins,
                                             description="Figures 4, 8: STIR matrix across architectures"),
                                with_iri("arbitrary"))
    methods = [list(p) for p in _method_pairs(cfg) if ok.all(p)]
    if methods:
        out["at_methods"] = (PairsConfig(name="at_methods", kind="pairs", pairs=methods,
                                         description="Figures 5, 9: layer-wise STIR between AT, TRADES and MART"),
                             with_iri("arbitrary", cfg.methods_layers))
    ablation = [list(p) for pairs in _ablation_pairs(cfg).values() for p in pairs if ok.all(p)]
    if ablation:  # measured as Table 1's pairs are: the baseline arm's pairs are Table 1's vanilla pairs
        out["recipe_ablation"] = (PairsConfig(name="recipe_ablation", kind="pairs", pairs=ablation,
                                              description="The recipe question: seed pairs of each recipe arm"),
                                  with_iri(cfg.seeds_iri))
    return {name: part for name, part in out.items() if name not in cfg.skip}


# --------------------------------------------------------------------------------- readings -> intervals


def _adversarial_parts(ctx: Context, cfg: PaperConfig, seeds: List[List[str]]) -> Dict[str, Tuple[Any, Context]]:
    """Part ``seeds_<objective>`` of each extra STIR_adv objective: the seed pairs, adversarial IRIs only."""
    out = {}
    for objective in _extra_objectives(ctx, cfg):
        inversion = dataclasses.replace(ctx.estimator.inversion, adversarial_objective=objective)
        estimator = dataclasses.replace(ctx.estimator, iri="adversarial", inversion=inversion)
        out[f"seeds_{objective}"] = (
            PairsConfig(name=f"seeds_{objective}", kind="pairs", pairs=seeds,
                        description=f"Table 1's STIR_adv row with the {objective} adversarial objective"),
            dataclasses.replace(ctx, estimator=estimator, layers=LayersConfig()))
    return out


def _extra_objectives(ctx: Context, cfg: PaperConfig) -> List[str]:
    """The objectives of ``stir_adv_objectives`` other than the evaluation's own (measured by ``seeds``)."""
    own = ctx.estimator.inversion.adversarial_objective
    return [o for o in dict.fromkeys(cfg.stir_adv_objectives) if o != own]


def _z(ctx: Context) -> float:
    return z_value(ctx.estimator.calibration.confidence)


def reading(stat: Optional[Stat], cal: Optional[Calibration]) -> Interval:
    """A value with its calibrated interval (over images and draws); NaN: not measured."""
    if stat is None or cal is None or not math.isfinite(stat.mean):
        return Interval(NAN, NAN, NAN)
    low, high = min(cal.low, stat.mean), max(cal.high, stat.mean)
    return Interval(stat.mean, low, high)


def over_seed_pairs(values: Sequence[Interval], confidence: float,
                    pairs: Optional[Sequence[Tuple[str, str]]] = None) -> Tuple[Interval, str, float]:
    """(a recipe's value over its seed pairs, what its interval holds, tau): the random-effects
    estimate for two or more pairs; the one pair's own interval otherwise. ``pairs`` (the models of
    each value, in order) says whether the pairs share models: a recipe's (a, b), (a, c), (b, c) do,
    AT vs vanilla's (at_i, vanilla_i) do not; without them the pairs are read as sharing."""
    kept = [k for k, i in enumerate(values) if i.measured]
    measured = [values[k] for k in kept]
    if not measured:
        return Interval(NAN, NAN, NAN), "not measured", NAN
    if len(measured) == 1:
        return measured[0], f"{ONE_PAIR} (interval over images and draws of that pair)", NAN
    est = paper_ablation.arm_estimate(measured, confidence)
    models = [m for k in kept for m in pairs[k]] if pairs is not None else []
    disjoint = pairs is not None and len(models) == len(set(models))  # the measured pairs share no model
    return (Interval(est.mean, min(est.low, est.mean), max(est.high, est.mean)),
            est.method + "; " + (DISJOINT if disjoint else SHARED), est.tau)


def _difference(a: Interval, b: Interval, z: float, confidence: float) -> Interval:
    """a - b, se = sqrt(se_a^2 + se_b^2) (the two read as independent)."""
    return _from_se(a.value - b.value, math.hypot(_se(a, confidence), _se(b, confidence)), z)


def _cell(i: Interval) -> str:
    if not i.measured:
        return "not measured"
    return f"{i.value:.3f}" if i.low == i.high else str(i)  # a value without spread (CKA of one pair)


# ------------------------------------------------------------------------------------------- evidence


@dataclass
class Evidence:
    """What one claim is judged on: the verdict function's argument, or the reason there is none."""

    evidence: Any = None
    missing: str = ""
    notes: List[str] = field(default_factory=list)


def _direction_stir(d: Optional[DirectionResult], name: str = "stir") -> Interval:
    if d is None:
        return Interval(NAN, NAN, NAN)
    return reading(getattr(d, name), d.calibration.get(name))


def table1(ctx: Context, cfg: PaperConfig, ok: Availability, seeds_ctx: Optional[Context],
           adversarial: Optional[Dict[str, Context]] = None):
    """Table 1's rows (ours beside the paper's) and the evidence of claims 1-6; ``adversarial``: the
    context of each extra STIR_adv objective (parts ``seeds_<objective>``)."""
    conf, z = ctx.estimator.calibration.confidence, _z(ctx)

    def stored(part_ctx: Context, a: str, b: str) -> Optional[PairResult]:
        try:
            return part_ctx.pair(ctx.model(a), ctx.model(b))
        except NotStored:  # experiment.stored_only: a pair not measured yet is left out
            return None

    def measured(part_ctx: Optional[Context]) -> Dict[str, List[PairResult]]:
        out = {kind: [stored(part_ctx, a, b) for a, b in pairs if ok.all((a, b))] if part_ctx else []
               for kind, pairs in _pairs(cfg).items()}
        return {kind: [r for r in results if r is not None] for kind, results in out.items()}

    results = measured(seeds_ctx)
    extra = {objective: measured(c) for objective, c in (adversarial or {}).items()}
    rows = [row for objective, by_kind in extra.items() for row in _adversarial_rows(objective, by_kind)]
    published = {k: claim({"vanilla": 1, "at": 2, "cross": 3}[k]) for k in TABLE1_PAIRS}
    for kind, pairs in results.items():
        for p in pairs:
            for direction, quantity in (("m1|m2", "STIR(m1|m2)"), ("m2|m1", "STIR(m2|m1)")):
                d = p.get(direction)
                for name in ("stir", "stir_adv"):
                    stat = getattr(d, name) if d is not None else None
                    if stat is None:
                        continue
                    cal = d.calibration.get(name)
                    paper = published[kind].paper_value(quantity, TABLE1_PAIRS[kind]) if name == "stir" else None
                    own = ctx.estimator.inversion.adversarial_objective
                    row = {"pair": f"{p.ref} / {p.target}", "paper pair": TABLE1_PAIRS[kind],
                           "quantity": quantity if name == "stir" else f"{quantity.replace('STIR', 'STIR_adv')}, {own} objective",
                           "ours": _cell(reading(stat, cal)),
                           "floor": _num(cal.floor if cal else None), "normalised": _normalised(cal),
                           "p-value": _num(cal.p_value if cal else None), "paper": _num(paper) if name == "stir"
                           else _published_adv(kind, direction)}
                    rows.append(row)
            paper_cka = published[kind].paper_value("CKA", TABLE1_PAIRS[kind])
            rows.append({"pair": f"{p.ref} / {p.target}", "paper pair": TABLE1_PAIRS[kind], "quantity": "CKA",
                         "ours": _num(p.similarity.value), "floor": "-", "normalised": "-", "p-value": "-",
                         "paper": _num(paper_cka)})
    recipes, evidence = recipe_rows(ctx, results, conf, z)
    evidence.update(tracking(ctx, results, z))
    if any(results.values()) or any(any(r.values()) for r in extra.values()):
        readings = {ctx.estimator.inversion.adversarial_objective: _stir_adv(results),
                    **{objective: _stir_adv(r) for objective, r in extra.items()}}
        evidence[4] = stir_adv_evidence(readings, [o for o in _extra_objectives(ctx, cfg) if o not in extra])
    return rows, recipes, evidence


def _adversarial_rows(objective: str, by_kind: Dict[str, List[PairResult]]) -> List[Dict[str, Any]]:
    """Table 1's STIR_adv rows of one extra objective (part ``seeds_<objective>``)."""
    rows = []
    for kind, pairs in by_kind.items():
        for p in pairs:
            for direction, quantity in (("m1|m2", "STIR_adv(m1|m2)"), ("m2|m1", "STIR_adv(m2|m1)")):
                d = p.get(direction)
                if d is None or d.stir_adv is None:
                    continue
                cal = d.calibration.get("stir_adv")
                rows.append({"pair": f"{p.ref} / {p.target}", "paper pair": TABLE1_PAIRS[kind],
                             "quantity": f"{quantity}, {objective} objective", "ours": _cell(reading(d.stir_adv, cal)),
                             "floor": _num(cal.floor if cal else None), "normalised": _normalised(cal),
                             "p-value": _num(cal.p_value if cal else None), "paper": _published_adv(kind, direction)})
    return rows


def _published_adv(kind: str, direction: str) -> str:
    """Table 1's STIR_adv cell of the row kind's pair and ``direction``, with its printed spread."""
    p = next(p for p in claim(4).published if p.pair == TABLE1_PAIRS[kind] and p.quantity == f"STIR_adv({direction})")
    return f"{p.value:.3f} ± {p.spread:.3f}"


def _normalised(cal: Optional[Calibration]) -> str:
    if cal is None or not math.isfinite(cal.normalised):
        return "-"
    if math.isfinite(cal.normalised_low):
        return f"{cal.normalised:.3f} [{cal.normalised_low:.3f}, {cal.normalised_high:.3f}]"
    return f"{cal.normalised:.3f}"


def recipe_rows(ctx: Context, results: Dict[str, List[PairResult]], conf: float, z: float):
    """Per recipe (and AT vs vanilla): each quantity over its seed pairs; evidence of claims 1-4."""
    rows: List[Dict[str, Any]] = []
    out: Dict[int, Evidence] = {}

    def add(kind: str, quantity: str, values: List[Interval]) -> Interval:
        est, method, tau = over_seed_pairs(values, conf, [(p.ref, p.target) for p in results[kind]])
        paper = claim({"vanilla": 1, "at": 2, "cross": 3}[kind]).paper_value(quantity, TABLE1_PAIRS[kind])
        rows.append({"recipe": kind if kind != "cross" else "AT vs vanilla", "quantity": quantity,
                     "seed pairs": len([v for v in values if v.measured]), "ours": _cell(est),
                     "between-pair sd (tau)": _num(tau), "paper": _num(paper), "interval holds": method})
        return est

    for kind, pairs in results.items():
        if not pairs:
            continue
        s12 = [_direction_stir(p.get("m1|m2")) for p in pairs]
        s21 = [_direction_stir(p.get("m2|m1")) for p in pairs]
        a12, a21 = add(kind, "STIR(m1|m2)", s12), add(kind, "STIR(m2|m1)", s21)
        cka = [p.similarity.value for p in pairs]
        add(kind, "CKA", [Interval(c, c, c) if math.isfinite(c) else Interval(NAN, NAN, NAN) for c in cka])
        if kind == "vanilla":
            gaps12 = [_from_se(c - s.value, _se(s, conf), z) for c, s in zip(cka, s12)]
            gaps21 = [_from_se(c - s.value, _se(s, conf), z) for c, s in zip(cka, s21)]
            out[1] = Evidence(v.GapEvidence(add(kind, "CKA - STIR(m1|m2)", gaps12), add(kind, "CKA - STIR(m2|m1)", gaps21)),
                              notes=["CKA - STIR: the interval of STIR shifted (CKA's own variance over images not in it)"])
        elif kind == "at":
            out[2] = Evidence(v.PairEvidence(a12, a21))
        elif kind == "cross":
            diffs = [_difference(b, a, z, conf) for a, b in zip(s12, s21)]  # STIR(m2|m1) - STIR(m1|m2), m1 = AT
            est = add(kind, "STIR(m2|m1) - STIR(m1|m2)", diffs)
            out[3] = Evidence(v.DirectionEvidence({f"{pairs[0].ref} / {pairs[0].target}"
                                                   + (f" and {len(pairs) - 1} more seed pair(s)" if len(pairs) > 1 else ""): est}))
    return rows, out


def _stir_adv(results: Dict[str, List[PairResult]]) -> Dict[str, Interval]:
    """STIR_adv per direction of every pair: {"STIR_adv(target|ref)": its reading} (NaN: not measured)."""
    return {f"STIR_adv({p.target if d == 'm2|m1' else p.ref}|{p.ref if d == 'm2|m1' else p.target})":
            _direction_stir(p.get(d), "stir_adv")
            for pairs in results.values() for p in pairs for d in DIRECTIONS
            if p.get(d) is not None and p.get(d).stir_adv is not None}


def stir_adv_evidence(readings: Dict[str, Dict[str, Interval]], left_out: Sequence[str] = ()) -> Evidence:
    """Claim 4 on the objective the published numbers came from (``PAPER_OBJECTIVE``) where it was
    measured, else on the first reading there is; every other reading's verdict in the notes, and
    the objectives configured but ``left_out`` of this report (skipped or not stored) named."""
    measured = {o: r for o, r in readings.items() if r}
    absent = [f"the {o} objective: not measured in this report (part seeds_{o} left out)" for o in left_out]
    if not measured:
        return Evidence(missing="; ".join(absent) or "STIR_adv was not measured (the seeds part ran with seeds_iri "
                                "without adversarial IRIs and stir_adv_objectives is empty)")
    judged = PAPER_OBJECTIVE if any(x.measured for x in measured.get(PAPER_OBJECTIVE, {}).values()) else next(iter(measured))
    notes = [f"judged on the {judged} objective" + (" (the original code's, which the published row came from)"
                                                   if judged == PAPER_OBJECTIVE else "")]
    for objective, values in measured.items():
        if objective != judged:
            other = claim(4).judge(v.AdversarialEvidence(values))
            notes.append(f"the {objective} objective: {other.outcome}: {other.reason}")
    return Evidence(v.AdversarialEvidence(measured[judged]), notes=notes + absent)


def tracking(ctx: Context, results: Dict[str, List[PairResult]], z: float) -> Dict[int, Evidence]:
    """Claims 5 and 6: STIR beside agreement on X' and beside controversial difficulty, per direction."""
    stir, agreement, difficulty = {}, {}, {}
    for pairs in results.values():
        for p in pairs:
            for d in DIRECTIONS:
                r = p.get(d)
                if r is None:
                    continue
                label = f"{r.target}|{r.ref}"
                stir[label] = _direction_stir(r)
                if r.agreement is not None:
                    a = r.agreement
                    agreement[label] = _from_se(a.mean, a.std / math.sqrt(max(len(a.values), 1)), z)
                walk = r.difficulty_censored.get("walk", {})
                mean, low, high = (walk.get(k, NAN) for k in ("restricted_mean", "restricted_mean_low", "restricted_mean_high"))
                if all(math.isfinite(x) for x in (mean, low, high)):
                    difficulty[label] = Interval(mean, min(low, mean), max(high, mean))
                elif r.difficulty is not None:
                    s = r.difficulty
                    difficulty[label] = _from_se(s.mean, s.std / math.sqrt(max(len(s.values), 1)), z)
    if not stir:
        return {}
    return {5: Evidence(v.TrackingEvidence(stir, agreement),
                        notes=["agreement interval: mean +- z sd / sqrt(k) over the k draws"]),
            6: Evidence(v.TrackingEvidence(stir, difficulty),
                        notes=["difficulty: the walk reading's restricted mean (Kaplan-Meier) with its interval"])}


def robustness_gap(m1: Any, m2: Any, z: float) -> Interval:
    """m1's test/robust_acc minus m2's, with the two-proportion interval over each run's robust test
    images (``trainer.robust_test_size``; read as independent samples, so somewhat wide where both
    were attacked on the same images). Not measured where either accuracy or size is unknown."""
    acc = [m.metrics.get("test/robust_acc", NAN) for m in (m1, m2)]
    size = [m.train.trainer.robust_test_size if m.train is not None else 0 for m in (m1, m2)]
    if not all(math.isfinite(a) for a in acc) or min(size) <= 0:
        return Interval(NAN, NAN, NAN)
    return _from_se(acc[0] - acc[1], math.sqrt(sum(a * (1 - a) / n for a, n in zip(acc, size))), z)


NOT_EVIDENCE = "not evidence"


def robustness_order(gap: Interval) -> Tuple[str, bool]:
    """(which of a Table 2 pair is the more robust, whether the pair is evidence for claim 7), from
    ``robustness_gap`` (m1 - m2): evidence where m1 is measurably the more robust, or where the
    robust accuracies are unknown (the configured order is then taken); the label of a pair that is
    not evidence ends in ``NOT_EVIDENCE``."""
    if not gap.measured:
        return "robust accuracy unknown: the configured order", True
    if gap.above(0.0):
        return "m1 more robust", True
    return ("m2 more robust" if gap.below(0.0) else "not resolved") + ": " + NOT_EVIDENCE, False


def table2(ctx: Context, part: Optional[Tuple[MatrixConfig, Context]]):
    """Claim 7: STIR(m2|m1) - STIR(m1|m2) for every pair, m1 the more robust (matrix order).

    A pair is evidence only where m1 is measurably the more robust (``robustness_gap`` above 0): of
    two models whose robust accuracies are within noise the claim predicts no direction. Where the
    accuracies are unknown the configured order (``robustness``) is taken, and the note says so."""
    if part is None:
        return [], None
    cfg, pctx = part
    conf, z = ctx.estimator.calibration.confidence, _z(ctx)
    rows_ = [matrix_kind.measure_row(pctx, cfg, i)[0] for i in range(len(cfg.models))]
    diffs, rows, notes = {}, [], []
    for i, j in itertools.combinations(range(len(cfg.models)), 2):
        m1, m2 = cfg.models[i], cfg.models[j]
        s21, s12 = _direction_stir(rows_[i][j]), _direction_stir(rows_[j][i])  # STIR(m2|m1), STIR(m1|m2)
        d = _difference(s21, s12, z, conf)
        gap = robustness_gap(ctx.model(m1), ctx.model(m2), z)
        order, evidence = robustness_order(gap)
        if not evidence:
            notes.append(f"{m1} / {m2} is not evidence: m1's robust accuracy minus m2's is {gap} ({order.split(':')[0]})")
        else:
            diffs[f"{m1} / {m2}"] = d
            if not gap.measured:
                notes.append(f"{m1} / {m2}: {order} (experiment.robustness) is taken")
        rows.append({"m1 (more robust)": m1, "m2": m2, "robust acc gap (m1 - m2)": _cell(gap), "order": order,
                     "STIR(m2|m1)": _cell(s21), "STIR(m1|m2)": _cell(s12), "difference": _cell(d),
                     "paper": paper_table2.cells(m1, m2)})
    return rows, Evidence(v.DirectionEvidence(diffs), notes=notes)


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
            s, c = _direction_stir(d21), calibrated(d21, "chance_corrected")
            size = m_cur.data.train_size or NAN
            raw[family].append((size, s))
            corrected[family].append((size, c))
            cal = d21.calibration.get("stir") if d21 is not None else None
            rows.append({"family": family, "train size of m_t": size, "link": f"{prev} -> {cur}",
                         "STIR(m_t|m_t-1)": _cell(s), "floor": _num(cal.floor if cal else None),
                         "chance-corrected": _cell(c), "STIR(m_t-1|m_t)": _cell(_direction_stir(d12)),
                         "chance-corrected (m_t-1|m_t)": _cell(calibrated(d12, "chance_corrected"))})
    curves, reading_note = _curve_reading(raw, corrected)
    seeds_note = ("one training seed per size: each link's interval is over images and draws only (the "
                  "between-seed spread of a size is not measured)")
    return rows, Evidence(v.CurveEvidence(curves), notes=notes + ([reading_note, seeds_note] if curves else []))


def calibrated(d: Optional[DirectionResult], reading: str, name: str = "stir") -> Interval:
    """A direction's calibrated reading of ``name`` ("normalised" or "chance_corrected",
    ``stir.measure.calibration``) with its interval from the same resamples; NaN: not measured (a
    result stored before that reading existed, or an undefined one)."""
    cal = d.calibration.get(name) if d is not None else None
    if cal is None:
        return Interval(NAN, NAN, NAN)
    value, low, high = getattr(cal, reading), getattr(cal, f"{reading}_low"), getattr(cal, f"{reading}_high")
    if not (math.isfinite(value) and math.isfinite(low) and math.isfinite(high)):
        return Interval(NAN, NAN, NAN)
    return Interval(value, min(low, value), max(high, value))


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
    conf, z = ctx.estimator.calibration.confidence, _z(ctx)
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
                             "direction": direction, "taps": len(result.rows), "slope (normalised)": _cell(slope),
                             "slope (chance-corrected)": _cell(corrected),
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


def figures4_8(ctx: Context, cfg: PaperConfig, part: Optional[Tuple[MatrixConfig, Context]], ok: Availability):
    """Claim 11: mean STIR among residual nets minus mean STIR between residual and VGG nets, per family.

    The difference is taken within each training-seed position (``architecture_positions``: the
    models of one seed together, se = sqrt(se_a^2 + se_b^2)) and pooled over the positions by random
    effects (``over_seed_pairs``), as claim 12's, so its interval holds the between-seed spread; with
    one position it holds images and draws only, and the verdict cannot go beyond "not resolved"."""
    if part is None:
        return [], None
    mcfg, pctx = part
    conf, z = ctx.estimator.calibration.confidence, _z(ctx)
    index = {n: i for i, n in enumerate(mcfg.models)}
    rows_ = [matrix_kind.measure_row(pctx, mcfg, i)[0] for i in range(len(mcfg.models))]

    def stir(a: str, b: str) -> Interval:  # STIR(b | a): row a is the reference
        return _direction_stir(rows_[index[a]][index[b]])

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
        vgg_vgg = over_seed_pairs([_mean([read(a, b) for a in p["vgg"] for b in p["vgg"] if a != b], z, conf)
                                   for p in positions], conf)[0]
        rows.append({"family": family, "residual": ", ".join(residual), "VGG": ", ".join(vgg),
                     "reading": "chance-corrected" if use_corrected else "raw",
                     "residual / residual": _cell(among), "residual / VGG": _cell(across), "difference": _cell(d),
                     "per seed position": ", ".join(f"{w.value:+.3f}" for w in within),
                     "difference (raw STIR)": _cell(raw[family][3]),
                     "VGG / VGG (not in the claim)": _cell(vgg_vgg),
                     "directions per position": f"{len(residual) * (len(residual) - 1)} / {2 * len(residual) * len(vgg)}",
                     "seed positions": n, "interval holds": _positions_held(n),
                     "paper": "> 0 (a figure: no printed value)"})
    names = _matrix_models(cfg)
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
        ma = _mean([stir(a, b) for a in residual for b in residual if a != b], z, confidence)
        mb = _mean([stir(a, b) for a in residual for b in vgg] + [stir(b, a) for a in residual for b in vgg], z, confidence)
        among.append(ma), across.append(mb), within.append(_difference(ma, mb, z, confidence))
    sets = [tuple(n for names in p.values() for n in names) for p in positions]
    return (over_seed_pairs(among, confidence, sets)[0], over_seed_pairs(across, confidence, sets)[0], within,
            over_seed_pairs(within, confidence, sets)[0])


def _positions_held(n: int, shared: bool = False) -> str:
    """What an interval pooled over n training-seed positions holds (claims 11, 12)."""
    if n == 1:
        return "one seed position: between-seed spread not measured (interval over images and draws of its models)"
    return (f"random effects over {n} seed positions (Hartung-Knapp interval on {n - 1} df): holds the between-seed "
            "and the image-level variance; " + ("the positions share models: not independent" if shared
                                                else "the positions share no model: independent"))


def _mean(values: List[Interval], z: float, conf: float) -> Interval:
    """The mean of several values, se = sqrt(sum se_i^2) / m (read as independent)."""
    if not values or not all(i.measured for i in values):
        return Interval(NAN, NAN, NAN)
    m = len(values)
    return _from_se(sum(i.value for i in values) / m, math.sqrt(sum(_se(i, conf) ** 2 for i in values)) / m, z)


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


def recipe_ablation(ctx: Context, cfg: PaperConfig, ok: Availability,
                    part: Optional[Tuple[Any, Context]]) -> List[Dict[str, Any]]:
    """The recipe question's table (``stir.experiments.paper_ablation``): each arm's seed pairs that
    are measured; an arm with none says which of its models are missing."""
    if not cfg.ablation:
        return []
    conf = ctx.estimator.calibration.confidence
    measured = {tuple(p) for p in part[0].pairs} if part else set()
    arms: Dict[str, Dict[str, List[Interval]]] = {}
    absent = []
    for arm, pairs in _ablation_pairs(cfg).items():
        results = [part[1].pair(ctx.model(a), ctx.model(b)) for a, b in pairs if (a, b) in measured]
        if not results:
            why = ok.why(cfg.ablation[arm]) or "not measured in this report"
            absent.append(paper_ablation.absent_row(arm, cfg.ablation_levers.get(arm, ""), why, cfg.ablation_margin))
            continue
        s12 = [_direction_stir(p.get("m1|m2")) for p in results]
        s21 = [_direction_stir(p.get("m2|m1")) for p in results]
        cka = [Interval(p.similarity.value, p.similarity.value, p.similarity.value)
               if math.isfinite(p.similarity.value) else Interval(NAN, NAN, NAN) for p in results]
        arms[arm] = {"STIR(m1|m2)": s12, "STIR(m2|m1)": s21, "CKA": cka,
                     "STIR, mean of directions": [paper_ablation.mean_of_directions(a, b, conf) for a, b in zip(s12, s21)]}
    return paper_ablation.rows(arms, cfg.ablation_margin, conf, cfg.ablation_levers) + absent


# ------------------------------------------------------------------------------------------ the report


def _needs(cfg: PaperConfig) -> Dict[int, List[str]]:
    """The models each claim's evidence needs at the least (for 'not testable here' when absent)."""
    pairs = _pairs(cfg)
    seeds = [n for kind in pairs.values() for p in kind for n in p]
    return {1: [n for p in pairs.get("vanilla", [])[:1] for n in p], 2: [n for p in pairs.get("at", [])[:1] for n in p],
            3: [n for p in pairs.get("cross", [])[:1] for n in p], 4: seeds[:2], 5: seeds, 6: seeds,
            7: list(cfg.robustness), 8: [n for c in cfg.chains.values() for n in c[:2]],
            9: [n for s, f in cfg.layer_settings.items() if s.startswith("cifar10 ") for p in f.values() for n in p],
            10: [n for f in cfg.layer_settings.values() for p in f.values() for n in p],
            11: _matrix_models(cfg), 12: [n for m in cfg.methods.values() for n in (method_positions(m)[:1] or [{}])[0].values()]}


def unstored_rows(ctx: Context, cfg: PaperConfig, ok: Availability, chosen: Dict[str, Tuple[Any, Context]]) -> Dict[int, str]:
    """``stored_only``: claims 1-3 whose Table 1 row has models here but none of its seed pairs stored."""
    part = chosen.get("seeds")
    stored = {tuple(p) for p in part[0].pairs} if part else set()
    out = {}
    for kind, number in (("vanilla", 1), ("at", 2), ("cross", 3)):
        here = [tuple(p) for p in _pairs(cfg).get(kind, []) if ok.all(p)]
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


def run(ctx: Context, cfg: PaperConfig) -> Report:
    report = Report(cfg.description or "The STIR paper's claims (Nanda et al., ICML 2022), reproduced")
    ok = Availability(ctx)
    if cfg.stored_only:  # measure nothing: every result from the store, a miss raises NotStored
        ctx = dataclasses.replace(ctx, store=ctx.store.as_read_only())
    chosen = parts(ctx, cfg, ok)
    chosen, left_out, cut, cut_models = stored_parts(chosen) if cfg.stored_only else (chosen, {}, [], {})
    for name, (part, pctx) in list(chosen.items()):
        try:
            sub = get(part.kind).run(pctx, part)
        except NotStored:
            left_out[name] = "not all of its measurements are in the results store yet"
            del chosen[name]
            continue
        report.notes += [f"{name}: {note}" for note in sub.notes]
        report.tables.update({f"{name}/{table}": t for table, t in sub.tables.items()})
        report.figures.update({f"{name}/{figure}": f for figure, f in sub.figures.items()})
        report.summary.update({f"{name}/{key}": value for key, value in sub.summary.items()})
    evidence: Dict[int, Evidence] = {}
    adversarial = {o: chosen[f"seeds_{o}"][1] for o in _extra_objectives(ctx, cfg) if f"seeds_{o}" in chosen}
    t1, recipes, ev = table1(ctx, cfg, ok, chosen.get("seeds", (None, None))[1], adversarial)
    evidence.update(ev)
    t2, evidence[7] = table2(ctx, chosen.get("relative_robustness"))
    f1, evidence[8] = figure1(ctx, cfg, ok, chosen.get("incremental"))
    f2, ev = figures2_3(ctx, cfg, ok, chosen.get("layers"))
    evidence.update(ev)
    f4, evidence[11] = figures4_8(ctx, cfg, chosen.get("architectures"), ok)
    f5, evidence[12] = figures5_9(ctx, cfg, ok, chosen.get("at_methods"))
    ablation = recipe_ablation(ctx, cfg, ok, chosen.get("recipe_ablation"))
    for name, cut_out in cut_models.items():  # each claim the matrix feeds says which models it lacks
        for number in PARTS[name]:
            if evidence.get(number) is not None:
                evidence[number].notes.append(f"{NOT_STORED}: {', '.join(cut_out)}")
    extra = paper_scorecard.extra_evidence(ctx, cfg, ok, chosen, evidence)
    layer_wise = extra.pop(12)
    evidence.update(extra)
    evidence = {k: e for k, e in evidence.items() if e is not None}
    verdicts = judge(cfg, evidence, ok, left_out, unstored_rows(ctx, cfg, ok, chosen) if cfg.stored_only else {})
    verdicts[15] = (Verdict(NOT_RUN, f"not measured in this report: {paper_scorecard.RBF_COMMAND}"), [])
    info = paper_scorecard.revise(ctx, cfg, chosen, verdicts, {**evidence, "12_layers": layer_wise})
    graded_rows, graded, why_not = paper_table2.graded_from_parts(ctx, cfg, chosen, ok)
    graded_verdict = f"{graded.outcome}: {graded.reason}" if graded else f"not measured in this report: {why_not}"
    if graded_rows:  # ours beside Table 2's differences in the scorecard
        info[7]["graded"] = "; ".join(f"{r['pair']} {r['difference']} (position {r['position']})" for r in graded_rows)
    scorecard_verdicts = dict(verdicts)
    info[7]["old"] = f"Table 2's models (equally robust AT models dropped): {verdicts[7][0].outcome}: {verdicts[7][0].reason[:200]}"
    scorecard_verdicts[7] = ((graded, verdicts[7][1]) if graded else
                             (Verdict(NOT_RUN, "graded family: " + graded_verdict), verdicts[7][1]))
    evidence[12] = layer_wise if layer_wise.evidence is not None else evidence.get(12)
    scorecard = paper_scorecard.scorecard(scorecard_verdicts, evidence, info, paper_table2.graded_power_text())
    sections = paper_scorecard.sections(scorecard_verdicts, info, graded_verdict)
    claims = []
    for c in CLAIMS:
        vd, notes = verdicts[c.number]
        claims.append({"claim": c.number, "where": c.where, "statement": c.statement, "verdict": vd.outcome,
                       "reason": vd.reason + "".join(f" ({n})" for n in notes)})
        report.summary[f"claim{c.number}/holds"] = {HOLDS: 1.0, v.FAILS: 0.0}.get(vd.outcome, NAN)
    line = summary_line(verdicts)
    counts = {w: sum(r["verdict"] == w for r in scorecard) for w in paper_scorecard.rules.WORDS}
    words_line = f"scorecard of {len(scorecard)} claims: " + ", ".join(f"{n} {w}" for w, n in counts.items() if n)
    report.title = f"{report.title}: {line}"
    report.summary["claims/hold"] = float(sum(vd.outcome == HOLDS for vd, _ in verdicts.values()))
    report.summary["claims/not_testable"] = float(sum(vd.outcome == NOT_TESTABLE for vd, _ in verdicts.values()))
    report.summary["claims/do_not_hold"] = float(sum(vd.outcome == v.FAILS for vd, _ in verdicts.values()))
    report.summary["claims/not_run"] = float(sum(vd.outcome == NOT_RUN for vd, _ in verdicts.values()))
    shown = {"scorecard": scorecard, "claim_sections": sections, "claims": claims, "table2_graded": graded_rows, "table1": t1, "table1_recipes": recipes, "table2": t2, "figure1": f1,
             "figures2_3_6_7": f2, "figures4_8": f4, "figures5_9": f5, "recipe_ablation": ablation}
    shown["missing_models"] = [{"model": name, "why": "not trained or shipped", "train command": ok.command(name)}
                               for name in sorted(ok.missing)]
    paper_tables = {name: Table(rows) for name, rows in shown.items() if rows}
    paper_tables["scorecard"].headline = Table(scorecard)  # the README's first table
    paper_tables["claims"] = Table(claims, display=[{**c, "reason": paper_scorecard._clip(c["reason"])} for c in claims])
    report.tables = {**paper_tables, **report.tables}  # the paper's tables first, the parts' after
    missing = sorted(ok.missing)
    report.notes = [words_line, line, "method: a recipe's value is the random-effects estimate over its seed pairs "
                    "(stir.measure.seeds.seed_estimate); " + SHARED + "; AT vs vanilla: " + DISJOINT
                    + f"; with one pair: {ONE_PAIR}",
                    (f"store: {ctx.store.hits} result(s) served from the store, nothing measured (experiment.stored_only="
                     f"true: {ctx.store.misses} looked up and not there yet)" if cfg.stored_only else
                     f"store: {ctx.store.hits} result(s) served from the store, {ctx.store.misses} measured now")] + cut + \
                   ([f"not trained or shipped here (train_missing=false: nothing was trained): {', '.join(missing)}"]
                    if missing else []) + report.notes
    return report


def units(ctx: Context, cfg: PaperConfig) -> List[Unit]:
    """Every part's units on the models that exist, part by part (none with ``stored_only``: nothing
    is measured)."""
    out: List[Unit] = []
    if cfg.stored_only:
        return out
    for name, (part, pctx) in parts(ctx, cfg, Availability(ctx)).items():
        out += [Unit(f"{name}: {u.what}", u.call) for u in get(part.kind).units(pctx, part)]
    return out


def _check(cfg: PaperConfig) -> None:
    from stir.config.validate import ConfigError, check_choice
    from stir.measure.plan import check_iri

    try:
        check_iri(cfg.seeds_iri, "experiment.seeds_iri")
    except ValueError as err:
        raise ConfigError(str(err)) from None
    for part in cfg.skip:
        check_choice("experiment.skip", part, tuple(PARTS))
    for objective in cfg.stir_adv_objectives:
        check_choice("experiment.stir_adv_objectives", objective, ADVERSARIAL_OBJECTIVES)
    if not 0 < cfg.ablation_margin < 1:
        raise ConfigError(f"experiment.ablation_margin={cfg.ablation_margin!r} must be in (0, 1): the equivalence "
                          "margin of the recipe ablation, in units of STIR")
    for arm, seeds in cfg.ablation.items():
        if len(seeds) < 2:
            raise ConfigError(f"experiment.ablation.{arm} names {len(seeds)} model(s): an arm needs two or more "
                              "training seeds (a seed pair is two of them)")
    for setting, m in cfg.methods.items():
        if set(m) != {"at", "trades", "mart"}:
            raise ConfigError(f"experiment.methods.{setting} must name at, trades and mart, got {sorted(m)}")
        lengths = {method: len(names) for method, names in m.items()}
        if len(set(lengths.values())) != 1 or not min(lengths.values()):
            raise ConfigError(f"experiment.methods.{setting}: at, trades and mart each name their training seeds, as "
                              f"many of each (seed i of each together), got {lengths}: e.g. {{at: [at, at_s1], trades: "
                              "[trades, trades_s1], mart: [mart, mart_s1]}")
    for setting, families in cfg.layer_settings.items():
        if len(setting.split(" ")) != 2 or any(len(p) != 2 for p in families.values()):
            raise ConfigError(f"experiment.layer_settings: '<data set> <architecture>': {{family: [m1, m2]}}, got "
                              f"{setting!r}: {families}")


register(Kind("paper", PaperConfig, run, units, _check))
