"""The paper's claims as data: Nanda et al., "Measuring Representational Robustness of Neural Networks
Through Shared Invariances", ICML 2022 (arXiv 2206.11939), read whole (../shared/paper/nanda2022-stir.txt).

Each ``Claim`` holds one statement of the paper (``quote``: the key of its verbatim passage in
``stir.paper.published.QUOTES``, with its place), our short reading of it (``statement``), the
protocol the text states, the published numbers behind it (``Published``: value and the spread the
paper prints, from ``stir.paper.published.NUMBERS``) and its verdict function. Every number of Tables
1-3 is in ``stir.paper.published``; a claim that rests on a figure has no printed number (the paper
prints none for figures 1-9) and says so in ``Published.source``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Dict, Optional, Tuple

from stir.paper import levels
from stir.paper import verdicts as v

from stir.paper import published as pub

TABLE_1_SRC = "Table 1 (section 3), the paper's own text"
FIGURE = "a figure: the paper prints no number for it (its text states the direction only)"
TEXT = "the paper's text: it states the direction in words, with no number and no figure of it"
ORIGINAL_README = "the original code's README (github.com/nvedant07/STIR)"
PRESET = "this repository's preset (configs/evaluate/experiment/{}.yaml)"


@dataclass(frozen=True)
class Protocol:
    """How the paper measured it (None: the paper does not state it)."""

    dataset: Optional[str] = "cifar10"
    architectures: Tuple[str, ...] = ("resnet18",)
    width: Optional[int] = None  # 64: the full-width ResNet18
    epochs: Optional[int] = None
    n: Optional[int] = None  # images X
    runs: Optional[int] = None  # repeats the paper averages over (k draws / runs)
    steps: Optional[int] = None  # inversion steps
    layer: Optional[str] = None  # where S_r is read ("penultimate", or "every layer")
    similarity: Optional[str] = None  # S_r
    iri: Optional[str] = None  # arbitrary | adversarial IRIs
    models: Tuple[str, ...] = ()  # the zoo names of this repository's counterparts
    note: str = ""


@dataclass(frozen=True)
class Published:
    """One published number: ``value`` and the ``spread`` printed beside it; ``value`` None only for
    a figure, which prints none (``source`` says so)."""

    quantity: str  # e.g. "STIR(m1|m2)", "CKA", "STIR_adv"
    pair: str  # e.g. "AT / vanilla" (m1 / m2), or "" for a whole figure
    value: Optional[float] = None
    low: Optional[float] = None  # a stated range
    high: Optional[float] = None
    source: str = ""
    spread: Optional[float] = None  # the +- the paper prints (over its 5 runs for Tables 1 and 3)


@dataclass(frozen=True)
class Claim:
    number: int  # 1..12 as issue 31 lists them; 13..21 the statements issue 52 added; 22, 23 issue 66
    key: str
    statement: str  # our short reading of what the paper says
    where: str  # table / figure
    protocol: Protocol
    published: Tuple[Published, ...]
    verdict: Callable[..., v.Verdict]  # stir.paper.verdicts function; its evidence type is its argument
    needs: str  # what evidence the verdict needs, in words (the experiment presets that give it)
    not_testable_here: Optional[str] = None  # why it cannot be asked on this machine, when it cannot
    notes: Tuple[str, ...] = field(default_factory=tuple)
    quote: str = ""  # the key of its verbatim passage in stir.paper.published.QUOTES

    @property
    def quoted(self) -> str:
        """'"<the paper's words>" (place)'."""
        q = pub.QUOTES.get(self.quote)
        return f"\"{q.text}\" ({q.place})" if q else ""

    def judge(self, evidence=None, missing: str = "") -> v.Verdict:
        """The verdict on ``evidence`` (the verdict function's argument); without evidence: not
        testable, with ``missing`` (why it was not measured) or the claim's own reason."""
        if evidence is None:
            return v.not_testable(missing or self.not_testable_here or f"not measured ({self.needs})")
        return self.verdict(evidence)

    def paper_value(self, quantity: str, pair: str = "") -> Optional[float]:
        """The published value of ``quantity`` for ``pair`` (None when not stated or not listed)."""
        for p in self.published:
            if p.quantity == quantity and p.pair == pair:
                return p.value
        return None


