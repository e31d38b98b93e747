"""The paper's claims as data: Nanda et al., "Measuring Representational Robustness of Neural Networks
Through Shared Invariances", ICML 2022 (arXiv 2206.11939).

Each ``Claim`` holds what the paper states (qualitatively), where (table / figure), under which
protocol, the published numbers behind it, and its verdict function (``stir.paper.verdicts``). A
number this project could not read from a source is ``None`` (``Published.value``), never guessed;
``Published.source`` says where each number was read.

Sources: the paper's Table 1 as quoted in this project's issue 31 (STIR both ways and CKA per pair,
n = 1000, 5 runs, full-width ResNet18, 100 epochs) and the STIR_adv range of that table as quoted in
issue 29 ("0.05-0.10 where STIR is 0.4-0.94"); the original code (github.com/nvedant07/STIR: its README,
STIR at the penultimate layer with linear CKA as S_r and n = 1000 in its example; its default of 1000
inversion steps); the other protocols as this
repository's presets read the paper (``configs/evaluate/experiment/*.yaml``). The paper's text beyond
its first page was not available to this project: the other tables' and figures' numbers are None.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, Optional, Tuple

from stir.paper import verdicts as v

ISSUE_31 = "Table 1 as quoted in issue 31"
ISSUE_29 = "Table 1's STIR_adv row as quoted in issues 29 and 31"
ORIGINAL_README = "the original code's README (github.com/nvedant07/STIR)"
PRESET = "this repository's preset (configs/evaluate/experiment/{}.yaml)"


@dataclass(frozen=True)
class Protocol:
    """How the paper measured it (None: not stated in the sources at hand)."""

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
    """One published number (or range): ``value`` None when the sources do not state it."""

    quantity: str  # e.g. "STIR(m1|m2)", "CKA", "STIR_adv"
    pair: str  # e.g. "AT / vanilla" (m1 / m2), or "" for a whole figure
    value: Optional[float] = None
    low: Optional[float] = None  # a stated range (STIR_adv 0.05-0.10)
    high: Optional[float] = None
    source: str = ""


@dataclass(frozen=True)
class Claim:
    number: int  # 1..12, as issue 31 lists them
    key: str
    statement: str  # what the paper says, qualitatively
    where: str  # table / figure
    protocol: Protocol
    published: Tuple[Published, ...]
    verdict: Callable[..., v.Verdict]  # stir.paper.verdicts function; its evidence type is its argument
    needs: str  # what evidence the verdict needs, in words (the experiment presets that give it)
    not_testable_here: Optional[str] = None  # why it cannot be asked on this machine, when it cannot
    notes: Tuple[str, ...] = field(default_factory=tuple)

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
    architectures=("resnet18",), width=64, epochs=100, n=1000, runs=5, steps=1000, layer="penultimate",
    similarity="linear CKA", iri="arbitrary", models=("vanilla", "vanilla_s1", "at", "at_s1"),
    note="n, runs, width and epochs: issue 31's quote of Table 1 (width 64 is the full-width ResNet18); steps: the "
         "original code's default (1000 iterations of step 0.5, unconstrained; stir/stir.py of nvedant07/STIR), not "
         "read from the paper; layer and S_r: " + ORIGINAL_README,
)


def _table1(pair: str, stir_12: float, stir_21: float, cka: float) -> Tuple[Published, ...]:
    return (Published("STIR(m1|m2)", pair, stir_12, source=ISSUE_31), Published("STIR(m2|m1)", pair, stir_21, source=ISSUE_31),
            Published("CKA", pair, cka, source=ISSUE_31))


VANILLA_SEEDS = _table1("vanilla / vanilla seed", 0.605, 0.562, 0.967)
AT_SEEDS = _table1("AT / AT seed", 0.934, 0.939, 0.937)
AT_VANILLA = _table1("AT / vanilla", 0.405, 0.509, 0.536)
STIR_ADV = tuple(Published("STIR_adv", pair, None, low=0.05, high=0.10, source=ISSUE_29)
                 for pair in ("vanilla / vanilla seed", "AT / AT seed", "AT / vanilla"))

CLAIMS: Tuple[Claim, ...] = (
    Claim(1, "vanilla_seeds_stir_below_cka",
          "Models that differ only in their seed (vanilla training) share far fewer invariances than CKA suggests: "
          "STIR is well below CKA.", "Table 1", TABLE_1, VANILLA_SEEDS, v.stir_well_below_cka,
          "CKA - STIR with intervals, both directions of a vanilla seed pair (experiment=seeds)"),
    Claim(2, "at_seeds_stir_high",
          "Adversarially trained models that differ only in their seed share most invariances: STIR is high.",
          "Table 1", TABLE_1, AT_SEEDS, v.stir_high, "STIR both directions of an AT seed pair (experiment=seeds)"),
    Claim(3, "at_vanilla_directional",
          "STIR is directional: the AT model shares fewer of the vanilla model's invariances than the vanilla model "
          "shares of the AT model's, STIR(AT|vanilla) < STIR(vanilla|AT).", "Table 1", TABLE_1, AT_VANILLA,
          v.more_robust_shares_less,
          "STIR(vanilla|AT) - STIR(AT|vanilla) with its interval, m1 = AT (experiment=seeds)"),
    Claim(4, "stir_adv_near_zero",
          "With adversarial IRIs (eq. 7) STIR_adv is near 0 for every pair: the reference's IRIs can be chosen so that "
          "the other model does not share them.", "Table 1 (STIR_adv row)",
          Protocol(architectures=TABLE_1.architectures, width=64, epochs=100, n=1000, runs=5, steps=1000, layer="penultimate",
                   similarity="linear CKA", iri="adversarial", models=TABLE_1.models,
                   note="which objective the published numbers came from is issue 31's item 5"),
          STIR_ADV, v.stir_adv_near_zero,
          "STIR_adv with intervals per direction, NaN where not measured (experiment=seeds iri=both)",
          notes=("the sources give the range 0.05-0.10 over the row, not its per-pair values",)),
    Claim(5, "agreement_tracks_stir",
          "Agreement of the two models' predictions on the IRIs X' is ordered like STIR.", "Table 1 (agreement row)",
          TABLE_1, (Published("agreement", "vanilla / vanilla seed"), Published("agreement", "AT / AT seed"),
                    Published("agreement", "AT / vanilla")), v.agreement_tracks_stir,
          "STIR and agreement on X' per direction of at least 3 directions (experiment=seeds)",
          notes=("the agreement values are not in the sources at hand",)),
    Claim(6, "controversial_harder_for_higher_stir",
          "Controversial stimuli (inputs on which the two models disagree) are harder to find for pairs with higher "
          "STIR.", "Table 3 / appendix C",
          Protocol(architectures=("resnet18",), layer="penultimate", models=TABLE_1.models),
          (Published("controversial difficulty", ""),), v.controversial_harder_for_higher_stir,
          "STIR and controversial-stimulus difficulty per direction of at least 3 directions (experiment=seeds)"),
    Claim(7, "more_robust_shares_less",
          "Between models of different robustness (AT with 10 steps, AT with 1 step, vanilla), STIR(m2|m1) > "
          "STIR(m1|m2) when m1 is the more robust model.", "Table 2",
          Protocol(architectures=("resnet18",), layer="penultimate", iri="arbitrary",
                   models=("at_it10", "at", "at_it1", "vanilla"),
                   note="at_it10 is the paper's AT (10 PGD steps), at the laptop profile's AT (2 steps); "
                        + PRESET.format("relative_robustness")),
          (Published("STIR(m2|m1) - STIR(m1|m2)", "at_it10 / at_it1"),
           Published("STIR(m2|m1) - STIR(m1|m2)", "at_it10 / vanilla"),
           Published("STIR(m2|m1) - STIR(m1|m2)", "at_it1 / vanilla")),
          v.more_robust_shares_less,
          "STIR(m2|m1) - STIR(m1|m2) with intervals for each ordered pair, m1 more robust (experiment=relative_robustness)"),
    Claim(8, "incremental_rises_and_plateaus",
          "STIR between consecutive models trained on growing, nested training sets rises with the data and plateaus, "
          "for vanilla and AT models.", "Figure 1",
          Protocol(architectures=("resnet18",), layer="penultimate", iri="arbitrary",
                   models=("vanilla_n5000", "...", "vanilla_n45000", "at_n5000", "...", "at_n45000"),
                   note="sizes 5k, 10k, ..., 45k, each trained from scratch: " + PRESET.format("incremental")),
          (Published("STIR(m_t|m_t-1)", "vanilla"), Published("STIR(m_t|m_t-1)", "AT")), v.rises_and_plateaus,
          "STIR between consecutive sizes with intervals, vanilla and AT (experiment=incremental)"),
    Claim(9, "layerwise_vanilla_falls_at_flat",
          "Layer-wise, STIR between vanilla seed models falls with depth (negative slope), between AT seed models it "
          "stays flat.", "Figures 2 and 6",
          Protocol(architectures=("resnet18", "vgg16", "resnet34", "vgg19"), layer="every layer", iri="arbitrary",
                   models=("vanilla", "vanilla_s1", "at", "at_s1", "vgg16", "vgg16_s1", "vgg16_at", "vgg16_at_s1"),
                   note=PRESET.format("layers")),
          (Published("slope over depth", "vanilla"), Published("slope over depth", "AT")), v.vanilla_falls_at_flat,
          "the slope of STIR over relative depth with its interval, vanilla and AT seed pairs (experiment=layers)"),
    Claim(10, "layerwise_same_on_cifar100",
          "The layer-wise picture of figures 2 and 6 is the same on CIFAR-10 and CIFAR-100.", "Figures 3 and 7",
          Protocol(dataset="cifar10, cifar100", architectures=("resnet18",), layer="every layer", iri="arbitrary",
                   models=("c100", "c100_s1", "c100_at", "c100_at_s1"), note=PRESET.format("layers")),
          (Published("slope over depth", "cifar100 vanilla"), Published("slope over depth", "cifar100 AT")),
          v.same_across_datasets, "claim 9's slopes on CIFAR-10 and on CIFAR-100 (experiment=layers)",
          not_testable_here="CIFAR-100 is not available on this machine (the code path is tested on synthetic "
                            "CIFAR-100-shaped data; zoo.sources.cifar100=PATH names a local copy)"),
    Claim(11, "residual_nets_share_more",
          "Residual architectures share more invariances among themselves than with non-residual (VGG) ones.",
          "Figures 4 and 8",
          Protocol(architectures=("resnet18", "resnet34", "vgg16", "vgg19"), layer="penultimate", iri="arbitrary",
                   models=("vanilla", "resnet34", "vgg16", "vgg19", "at", "resnet34_at", "vgg16_at", "vgg19_at"),
                   note=PRESET.format("architectures")),
          (Published("STIR", "residual / residual"), Published("STIR", "residual / VGG")), v.shares_more,
          "mean STIR among residual nets minus mean STIR between residual and VGG nets, with its interval "
          "(experiment=architectures)"),
    Claim(12, "at_trades_share_mart_less",
          "Models trained with AT and TRADES share invariances; MART models share less with either.", "Figures 5 and 9",
          Protocol(architectures=("resnet18", "vgg16"), layer="every layer", iri="arbitrary",
                   models=("at", "trades", "mart", "trades_b01", "mart_b01", "vgg16_at", "vgg16_trades", "vgg16_mart"),
                   note="TRADES/MART beta 0.1 (section 5.3) and 1.0 (appendix B): " + PRESET.format("at_methods")),
          (Published("STIR", "AT / TRADES"), Published("STIR", "AT / MART"), Published("STIR", "TRADES / MART")),
          v.shares_more,
          "STIR(AT, TRADES) - STIR(AT, MART) and STIR(AT, TRADES) - STIR(TRADES, MART) with intervals "
          "(experiment=at_methods)"),
)

BY_NUMBER: Dict[int, Claim] = {c.number: c for c in CLAIMS}
BY_KEY: Dict[str, Claim] = {c.key: c for c in CLAIMS}


def claim(which) -> Claim:
    """A claim by its number (1..12) or key."""
    table = BY_NUMBER if isinstance(which, int) else BY_KEY
    if which not in table:
        raise KeyError(f"no paper claim {which!r}; claims: {sorted(BY_NUMBER)} / {sorted(BY_KEY)}")
    return table[which]
