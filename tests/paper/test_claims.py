"""The paper's claims (stir.paper): the data as published, and every verdict's outcomes on constructed values."""
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from stir.paper import CLAIMS, FAILS, HOLDS, NOT_TESTABLE, Interval, claim
from stir.paper import published as pub
from stir.paper import verdicts as v
from stir.paper.claims import FIGURE, TEXT

NAN = float("nan")


def iv(value, half=0.02):
    return Interval(value, value - half, value + half)


def test_every_claim_numbered_with_its_quote_sources_and_verdict():
    assert [c.number for c in CLAIMS] == list(range(1, 24))
    assert len({c.key for c in CLAIMS}) == len(CLAIMS)
    for c in CLAIMS:
        assert c.statement and c.where and c.needs and callable(c.verdict)
        assert c.quote in pub.QUOTES and c.quoted.startswith('"'), c.key  # the paper's words, with their place
        assert all(p.value is None or p.source for p in c.published), c.key  # every number says where it was read
        # None only for a figure, or a statement the text makes in words (claims 14, 15, 21, 23)
        assert all(p.value is not None or p.source in (FIGURE, TEXT) for p in c.published), c.key


def test_every_quote_is_the_paper_s_own_words():
    """Each quoted passage (its pieces between '[...]') occurs in the paper's text, whitespace and the
    notation of models aside: the claims cannot paraphrase and call it a quote."""
    import re
    from pathlib import Path

    text = Path(__file__).resolve().parents[2].joinpath("..", "shared", "paper", "nanda2022-stir.txt")
    if not text.is_file():
        pytest.skip("the paper's text is not beside this checkout")
    paper = " ".join(re.findall(r"[A-Za-z]{4,}", re.sub(r"\$[^$]*\$", " ", text.read_text())))  # math left out
    for key, q in pub.QUOTES.items():
        for piece in re.split(r"\[\.\.\.\]|; ", q.text):
            words = re.findall(r"[A-Za-z]{4,}", re.sub(r"\$[^$]*\$|\S*(?:\bm\d|\bm_|STIR\(|X'|\|)\S*", " ", piece))  # our notation left out
            assert len(words) >= 4 and " ".join(words[:8]) in paper, (key, piece)


def test_table_1_as_published():
    table = {(p.quantity, p.pair): p.value for n in (1, 2, 3) for p in claim(n).published}
    assert table[("STIR(m1|m2)", "AT / vanilla")] == 0.405 and table[("STIR(m2|m1)", "AT / vanilla")] == 0.509
    assert table[("CKA", "AT / vanilla")] == 0.536
    assert (table[("STIR(m1|m2)", "AT / AT seed")], table[("STIR(m2|m1)", "AT / AT seed")]) == (0.934, 0.939)
    assert table[("CKA", "AT / AT seed")] == 0.937
    assert (table[("STIR(m1|m2)", "vanilla / vanilla seed")], table[("STIR(m2|m1)", "vanilla / vanilla seed")]) == (0.605, 0.562)
    assert table[("CKA", "vanilla / vanilla seed")] == 0.967
    protocol = claim(1).protocol
    # the paper states n and runs for Table 1; width and epochs it does not (100 epochs is section 4.2's)
    assert (protocol.n, protocol.runs, protocol.architectures, protocol.width, protocol.epochs) == (1000, 5, ("resnet18",), None, None)
    adv = {(p.pair, p.quantity): (p.value, p.spread) for p in claim(4).published}
    assert adv[("vanilla / vanilla seed", "STIR_adv(m1|m2)")] == (0.085, 0.004)
    assert adv[("AT / vanilla", "STIR_adv(m2|m1)")] == (0.070, 0.004) and len(adv) == 6
    agreement = {(p.pair, p.quantity): p.value for p in claim(5).published}
    assert agreement[("AT / vanilla", "agreement(m1|m2)")] == 0.140 and agreement[("AT / AT seed", "agreement(m2|m1)")] == 0.901
    delta = [p.value for p in claim(6).published]
    assert delta == [8.588, 8.570, 17.106, 16.210, 19.270, 7.368]