TABLE_1 = Protocol(
    architectures=("resnet18",), n=1000, runs=5, layer="penultimate", similarity="linear CKA", iri="arbitrary",
    models=("vanilla_ls0", "vanilla_ls0_s1", "vanilla_ls0_s2", "at_ls0", "at_ls0_s1", "at_ls0_s2"),
    note="n and runs: Table 1's caption ('computed over 1000 random samples from CIFAR10 training set and averaged "
         "over 5 runs'); S_r and the layer: section 3.3; width, epochs and inversion steps are not stated (the paper "
         "states 100 epochs only for section 4.2's incremental models; 1000 steps of 0.5 is the original code's "
         "default, " + ORIGINAL_README + ")",
)


def _pub(row: str, pair: str, quantity: str, direction: str = "") -> Published:
    """Table 1's printed cell of ``row`` for ``pair`` (and ``direction``), as a claim's Published."""
    n = pub.number("Table 1", row, f"{pair}, {direction}" if direction else pair)
    return Published(quantity, pair, n.value, source=TABLE_1_SRC, spread=n.spread)


def _table1(pair: str) -> Tuple[Published, ...]:
    return (_pub("STIR", pair, "STIR(m1|m2)", "m1|m2"), _pub("STIR", pair, "STIR(m2|m1)", "m2|m1"), _pub("CKA", pair, "CKA"))


T1 = tuple(pub.T1_PAIRS)
VANILLA_SEEDS, AT_SEEDS, AT_VANILLA = (_table1(p) for p in T1)
STIR_ADV = tuple(_pub("STIR_adv", p, f"STIR_adv({d})", d) for p in T1 for d in ("m1|m2", "m2|m1"))
AGREEMENT = tuple(_pub("agreement", p, f"agreement({d})", d) for p in T1 for d in ("m1|m2", "m2|m1"))
DELTA = tuple(Published(f"Delta({d})", p, n.value, source="Table 3 (Appendix C)", spread=n.spread)
              for p in T1 for d in ("m1|m2", "m2|m1") for n in [pub.number("Table 3", "Delta", f"{p}, {d}")])
TABLE2_PAIRS = (("AT it=10", "AT it=1", "at_it10 / at_it1"), ("AT it=10", "Vanilla", "at_it10 / vanilla"),
                ("AT it=1", "Vanilla", "at_it1 / vanilla"))
TABLE2_PUBLISHED = tuple(Published("STIR(m2|m1) - STIR(m1|m2)", ours, round(pub.table2_difference(a, b), 3),
                                   source=f"Table 2: STIR({b}|{a}) {pub.TABLE2_CELLS[(a, b)][0][0]} - STIR({a}|{b}) "
                                          f"{pub.TABLE2_CELLS[(b, a)][0][0]}")
                         for a, b, ours in TABLE2_PAIRS)
LAYERS = Protocol(architectures=("resnet18", "vgg16", "resnet34", "vgg19"), layer="every layer", iri="arbitrary",
                  models=("vanilla_ls0", "vanilla_ls0_s1", "at_ls0", "at_ls0_s1", "vgg16", "vgg16_s1", "vgg16_at",
                          "vgg16_at_s1"), note=PRESET.format("layers"))
METHODS = Protocol(architectures=("resnet18", "vgg16"), layer="every layer", iri="arbitrary",
                   models=("at", "trades", "mart", "trades_b01", "mart_b01", "vgg16_at", "vgg16_trades", "vgg16_mart"),
                   note="TRADES/MART beta 1.0 (Appendix B) and 0.1 (section 5.3): both measured (stir.paper.published."
                        "BETA); " + PRESET.format("at_methods"))
ARCHITECTURES = Protocol(architectures=("resnet18", "resnet34", "vgg16", "vgg19"), layer="penultimate", iri="arbitrary",
                         models=("vanilla", "resnet34", "vgg16", "vgg19", "at", "resnet34_at", "vgg16_at", "vgg19_at"),
                         note=PRESET.format("architectures"))
