"""Each claim's verdict rule as data: its words, when it was set relative to its data (before, or after
the data was seen), and the verdict under the rule as first written where it changed after the data
(issues 52, 66).

The verdict words of the scorecard (``word``), symmetric about the paper's side:

    holds                                   every interval on the claim's side of its pre-set threshold
    direction reproduced, size not resolved  every independent unit (model pair, seed position) on the
                                            claim's side as a point, an interval straddling the threshold
    not resolved                            neither; the scorecard says what compute would resolve it
    direction opposite, size not resolved   every unit on the other side as a point, not an interval
                                            that can contradict (one training seed, a weaker measurement)
    contradicted                            an interval on the wrong side, from a measurement that can
                                            contradict the claim (``Rule.can_contradict``)
    premise not met in this zoo             the claim assumes a property of its models (``PREMISES``)
                                            that ours lack, or a premise row that our models do not meet
    not testable here                       with what would make it testable
    not measured in this report             measurable here, not in the store: the command

The commit that set a rule is kept as data (``Rule.set_in``); the scorecard's rule column shows the
rule in words and when it was set, never the hash.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from stir.paper.verdicts import FAILS, HOLDS, NOT_RUN, NOT_TESTABLE, Verdict

HOLDS_W = "holds"
DIRECTION_W = "direction reproduced, size not resolved"
NOT_RESOLVED_W = "not resolved"
OPPOSITE_W = "direction opposite, size not resolved"
CONTRADICTED_W = "contradicted"
PREMISE_W = "premise not met in this zoo"
NOT_TESTABLE_W = "not testable here"
NOT_MEASURED_W = "not measured in this report"
WORDS = (HOLDS_W, DIRECTION_W, NOT_RESOLVED_W, OPPOSITE_W, CONTRADICTED_W, PREMISE_W, NOT_TESTABLE_W, NOT_MEASURED_W)

# {claim: the premise row it rests on}: a claim about models the paper says are alike (section 5.3's
# "similar clean and robust accuracy", claim 21) says nothing where ours are not (issue 66).
PREMISES = {12: 21, 13: 21, 20: 21}

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
    premise: bool = False  # a property of the models other claims assume: unmet reads PREMISE_W


RULES: Dict[int, Rule] = {r.claim: r for r in (
    Rule(1, "CKA - STIR above 0.1 in both directions (random effects over the 3 seed pairs); beside it a one-sided "
            "sign test over the 6 directions", "00c4540; sign test " + ISSUE52, BEFORE + " (margin); the sign test " + AFTER),
    Rule(2, "STIR above 0.8 in both directions (random effects over the 3 seed pairs)", "00c4540", BEFORE),
    Rule(3, "STIR(vanilla|AT) - STIR(AT|vanilla) above 0, pooled over the 3 disjoint (at_i, vanilla_i) pairs; beside "
            "it a sign test over the pairs", "00c4540; sign test " + ISSUE52, BEFORE + " (margin); the sign test " + AFTER),
    Rule(4, "every STIR_adv below 0.15 (the original code's objective); changed after the data: a value above 0.15 from "
            "our 300-step search cannot contradict", "00c4540; cannot-contradict " + ISSUE52,
         BEFORE + "; the cannot-contradict clause " + AFTER,
         old="contradicted (rule as first written: every STIR_adv above 0.15, from 300 steps of the original objective)",
         can_contradict=False),
    Rule(5, "Spearman rho of agreement against STIR at least 0.5 over at least 3 directions", "00c4540", BEFORE),
    Rule(6, "eq.-8 Delta from x lower for the vanilla seed pair than for the AT seed pair in both directions: holds "
            "where every vanilla interval lies below every AT interval, contradicted where every one lies above",
         "issue 66", AFTER + " (section 3.3's statement; the Delta was in the store)",
         old="Spearman rho of difficulty against STIR over all 18 directions (now claim 23): not resolved"),
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
             "intervals); the premise of claims 12, 13, 20", ISSUE52, AFTER, premise=True,
         old="contradicted (read as a claim, not as the premise of claims 12, 13, 20)"),
    Rule(22, "AT it=10's PGD-l2 accuracy minus AT it=1's above 0 (two-proportion interval): section 4.1's premise, "
             "51.5% against 34.6% in the paper", "issue 66", AFTER + " (the accuracies were in zoo/models)", premise=True),
    Rule(23, "Spearman rho of the walk's difficulty against STIR at least 0.5 over all directions; not resolved where "
             "most directions sit at the walk's step limit (ties carry no order)", "00c4540; ties " + ISSUE52,
         BEFORE + "; the tie clause " + AFTER,
         old="does not hold (Spearman 0.20 over 18 directions, 15 of them tied at the step limit)"),
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


def word(number: int, verdict: Verdict, direction: Optional[Tuple[int, ...]] = None, premise_met: bool = True) -> str:
    """The scorecard's word for ``verdict`` of claim ``number``; ``direction`` = (independent units on
    the claim's side as points, units[, units on the other side as points]), where the claim has units
    (model pairs, seed positions); ``premise_met`` False: the premise row it rests on (``PREMISES``) failed."""
    if verdict.outcome == NOT_RUN:
        return NOT_MEASURED_W
    if verdict.outcome == NOT_TESTABLE:
        return NOT_TESTABLE_W
    if not premise_met:
        return PREMISE_W
    if verdict.outcome == HOLDS:
        return HOLDS_W
    if verdict.outcome != FAILS:
        raise ValueError(f"claim {number}: unknown verdict outcome {verdict.outcome!r}")
    rule = RULES.get(number)
    if rule is not None and rule.premise:  # a premise row: our models lack what the paper's had
        return PREMISE_W
    if verdict.reason.startswith("contradicted") and (rule is None or rule.can_contradict):
        return CONTRADICTED_W
    if direction is not None and direction[1] > 0:
        if direction[0] == direction[1]:
            return DIRECTION_W
        if len(direction) > 2 and direction[2] == direction[1]:
            return OPPOSITE_W
    return NOT_RESOLVED_W