def test_table_2_every_cell_and_accuracy():
    assert pub.number("Table 2", "STIR", "STIR(AT it=1|Vanilla)").value == 0.34
    assert pub.number("Table 2", "STIR", "STIR(AT it=1|Vanilla)").spread == 0.05
    assert pub.number("Table 2", "CKA", "CKA(AT it=1, Vanilla)").value == 0.64
    assert pub.number("Table 2", "robust accuracy %", "AT it=10").value == 51.5
    assert pub.number("Table 2", "clean accuracy %", "AT it=1").value == 87.2
    assert len([n for n in pub.NUMBERS if n.table == "Table 2"]) == 12 + 6
    diffs = {p.pair: p.value for p in claim(7).published}
    assert diffs == {"at_it10 / at_it1": 0.07, "at_it10 / vanilla": 0.1, "at_it1 / vanilla": 0.18}
    # Tables 1-3: 21 (STIR, STIR_adv, agreement 6 each; CKA 3) + 18 + 6 (Delta) printed numbers, each once
    assert len(pub.NUMBERS) == len({(n.table, n.row, n.column) for n in pub.NUMBERS}) == 45


def test_both_readings_of_beta_are_quoted():
    assert "0.1" in pub.BETA["section 5.3"] and "1.0" in pub.BETA["Appendix B"] and pub.BETA["defaults"]


def test_no_claim_says_the_sources_lack_a_number():
    import importlib
    import inspect
    import pkgutil

    from stir.experiments import paper as paper_kind
    from stir.paper import claims as claims_module

    kind_modules = [importlib.import_module(f"{paper_kind.__name__}.{m.name}") for m in pkgutil.iter_modules(paper_kind.__path__)]
    for module in (claims_module, paper_kind, *kind_modules):
        source = inspect.getsource(module)
        assert "not in the sources" not in source and "first page" not in source, module


def test_a_claim_without_evidence_is_not_testable_with_its_reason():
    assert claim(10).judge().outcome == NOT_TESTABLE and "CIFAR-100 is not available" in claim(10).judge().reason
    verdict = claim(7).judge(missing="the relative_robustness preset was not run")
    assert verdict.outcome == NOT_TESTABLE and verdict.reason == "the relative_robustness preset was not run"
    assert "experiment=seeds" in claim(1).judge().reason
    with pytest.raises(KeyError, match="no paper claim 24"):
        claim(24)


def test_interval_rejects_a_value_outside_it():
    with pytest.raises(ValueError, match="does not hold its value"):
        Interval(0.5, 0.6, 0.7)
    assert not Interval(NAN, NAN, NAN).measured


@pytest.mark.parametrize("gaps, outcome, words", [
    ((iv(0.36), iv(0.41)), HOLDS, "CKA - STIR above 0.1"),
    ((iv(0.36), iv(0.05)), FAILS, "contradicted"),
    ((iv(0.36), Interval(0.12, 0.05, 0.2)), FAILS, "not resolved"),
    ((iv(0.36), Interval(NAN, NAN, NAN)), NOT_TESTABLE, "not measured: CKA - STIR(m2|m1)"),
])
def test_claim_1_stir_well_below_cka(gaps, outcome, words):
    verdict = claim(1).judge(v.GapEvidence(*gaps))
    assert verdict.outcome == outcome and words in verdict.reason
    assert "CKA - STIR(m1|m2)" in verdict.numbers


@pytest.mark.parametrize("pair, outcome", [
    ((iv(0.93), iv(0.94)), HOLDS), ((iv(0.93), iv(0.5)), FAILS), ((iv(0.93), Interval(0.8, 0.7, 0.9)), FAILS),
    ((iv(0.93), Interval(NAN, NAN, NAN)), NOT_TESTABLE),
])
def test_claim_2_at_seeds_stir_high(pair, outcome):
    assert claim(2).judge(v.PairEvidence(*pair)).outcome == outcome


