"""The paper report's parts and which models exist: ``Availability`` (a zoo name resolves to a model
here, or the reason it does not: its train command), the models each claim group measures (seed
pairs, chains, layer-wise pairs, the architectures matrix, the methods' seed positions, the recipe
ablation's arms), and ``parts``: each part's kind config on the models that exist, with its context.
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from stir.experiments.config import LayersConfig
from stir.experiments.context import Context
from stir.experiments.incremental import IncrementalConfig
from stir.experiments.matrix import MatrixConfig
from stir.experiments.pairs import PairsConfig
from stir.experiments.paper_config import PaperConfig
from stir.inversion.config import ADVERSARIAL_OBJECTIVES
from stir.zoo import MissingModelError

# The parts of the report (PaperConfig.skip names them) and the claims each one's evidence is.
PARTS = {"seeds": (1, 2, 3, 4, 5, 6, 14, 23), **{f"seeds_{o}": (4,) for o in ADVERSARIAL_OBJECTIVES},
         "relative_robustness": (7,), "incremental": (8, 16), "layers": (9, 10, 17), "architectures": (11, 18, 19),
         "at_methods": (12, 13, 20), **{f"graded_{i}": (7,) for i in range(3)},
         "recipe_ablation": ()}

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

def table1_pairs(cfg: PaperConfig) -> Dict[str, List[Tuple[str, str]]]:
    """Table 1's pairs by row kind: each recipe's seed pairs, and AT vs vanilla by seed position."""
    out = {name: list(itertools.combinations(seeds, 2)) for name, seeds in cfg.recipes.items()}
    out["cross"] = list(zip(cfg.recipes.get("at", []), cfg.recipes.get("vanilla", [])))
    return out


def ablation_pairs(cfg: PaperConfig) -> Dict[str, List[Tuple[str, str]]]:
    """The recipe ablation's seed pairs by arm: every two seeds of an arm."""
    return {arm: list(itertools.combinations(seeds, 2)) for arm, seeds in cfg.ablation.items()}


def layer_pairs(cfg: PaperConfig) -> List[Tuple[str, str]]:
    return [tuple(p) for s in cfg.layer_settings.values() for p in s.values()]

# Claim 12's method pairs, in the order the figure and the differences name them.
METHOD_PAIRS = (("at", "trades"), ("at", "mart"), ("trades", "mart"))
METHOD_LABELS = {"at": "AT", "trades": "TRADES", "mart": "MART"}


def method_positions(m: Mapping[str, Sequence[str]]) -> List[Dict[str, str]]:
    """A setting's models by training-seed position: [{at: at_i, trades: trades_i, mart: mart_i}, ...]
    (the i-th name of each method's list)."""
    return [dict(zip(m, names)) for names in zip(*m.values())]


def method_pairs(cfg: PaperConfig) -> List[Tuple[str, str]]:
    out: List[Tuple[str, str]] = []
    for m in cfg.methods.values():
        for position in method_positions(m):
            for a, b in METHOD_PAIRS:
                if (position[a], position[b]) not in out:
                    out.append((position[a], position[b]))
    return out


def matrix_models(cfg: PaperConfig) -> List[str]:
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


def graded_parts(cfg: PaperConfig, ok: Availability, with_iri: Callable[[str], Context]) -> Dict[str, Tuple[Any, Context]]:
    """Part ``graded_<i>`` per seed position whose three models are here: a matrix of (at_si,
    at_e025_si, vanilla_si), most robust first, as Table 2's ``relative_robustness`` is (claim 7's
    graded family, judged by ``stir.experiments.paper.table2.graded_from_parts``)."""
    return {f"graded_{i}": (MatrixConfig(name=f"graded_{i}", kind="matrix", models=list(reversed(names)),
                                         description=f"claim 7's graded family, seed position {i}"), with_iri("arbitrary"))
            for i, names in enumerate(cfg.graded_robustness) if len(names) == 3 and ok.all(list(names))}