CHAINS = Protocol(architectures=("resnet18",), epochs=100, layer="penultimate", iri="arbitrary",
                  models=("vanilla_n5000", "...", "vanilla_n45000", "at_n5000", "...", "at_n45000"),
                  note="sizes 5k, 10k, ..., 45k, 100 epochs each (section 4.2, which does not say whether a model starts from scratch or from m_t-1; ours: from scratch, our choice, the "
                       "laptop recipe's epochs): " + PRESET.format("incremental"))


def _figure(quantity: str, pair: str = "") -> Published:
    return Published(quantity, pair, None, source=FIGURE)


def _text(quantity: str, pair: str = "") -> Published:
    """A statement the paper makes in its text only (no figure shows it, no number is printed)."""
    return Published(quantity, pair, None, source=TEXT)


CLAIMS: Tuple[Claim, ...] = (
    Claim(1, "vanilla_seeds_stir_below_cka",
          "Vanilla seed pairs: STIR well below CKA (CKA overestimates shared invariance).", "Table 1, section 3.3",
          TABLE_1, VANILLA_SEEDS, v.stir_well_below_cka,
          "CKA - STIR with intervals, both directions of a vanilla seed pair (experiment=seeds)", quote="cka_overestimates"),
    Claim(2, "at_seeds_stir_high", "AT seed pairs: STIR high in both directions.", "Table 1, section 3.3",
          TABLE_1, AT_SEEDS, v.stir_high, "STIR both directions of an AT seed pair (experiment=seeds)", quote="at_high"),
    Claim(3, "at_vanilla_directional",
          "Directional: STIR(vanilla|AT) > STIR(AT|vanilla), m1 = AT.", "Table 1, section 3.3", TABLE_1, AT_VANILLA,
          v.more_robust_shares_less, "STIR(vanilla|AT) - STIR(AT|vanilla) with its interval, m1 = AT (experiment=seeds)",
          quote="directional"),
    Claim(4, "stir_adv_near_zero",
          "STIR_adv (adversarial IRIs, eq. 7) near 0 for every pair, AT seeds included.", "Table 1 (STIR_adv row)",
          dataclasses.replace(TABLE_1, iri="adversarial",
                              note=TABLE_1.note + "; which objective the published row came from is issue 31's item 5"),
          STIR_ADV, v.stir_adv_near_zero,
          "STIR_adv with intervals per direction, NaN where not measured (experiment=seeds iri=both)", quote="stir_adv",
          notes=("an existence claim ('the worst case is near 0'): our 300-step search can only bound the worst case "
                 "from above, so a higher value of ours cannot contradict it",)),
    Claim(5, "agreement_tracks_stir", "Agreement of predictions on X' is ordered like STIR.",
          "Table 1 (agreement row), section 3.3", TABLE_1, AGREEMENT, v.agreement_tracks_stir,
          "STIR and agreement on X' per direction of at least 3 directions (experiment=seeds)", quote="agreement"),
    Claim(6, "controversial_easier_for_vanilla_seeds",
          "Controversial stimuli (eq. 8) are easier (smaller Delta) for the vanilla seed pair than for the AT seed pair.",
          "section 3.3, Table 3, Appendix C",
          Protocol(architectures=("resnet18",), n=1000, runs=5, layer="penultimate", models=TABLE_1.models,
                   note="Delta = (1/n) sum ||X - X_c||_2 after eq. 8 (Appendix C); eq. 8's start and steps not stated"),
          DELTA, v.controversial_easier_for_vanilla,
          "eq.-8 Delta per direction of the vanilla and the AT seed pair, from x (python -m stir.experiments.paper.delta)",
          quote="controversial"),
    Claim(7, "more_robust_shares_less",
          "STIR(m2|m1) > STIR(m1|m2) when m1 is the more robust (AT it=10 > AT it=1 > vanilla).", "Table 2, section 4.1",
          Protocol(architectures=("resnet18",), layer="penultimate", iri="arbitrary",
                   models=("at_it10", "at", "at_it1", "vanilla"),
                   note="robust accuracy under l2 eps 1 (Table 2 caption); at_it10 is the paper's AT (10 PGD steps), at "
                        "the laptop profile's (2 steps); " + PRESET.format("relative_robustness")),
          TABLE2_PUBLISHED, v.more_robust_shares_less,
          "STIR(m2|m1) - STIR(m1|m2) with intervals for each ordered pair, m1 more robust (experiment=relative_robustness)",
          quote="relative_robustness"),
    Claim(8, "incremental_rises_and_plateaus",
          "STIR(m_t|m_t-1) between consecutive models of growing training sets rises and plateaus (vanilla, AT).",
          "Figure 1, section 4.2", CHAINS, (_figure("STIR(m_t|m_t-1)", "vanilla"), _figure("STIR(m_t|m_t-1)", "AT")),
          v.rises_and_plateaus, "STIR between consecutive sizes with intervals, vanilla and AT (experiment=incremental)",
          quote="incremental"),
    Claim(9, "layerwise_vanilla_falls_at_flat",
          "Layer-wise: vanilla seed pairs fall with depth; AT seed pairs flatter.", "Figures 2 and 6, section 5.1",
          LAYERS, (_figure("slope over depth", "vanilla"), _figure("slope over depth", "AT")), v.vanilla_falls_at_flat,
          "the slope of STIR over relative depth with its interval, vanilla and AT seed pairs (experiment=layers)",
          quote="layers"),
    Claim(10, "layerwise_same_on_cifar100",
          "Layer-wise, CIFAR-10 model against CIFAR-100 model: initial layers share more; AT raises every layer.",
          "Figures 3 and 7, section 5.1",
          Protocol(dataset="cifar10, cifar100", architectures=("resnet18",), layer="every layer", iri="arbitrary",
                   models=("vanilla", "c100", "at", "c100_at"),
                   note="the paper pairs a CIFAR-10 model with a CIFAR-100 model; " + PRESET.format("layers")),
          (_figure("slope over depth", "cifar10 / cifar100 vanilla"), _figure("slope over depth", "cifar10 / cifar100 AT")),
          v.same_across_datasets, "the layer-wise slopes of CIFAR-10 / CIFAR-100 pairs (experiment=layers)",
          not_testable_here="CIFAR-100 is not available on this machine (the code path is tested on synthetic "
                            "CIFAR-100-shaped data; zoo.sources.cifar100=PATH names a local copy)", quote="datasets"),
    Claim(11, "residual_nets_share_more",
          "Residual nets share more invariances among themselves than with VGGs (vanilla and AT).",
          "Figures 4 and 8, section 5.2", ARCHITECTURES,
          (_figure("STIR", "residual / residual"), _figure("STIR", "residual / VGG")), v.shares_more,
          "mean STIR among residual nets minus mean STIR between residual and VGG nets, with its interval "
          "(experiment=architectures)", quote="residual"),
    Claim(12, "at_trades_share_mart_less",
          "AT and TRADES share invariances; MART shares less with either (layer-wise).", "Figures 5 and 9",
          METHODS, (_figure("STIR", "AT / TRADES"), _figure("STIR", "AT / MART"), _figure("STIR", "TRADES / MART")),
          v.shares_more, "STIR(AT, TRADES) - STIR(AT, MART) and - STIR(TRADES, MART), layer mean, with intervals "
                         "(experiment=at_methods)", quote="methods"),
    Claim(13, "methods_share_mildly",
          "AT, TRADES and MART share only mild invariance: lines of best fit around 0.5.", "section 5.3, Figure 5",
          METHODS, (Published("STIR, line of best fit", "AT / TRADES / MART", 0.5, source="section 5.3's text ('around "
                                                                                        "0.5')"),),
          levels.within_band, "the layer mean of STIR for each method pair (experiment=at_methods)",
          quote="methods_mild"),
    Claim(14, "seed_stability_of_x_prime",
          "STIR is stable over the random seeds of X' (the inversion's starting points).", "section 2.3, Figure 8 caption",
          TABLE_1, (_text("STIR over seeds of X'"),), levels.spread_small,
          "the sd of STIR over the k draws of X' per direction (experiment=seeds, k >= 2)", quote="seed_stability"),
    Claim(15, "linear_cka_as_rbf_cka",
          "Linear CKA works as well as RBF CKA as S_r (other S_r: SVCCA, PWCCA).", "section 3.1, Appendix A",
          TABLE_1, (_text("STIR(linear CKA) - STIR(RBF CKA)"),), levels.within_band,
          "STIR of Table 1's pairs with measure=rbf_cka beside linear CKA (experiment=seeds)", quote="linear_rbf"),
    Claim(16, "incremental_rises_reverse",
          "STIR(m_t-1|m_t) also rises with the data (Figure 1's other direction).", "Figure 1, section 4.2",
          CHAINS, (_figure("STIR(m_t-1|m_t)", "vanilla"), _figure("STIR(m_t-1|m_t)", "AT")), levels.rises,
          "STIR(m_t-1|m_t) between consecutive sizes (experiment=incremental)", quote="incremental_reverse"),
    Claim(17, "at_layers_similarly_high",
          "AT seed pairs: every layer converges to similarly high STIR.", "section 5.1, Figures 2 and 6", LAYERS,
          (_figure("STIR per layer", "AT"),), levels.within_band,
          "STIR at every tap of the AT seed pairs (experiment=layers)", quote="at_layers_high"),
    Claim(18, "drops_across_training_types",
          "ResNets share more when trained with the same loss; it drops across training types.",
          "Figures 4 and 8", ARCHITECTURES, (_figure("STIR", "same loss - across types"),), v.shares_more,
          "mean STIR of same-loss ResNet pairs minus vanilla/AT ResNet pairs (experiment=architectures)",
          quote="drops_across_types"),
    Claim(19, "at_architectures_high",
          "With AT even different architectures converge to high STIR.", "Figures 4 and 8", ARCHITECTURES,
          (_figure("STIR", "AT residual / AT VGG"),), levels.within_band,
          "STIR between AT residual nets and AT VGGs (experiment=architectures)", quote="at_architectures_high"),
    Claim(20, "vgg16_methods_higher",
          "VGG16's AT/TRADES/MART share much more than ResNet18's.", "Appendix D.3, Figure 9", METHODS,
          (_figure("STIR", "VGG16 - ResNet18"),), v.shares_more,
          "the layer mean of each method pair, VGG16 minus ResNet18 (experiment=at_methods)", quote="vgg16_higher"),
    Claim(21, "methods_similar_accuracy",
          "AT, TRADES and MART ResNet18s have similar clean and robust accuracy (section 5.3's premise).",
          "section 5.3", METHODS, (_text("robust accuracy gap"),), levels.within_band,
          "the models' test and PGD-l2 accuracies (zoo/models)", quote="methods_premise"),
    Claim(22, "at_it10_more_robust_than_at_it1",
          "AT it=10 is more robust than AT it=1 (section 4.1's premise: 51.5% against 34.6%).", "section 4.1",
          Protocol(architectures=("resnet18",), models=("at_it10", "at_it1"),
                   note="robust accuracy under l2 eps 1 (Table 2 caption)"),
          (Published("robust accuracy", "AT it=10", 0.515, source="section 4.1's text"),
           Published("robust accuracy", "AT it=1", 0.346, source="section 4.1's text")),
          v.shares_more, "the PGD-l2 accuracies of at_it10 and at_it1 (zoo/models)", quote="robustness_premise"),
    Claim(23, "controversial_harder_for_higher_stir",
          "Controversial stimuli are harder to generate for higher STIR, over every direction (Table 3's caption).",
          "Table 3 caption", TABLE_1, (_text("difficulty against STIR"),), v.controversial_harder_for_higher_stir,
          "STIR and controversial-stimulus difficulty per direction of at least 3 directions (experiment=seeds)",
          quote="controversial_caption"),
)

BY_NUMBER: Dict[int, Claim] = {c.number: c for c in CLAIMS}
BY_KEY: Dict[str, Claim] = {c.key: c for c in CLAIMS}


def claim(which) -> Claim:
    """A claim by its number (1..23) or key."""
    table = BY_NUMBER if isinstance(which, int) else BY_KEY
    if which not in table:
        raise KeyError(f"no paper claim {which!r}; claims: {sorted(BY_NUMBER)} / {sorted(BY_KEY)}")
    return table[which]