@pytest.mark.parametrize("difference, outcome, words", [
    (Interval(0.104, 0.05, 0.16), HOLDS, "above 0"),  # STIR(vanilla|AT) - STIR(AT|vanilla): the paper's 0.509 - 0.405
    (Interval(-0.1, -0.15, -0.05), FAILS, "contradicted"),
    (Interval(0.02, -0.03, 0.07), FAILS, "not resolved"),  # the interval includes 0
])
def test_claim_3_directional_holds_when_the_difference_s_interval_excludes_0(difference, outcome, words):
    verdict = claim(3).judge(v.DirectionEvidence({"at / vanilla": difference}))
    assert verdict.outcome == outcome and words in verdict.reason
    assert verdict.numbers == {"STIR(m2|m1) - STIR(m1|m2) for at / vanilla": str(difference)}


def test_claim_7_needs_every_ordered_pair():
    good, unresolved = Interval(0.1, 0.05, 0.15), Interval(0.01, -0.02, 0.04)
    assert claim(7).judge(v.DirectionEvidence({"at / vanilla": good, "at / at_it1": good})).outcome == HOLDS
    verdict = claim(7).judge(v.DirectionEvidence({"at / vanilla": good, "at / at_it1": unresolved}))
    assert verdict.outcome == FAILS and "at / at_it1" in verdict.reason
    assert claim(7).judge(v.DirectionEvidence({})).outcome == NOT_TESTABLE


@pytest.mark.parametrize("values, outcome", [
    ({"a": iv(0.07), "b": iv(0.09)}, HOLDS), ({"a": iv(0.07), "b": iv(0.6)}, FAILS),
    ({"a": iv(0.07), "b": Interval(NAN, NAN, NAN)}, NOT_TESTABLE), ({}, NOT_TESTABLE),
])
def test_claim_4_stir_adv_near_zero(values, outcome):
    assert claim(4).judge(v.AdversarialEvidence(values)).outcome == outcome


@pytest.mark.parametrize("number", [5, 23])
def test_claims_5_23_tracking(number):
    stir = {"a": iv(0.4), "b": iv(0.6), "c": iv(0.9)}
    rising = {"a": iv(0.2), "b": iv(0.5), "c": iv(0.8)}
    verdict = claim(number).judge(v.TrackingEvidence(stir, rising))
    assert verdict.outcome == HOLDS and verdict.numbers["spearman_rho"] == pytest.approx(1.0)
    falling = {"a": iv(0.8), "b": iv(0.5), "c": iv(0.2)}
    assert claim(number).judge(v.TrackingEvidence(stir, falling)).outcome == FAILS
    constant = {k: iv(0.5) for k in stir}
    assert claim(number).judge(v.TrackingEvidence(stir, constant)).outcome == FAILS
    two = claim(number).judge(v.TrackingEvidence({"a": iv(0.4), "b": iv(0.6)}, rising))
    assert two.outcome == NOT_TESTABLE and "needs 3" in two.reason


def test_claim_6_vanilla_pair_easier_than_the_at_pair_on_delta():
    """Section 3.3: eq.-8 Delta of the vanilla seed pair below the AT seed pair's, both directions, disjoint."""
    judge = lambda van, at: claim(6).judge(v.DeltaEvidence(van, at))  # noqa: E731
    low, high = {"a|b": iv(19.1, 0.6), "b|a": iv(18.2, 1.3)}, {"c|d": iv(22.1, 0.6), "d|c": iv(22.9, 0.5)}
    assert judge(low, high).outcome == HOLDS
    assert judge(high, low).reason.startswith("contradicted")
    assert judge(low, {"c|d": iv(19.5, 0.6), "d|c": iv(22.9, 0.5)}).reason.startswith("not resolved")
    assert judge({}, high).outcome == NOT_TESTABLE