def parts(ctx: Context, cfg: PaperConfig, ok: Availability) -> Dict[str, Tuple[Any, Context]]:
    """{part: (its kind's config on the models that exist, its context)}; a part with nothing to
    measure is left out (its claims say which models are missing)."""
    out: Dict[str, Tuple[Any, Context]] = {}

    def with_iri(iri: str, layers: Optional[LayersConfig] = None) -> Context:
        changes: Dict[str, Any] = {"estimator": dataclasses.replace(ctx.estimator, iri=iri)}
        changes["layers"] = layers or LayersConfig()
        return dataclasses.replace(ctx, **changes)

    seeds = [list(p) for kind in table1_pairs(cfg).values() for p in kind if ok.all(p)]
    if seeds:
        out["seeds"] = (PairsConfig(name="seeds", kind="pairs", pairs=seeds,
                                    description="Table 1: seed pairs and AT vs vanilla"), with_iri(cfg.seeds_iri))
        out.update(_adversarial_parts(ctx, cfg, seeds))
    out.update(graded_parts(cfg, ok, with_iri))
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
    layers = [list(p) for p in layer_pairs(cfg) if ok.all(p)]
    if layers:
        out["layers"] = (PairsConfig(name="layers", kind="pairs", pairs=layers,
                                     description="Figures 2-3, 6-7: layer-wise STIR of seed pairs"),
                         with_iri("arbitrary", cfg.layers))
    # position 0 of every family (the figure), then the later seeds of the families claim 11 reads
    seeded = [n for f in architecture_positions(cfg, ok).values() for p in f[1:] for names in p.values() for n in names]
    models = list(dict.fromkeys([n for n in matrix_models(cfg) if ok(n)] + seeded))
    if len(models) >= 2:
        twins = {m: seeds[0] for m, seeds in cfg.architecture_seeds.items() if m in models and seeds and ok(seeds[0])}
        out["architectures"] = (MatrixConfig(name="architectures", kind="matrix", models=models, seed_twins=twins,
                                             description="Figures 4, 8: STIR matrix across architectures"),
                                with_iri("arbitrary"))
    methods = [list(p) for p in method_pairs(cfg) if ok.all(p)]
    if methods:
        out["at_methods"] = (PairsConfig(name="at_methods", kind="pairs", pairs=methods,
                                         description="Figures 5, 9: layer-wise STIR between AT, TRADES and MART"),
                             with_iri("arbitrary", cfg.methods_layers))
    ablation = [list(p) for pairs in ablation_pairs(cfg).values() for p in pairs if ok.all(p)]
    if ablation:  # measured as Table 1's pairs are: the baseline arm's pairs are Table 1's vanilla pairs
        out["recipe_ablation"] = (PairsConfig(name="recipe_ablation", kind="pairs", pairs=ablation,
                                              description="The recipe question: seed pairs of each recipe arm"),
                                  with_iri(cfg.seeds_iri))
    # the paper's own Table 1 and Table 2 read STIR at IRIs (stir.experiments.paper.at_iris): no part repeats it
    return {name: (_without_at_iris(part), pctx) for name, (part, pctx) in out.items() if name not in cfg.skip}


def _without_at_iris(part: Any) -> Any:
    return dataclasses.replace(part, at_iris="off") if hasattr(part, "at_iris") else part


def _adversarial_parts(ctx: Context, cfg: PaperConfig, seeds: List[List[str]]) -> Dict[str, Tuple[Any, Context]]:
    """Part ``seeds_<objective>`` of each extra STIR_adv objective: the seed pairs, adversarial IRIs only."""
    out = {}
    for objective in extra_objectives(ctx, cfg):
        inversion = dataclasses.replace(ctx.estimator.inversion, adversarial_objective=objective)
        estimator = dataclasses.replace(ctx.estimator, iri="adversarial", inversion=inversion)
        out[f"seeds_{objective}"] = (
            PairsConfig(name=f"seeds_{objective}", kind="pairs", pairs=seeds,
                        description=f"Table 1's STIR_adv row with the {objective} adversarial objective"),
            dataclasses.replace(ctx, estimator=estimator, layers=LayersConfig()))
    return out


def extra_objectives(ctx: Context, cfg: PaperConfig) -> List[str]:
    """The objectives of ``stir_adv_objectives`` other than the evaluation's own (measured by ``seeds``)."""
    own = ctx.estimator.inversion.adversarial_objective
    return [o for o in dict.fromkeys(cfg.stir_adv_objectives) if o != own]
