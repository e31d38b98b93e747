"""The config of experiment kind ``paper`` (``stir.experiments.paper``), torch-free: the package's
``__init__`` imports the application, so the config sits beside the package, not in it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List

from stir.experiments.schema import AtIRIsFields, ExperimentConfig, LayersConfig, kind_config, once


@kind_config("paper")
@dataclass
class PaperConfig(ExperimentConfig, AtIRIsFields):
    """experiment kind ``paper``: the models each claim's preset needs, named by zoo name. Its ``at_iris*``
    fields (``AtIRIsFields``) ask Table 1 and Table 2 again at IRIs (``stir.experiments.paper.at_iris``):
    each direction of their pairs read where its X' are IRIs, from the seeds part's images and seeds, and
    claims 1-3 and 7 judged again on it."""

    # Table 1 (claims 1-6): a recipe's training seeds; seed pairs are every two of them, and AT vs
    # vanilla pairs are (at_i, vanilla_i) by position (independent pairs: no model shared).
    recipes: Dict[str, List[str]] = field(default_factory=lambda: {"vanilla": [], "at": []})
    seeds_iri: str = "both"  # Table 1 has STIR_adv (claim 4)
    # Table 1's STIR_adv row under more adversarial objectives than the evaluation's own
    # (inversion.adversarial_objective, constrained by default): each one is a part of its own,
    # seeds_<objective>, on the same pairs with adversarial IRIs only. The published 0.05-0.10 came from
    # the original code, whose objective is `original` (r1 - 0.1 r2, no bound): claim 4 is judged on
    # that reading where it is measured, the constrained one beside it.
    stir_adv_objectives: List[str] = field(default_factory=lambda: ["original"])
    # Table 2 (claim 7): models ordered from the most robust to the least.
    robustness: List[str] = field(default_factory=list)
    # Claim 7 asked of the graded-robustness family (issue 52): per seed position [vanilla_si, at_e025_si,
    # at_si], least robust first; judged by stir.paper.rules.GRADED (committed before its models exist).
    graded_robustness: List[List[str]] = field(default_factory=list)
    # Figure 1 (claim 8): {family: [m_1, m_2, ...]} ordered by training-set size.
    chains: Dict[str, List[str]] = field(default_factory=dict)
    # Figures 2, 3, 6, 7 (claims 9, 10): {"<dataset> <architecture>": {vanilla: [a, b], at: [c, d]}}
    layer_settings: Dict[str, Dict[str, List[str]]] = field(default_factory=dict)
    # Figures 4, 8 (claim 11): {family: {residual: [...], vgg: [...]}}, the first training seed of each
    # architecture, and {model: [its later training seeds]}: seed position i replaces every model of a
    # family by its i-th later seed, and claim 11's difference is pooled over the positions (as claim
    # 12's). The first later seed is the model's twin on the matrix's diagonal. Seeds of a model the
    # architectures do not name are unused (an override of `architectures` keeps the preset's seeds).
    architectures: Dict[str, Dict[str, List[str]]] = field(default_factory=dict)
    architecture_seeds: Dict[str, List[str]] = field(default_factory=dict)
    # Figures 5, 9 (claim 12): {setting: {at: [its training seeds], trades: [...], mart: [...]}}, as
    # many seeds of each; seed position i is (at_i, trades_i, mart_i), its three pairs measured, and
    # claim 12's differences are pooled over the positions (independent: they share no model).
    methods: Dict[str, Dict[str, List[str]]] = field(default_factory=dict)
    # Where the layer-wise parts read the models (figures 2-3, 6-7: the original code's taps; 5, 9: all).
    layers: LayersConfig = field(default_factory=lambda: LayersConfig(taps="original"))
    methods_layers: LayersConfig = field(default_factory=lambda: LayersConfig(taps="all"))
    # The recipe question (issue 31; part recipe_ablation, no claim of its own): {arm: [its training
    # seeds]}, the first arm the baseline, and {arm: the lever it moves, in words} for the table. Every
    # two seeds of an arm are a seed pair, measured as Table 1's pairs are (seeds_iri); each arm is read
    # against the baseline with Welch's interval and an equivalence test at ablation_margin
    # (stir.experiments.paper.ablation).
    ablation: Dict[str, List[str]] = field(default_factory=dict)
    ablation_levers: Dict[str, str] = field(default_factory=dict)
    ablation_margin: float = 0.05
    # Parts left out of this report (seeds, relative_robustness, incremental, layers, architectures,
    # at_methods, recipe_ablation): their claims read "not measured in this report" (never held or failed), so that a
    # report of the parts measured so far can be written while the others are still to be computed.
    skip: List[str] = field(default_factory=list)
    # Claim 6's eq.-8 Delta (appendix C, Table 3's columns on the Table 1 models): images and solver steps
    # per direction and start (stir.experiments.paper.delta.DeltaConfig; the shipped results: 16 and 1000).
    delta_n: int = 16
    delta_steps: int = 1000
    # Measure nothing: the report of what the results store (and the shipped results, zoo/store) holds.
    # A pair not stored is left out of its part (the part's claims then rest on fewer seed pairs, and
    # say so); a part with nothing stored, or a matrix / chain with a cell missing, is left out like a
    # skipped one ("not measured in this report").
    stored_only: bool = False

    def model_names(self, common: Any = None) -> List[str]:
        return once([*(m for seeds in self.recipes.values() for m in seeds), *self.robustness,
                      *(m for row in self.graded_robustness for m in row),
                      *(m for chain in self.chains.values() for m in chain),
                      *(m for arms in self.layer_settings.values() for ms in arms.values() for m in ms),
                      *(m for fam in self.architectures.values() for ms in fam.values() for m in ms),
                      *(m for later in self.architecture_seeds.values() for m in later),
                      *(m for setting in self.methods.values() for ms in setting.values() for m in ms),
                      *(m for seeds in self.ablation.values() for m in seeds)])