def test_spearman_with_ties():
    assert v.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert v.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert v.spearman([1, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486832980505138)
    assert math.isnan(v.spearman([1, 1, 1], [1, 2, 3]))


def curve(values, half=0.02):
    return [(5000 * (i + 1), iv(x, half)) for i, x in enumerate(values)]


@pytest.mark.parametrize("curves, outcome, words", [
    ({"vanilla": curve([0.3, 0.5, 0.6, 0.65, 0.66, 0.66]), "at": curve([0.6, 0.8, 0.85, 0.86, 0.86, 0.87])}, HOLDS,
     "rises and plateaus"),
    ({"vanilla": curve([0.3, 0.4, 0.5, 0.6, 0.7, 0.8])}, FAILS, "contradicted: vanilla: still rising"),
    ({"vanilla": curve([0.8, 0.7, 0.6, 0.5, 0.4, 0.3])}, FAILS, "contradicted: vanilla: falls"),
    ({"vanilla": curve([0.5, 0.5, 0.51, 0.5, 0.5, 0.5])}, FAILS, "not resolved at this budget: vanilla: the rise"),
    # rises, and the last third's rise (0.020 [-0.080, 0.120]) straddles the plateau bound (0.090)
    ({"vanilla": curve([0.3, 0.5, 0.6, 0.64, 0.70, 0.66, 0.72])}, FAILS, "its plateau is not resolved"),
    # one family contradicted, the other not resolved: contradicted, both said
    ({"vanilla": curve([0.5, 0.5, 0.51, 0.5, 0.5, 0.5]), "at": curve([0.8, 0.7, 0.6, 0.5, 0.4, 0.3])}, FAILS,
     "contradicted: at: falls"),
    ({"vanilla": curve([0.3, 0.5, 0.6])}, NOT_TESTABLE, "need 4"),
    ({}, NOT_TESTABLE, "no incremental"),
])
def test_claim_8_rises_and_plateaus(curves, outcome, words):
    verdict = claim(8).judge(v.CurveEvidence(curves))
    assert verdict.outcome == outcome and words in verdict.reason


def test_claim_8_reads_the_rise_off_the_whole_curve_not_two_points():
    """One training seed per size: the links scatter by more than their intervals (over images and
    draws). A last point that happens to lie above the first point's interval is no rise when the
    curve as a whole has none: the trend's interval holds the points' spread about the line."""
    noisy = curve([0.49, 0.32, 0.59, 0.52, 0.42, 0.61, 0.43, 0.70], half=0.09)
    assert noisy[-1][1].above(noisy[0][1].high)  # what an endpoint reading would call a rise
    verdict = claim(8).judge(v.CurveEvidence({"vanilla": noisy}))
    assert verdict.outcome == FAILS and verdict.reason.startswith(v.NOT_RESOLVED)
    rise = v.trend(noisy)
    assert rise.low < 0 < rise.high and rise.value > 0


def test_the_trend_is_the_theil_sen_rise_with_sen_s_interval():
    points = curve([0.6, 0.8, 0.85, 0.86, 0.86, 0.87])  # rises, then saturates: the claim's shape
    rise = v.trend(points)
    fit = scipy_stats.theilslopes([0.6, 0.8, 0.85, 0.86, 0.86, 0.87], np.linspace(0, 1, 6), alpha=0.95)
    assert (rise.value, rise.low, rise.high) == pytest.approx((fit.slope, fit.low_slope, fit.high_slope))
    assert rise.above(0.0)  # a straight line's least squares would not resolve it (lack of fit)
    assert v.trend(curve([0.3, 0.4, 0.5, 0.6])).value == pytest.approx(0.3)  # from the first size to the last
    # uneven sizes: u is the position between the first and last size
    uneven = [(5000, iv(0.2)), (10000, iv(0.3)), (45000, iv(0.7))]
    assert v.trend(uneven).value == pytest.approx(np.median([0.1 / 0.125, 0.4 / 0.875, 0.5 / 1.0]))
    assert math.isnan(v.trend(curve([0.3, 0.4])).value)


@pytest.mark.parametrize("vanilla, at, outcome, words", [
    ({"resnet18": iv(-0.3)}, {"resnet18": iv(0.0)}, HOLDS, "vanilla slopes negative"),
    ({"resnet18": iv(-0.3)}, {"resnet18": iv(-0.3)}, FAILS, "contradicted"),
    ({"resnet18": iv(0.2)}, {"resnet18": iv(0.0)}, FAILS, "contradicted"),
    ({"resnet18": Interval(-0.05, -0.1, 0.01)}, {"resnet18": iv(0.0)}, FAILS, "not resolved"),
    ({"resnet18": iv(-0.3)}, {}, NOT_TESTABLE, "no AT layer-wise slope"),
])
def test_claim_9_layerwise_slopes(vanilla, at, outcome, words):
    verdict = claim(9).judge(v.SlopeEvidence(vanilla, at))
    assert verdict.outcome == outcome and words in verdict.reason


def test_claim_10_across_datasets():
    good = v.SlopeEvidence({"resnet18": iv(-0.3)}, {"resnet18": iv(0.0)})
    bad = v.SlopeEvidence({"resnet18": iv(0.3)}, {"resnet18": iv(0.0)})
    assert claim(10).judge(v.DatasetSlopeEvidence({"cifar10": good, "cifar100": good})).outcome == HOLDS
    verdict = claim(10).judge(v.DatasetSlopeEvidence({"cifar10": good, "cifar100": bad}))
    assert verdict.outcome == FAILS and verdict.reason.startswith("cifar100:")
    absent = claim(10).judge(v.DatasetSlopeEvidence({"cifar10": good, "cifar100": None},
                                                    {"cifar100": "CIFAR-100 is not available on this machine"}))
    assert absent.outcome == NOT_TESTABLE and "cifar100: CIFAR-100 is not available" in absent.reason
    assert claim(10).judge(v.DatasetSlopeEvidence({"cifar10": good})).outcome == NOT_TESTABLE


@pytest.mark.parametrize("number", [11, 12])
def test_claims_11_12_one_group_shares_more(number):
    assert claim(number).judge(v.ContrastEvidence({"A - B": iv(0.1), "A - C": iv(0.2)})).outcome == HOLDS
    verdict = claim(number).judge(v.ContrastEvidence({"A - B": iv(0.1), "A - C": Interval(0.0, -0.05, 0.05)}))
    assert verdict.outcome == FAILS and "not resolved" in verdict.reason and "A - C" in verdict.reason
    assert claim(number).judge(v.ContrastEvidence({"A - B": iv(-0.1)})).outcome == FAILS
    assert claim(number).judge(v.ContrastEvidence({})).outcome == NOT_TESTABLE
    assert claim(number).judge(v.ContrastEvidence({"A - B": Interval(NAN, NAN, NAN)})).outcome == NOT_TESTABLE


@pytest.mark.parametrize("number", [11, 12])
def test_claims_11_12_one_training_seed_decides_nothing(number):
    """A comparison of model families over one training seed per model is never held or contradicted
    (its interval does not hold the between-seed spread); a difference over several seeds still is."""
    one = claim(number).judge(v.ContrastEvidence({"A - B": iv(0.3)}, seed_positions={"A - B": 1}))
    assert one.outcome == FAILS and "not resolved" in one.reason and "one training seed" in one.reason
    wrong_side = claim(number).judge(v.ContrastEvidence({"A - B": iv(-0.3)}, seed_positions={"A - B": 1}))
    assert wrong_side.outcome == FAILS and "contradicted" not in wrong_side.reason
    both = v.ContrastEvidence({"A - B": iv(0.3), "C - D": iv(-0.2)}, seed_positions={"A - B": 1, "C - D": 3})
    assert "contradicted" in claim(number).judge(both).reason and "C - D" in claim(number).judge(both).reason
    several = v.ContrastEvidence({"A - B": iv(0.3), "C - D": iv(0.2)}, seed_positions={"A - B": 1, "C - D": 3})
    verdict = claim(number).judge(several)
    assert verdict.outcome == FAILS and "A - B" in verdict.reason and "C - D 0.200" in verdict.reason
    assert claim(number).judge(v.ContrastEvidence({"A - B": iv(0.3)}, seed_positions={"A - B": 2})).outcome == HOLDS
