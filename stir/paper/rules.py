"""Each claim's verdict rule as data: its words, the commit that set it, whether it was written before
or after its data was seen, and the verdict under the rule it replaced (issue 52).

The verdict words of the scorecard (``word``):

    holds                                   every interval on the claim's side of its pre-set threshold
    direction reproduced, size not resolved  every unit (pair, direction, seed position) on the claim's
                                            side as a point, an interval straddling the threshold
    not resolved                            neither; the scorecard says what compute would resolve it
    contradicted                            an interval on the wrong side, from a measurement at least as
                                            strong as the paper's (``Rule.can_contradict``: claim 4's
                                            300-step search cannot contradict an existence claim)
    not testable here                       with what would make it testable
    not measured in this report             measurable here, not in the store: the command

A commit hash is kept as data (``Rule.set_in``), so a copy without git history still names it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from stir.paper.verdicts import FAILS, HOLDS, NOT_RUN, NOT_TESTABLE, Verdict

HOLDS_W = "holds"
DIRECTION_W = "direction reproduced, size not resolved"
NOT_RESOLVED_W = "not resolved"
CONTRADICTED_W = "contradicted"
NOT_TESTABLE_W = "not testable here"
NOT_MEASURED_W = "not measured in this report"
WORDS = (HOLDS_W, DIRECTION_W, NOT_RESOLVED_W, CONTRADICTED_W, NOT_TESTABLE_W, NOT_MEASURED_W)

BEFORE = "before its data"
AFTER = "after its data was seen"
# This branch's rules (issue 52): written with the whole paper at hand, most over data already in the
# store; the commit below first committed them (branch iss52a; their code: 5ac8a63).
ISSUE52 = "8a9f7b0"


@dataclass(frozen=True)
class Rule:
    claim: int
    text: str  # the rule, in words
    set_in: str  # the commit that set it (a hash, kept as data)
    when: str  # BEFORE or AFTER
    old: str = ""  # the rule it replaced and its verdict then, for a rule changed after the data
    can_contradict: bool = True  # False: our measurement is weaker than the paper's for this claim


RULES: Dict[int, Rule] = {r.claim: r for r in (
    Rule(1, "CKA - STIR above 0.1 in both directions (random effects over the 3 seed pairs); beside it a one-sided "
            "sign test over the 6 directions", "00c4540; sign test " + ISSUE52, BEFORE + " (margin); the sign test " + AFTER),
    Rule(2, "STIR above 0.8 in both directions (random effects over the 3 seed pairs)", "00c4540", BEFORE),
    Rule(3, "STIR(vanilla|AT) - STIR(AT|vanilla) above 0, pooled over the 3 disjoint (at_i, vanilla_i) pairs; beside "
            "it a sign test over the pairs", "00c4540; sign test " + ISSUE52, BEFORE + " (margin); the sign test " + AFTER),
    Rule(4, "every STIR_adv below 0.15 (the original code's objective); a value above cannot contradict", "00c4540; "
            "cannot-contradict " + ISSUE52, BEFORE + "; cannot-contradict " + AFTER,
         old="contradicted (a 300-step search's higher value read as against an existence claim)", can_contradict=False),
    Rule(5, "Spearman rho of agreement against STIR at least 0.5 over at least 3 directions", "00c4540", BEFORE),
    Rule(6, "Spearman rho of difficulty against STIR at least 0.5; not resolved where most directions sit at the "
            "walk's cap (ties carry no order)", "00c4540; ties " + ISSUE52, BEFORE + "; the tie rule " + AFTER,
         old="does not hold (Spearman 0.20 over 18 directions, 15 of them tied at the cap)"),
    Rule(7, "per pair with m1 measurably more robust (PGD-l2 gap interval above 0): STIR(m2|m1) - STIR(m1|m2) above 0",
         "ba26bd0 (equal-robustness pairs dropped)", AFTER,
         old="not resolved (at / at_it1: -0.002 [-0.020, 0.015], two equally robust models)"),
    Rule(8, "the Theil-Sen rise above 0, and the last third's rise at most a quarter of it; the plateau half's "
            "outcome is fixed in advance at this budget (power below): read as not resolved whatever it says",
         "00c4540, b84d5d0 (Theil-Sen); plateau power " + ISSUE52, AFTER,
         old="does not hold (the last third's point rise 0.016 above the bound 0.010)"),
    Rule(9, "vanilla slopes below 0 and AT slopes above the vanilla slopes ('flatter', section 5.1), chance-corrected",
         "b80521a (chance-corrected); flatter " + ISSUE52, AFTER,
         old="normalised reading: not resolved; 'flat' within +-0.1: holds (every AT slope is below 0: flatter, not flat)"),
    Rule(10, "claim 9's rule on CIFAR-10 / CIFAR-100 pairs", "00c4540", BEFORE),
    Rule(11, "residual/residual - residual/VGG above 0 in each family, pooled over seed positions, chance-corrected",
         "801ba6c (seed positions), e402b9a (chance-corrected)", AFTER, old="raw STIR: holds (the same verdict)"),
    Rule(12, "STIR(AT, TRADES) - STIR(AT, MART) and - STIR(TRADES, MART) above 0, layer mean (Figures 5/9 are "
             "layer-wise)", "801ba6c; layer mean " + ISSUE52, AFTER,
         old="penultimate layer only: contradicted (-0.085 [-0.118, -0.051] at beta 1.0)"),
    Rule(13, "each method pair's layer-mean STIR within [0.3, 0.7] ('around 0.5')", ISSUE52, AFTER),
    Rule(14, "the sd of STIR over the k draws of X' below 0.05 in every direction", ISSUE52, AFTER),
    Rule(15, "|STIR(linear CKA) - STIR(RBF CKA)| within 0.05 per direction", ISSUE52, BEFORE),
    Rule(16, "the Theil-Sen rise of STIR(m_t-1|m_t) above 0 per chain", ISSUE52, AFTER),
    Rule(17, "every tap's STIR of the AT seed pairs within [0.8, 1] (HIGH_STIR)", ISSUE52, AFTER),
    Rule(18, "same-loss ResNet pairs minus vanilla/AT ResNet pairs above 0, pooled over seed positions", ISSUE52, AFTER),
    Rule(19, "STIR between AT residual nets and AT VGGs within [0.8, 1] (HIGH_STIR)", ISSUE52, AFTER),
    Rule(20, "VGG16 minus ResNet18 layer-mean STIR above 0 per method pair (one VGG16 seed: not resolved unless "
             "contradicted over several)", ISSUE52, AFTER),
    Rule(21, "robust and clean accuracy gaps of AT, TRADES, MART within +-0.05 per seed position (two-proportion "
             "intervals)", ISSUE52, AFTER),
)}

# Claim 7 asked of the graded-robustness family (configs/zoo.yaml at_e025*, AT at training eps 0.25),
# written before any of its models was trained or measured (issue 52).
GRADED = Rule(
    7, "Table 2 asked per seed position i of (vanilla_si, at_e025_si, at_si), most robust first at, at_e025, vanilla: "
       "for each of the 3 ordered pairs whose PGD-l2 gap interval is above 0, D = STIR(m2|m1) - STIR(m1|m2) per "
       "position, pooled over the 3 disjoint positions by random effects (Hartung-Knapp, 2 df). Holds: every pair's "
       "interval above 0; contradicted: one below 0; direction reproduced: all 9 position values above 0; else not "
       "resolved. STIR and CKA beside every Table 2 cell.", ISSUE52, BEFORE)
# The differences the graded rule's power is computed at: Table 2's (at_it10 ~ at, at_it1 ~ at_e025).
GRADED_EFFECTS = {"at / at_e025": 0.07, "at / vanilla": 0.10, "at_e025 / vanilla": 0.18}


def word(number: int, verdict: Verdict, direction: Optional[Tuple[int, int]] = None) -> str:
    """The scorecard's word for ``verdict`` of claim ``number``; ``direction`` = (units on the claim's
    side as points, units), where the claim has units (pairs, directions, positions)."""
    if verdict.outcome == NOT_RUN:
        return NOT_MEASURED_W
    if verdict.outcome == NOT_TESTABLE:
        return NOT_TESTABLE_W
    if verdict.outcome == HOLDS:
        return HOLDS_W
    if verdict.outcome != FAILS:
        raise ValueError(f"claim {number}: unknown verdict outcome {verdict.outcome!r}")
    rule = RULES.get(number)
    if verdict.reason.startswith("contradicted") and (rule is None or rule.can_contradict):
        return CONTRADICTED_W
    if direction is not None and direction[1] > 0 and direction[0] == direction[1]:
        return DIRECTION_W
    return NOT_RESOLVED_W
