"""The paper report's judging on synthetic evidence, without an evaluate.py run (the end-to-end run is
tests/experiments/test_paper.py): claims 4 and 8-12 on the readings they are asked for, Table 2's
robustness order, seed pairs pooled into one interval, the summary line, and the checks of
experiment.skip and experiment.methods.
"""
import math

import pytest

from stir.experiments.paper.judge import summary_line
from stir.experiments.paper.readings import over_seed_pairs
from stir.paper import CLAIMS, FAILS, HOLDS, NOT_RUN, NOT_TESTABLE, Interval, Verdict, claim
from stir.paper import verdicts as v

NAN = float("nan")


def test_claim_4_is_judged_on_the_objective_of_the_published_row_where_it_was_measured():
    from stir.experiments.paper.table1 import stir_adv_evidence

    low, nan = Interval(0.08, 0.05, 0.11), Interval(NAN, NAN, NAN)
    both = stir_adv_evidence({"constrained": {"STIR_adv(b|a)": nan}, "original": {"STIR_adv(b|a)": low}})
    assert claim(4).judge(both.evidence).outcome == HOLDS
    assert both.notes[0].startswith("judged on the original objective") and "constrained objective: not testable" in both.notes[1]
    alone = stir_adv_evidence({"constrained": {"STIR_adv(b|a)": nan}, "original": {}})
    assert claim(4).judge(alone.evidence).outcome == NOT_TESTABLE and alone.notes == ["judged on the constrained objective"]
    assert stir_adv_evidence({"constrained": {}}).evidence is None
    skipped = stir_adv_evidence({"constrained": {"STIR_adv(b|a)": nan}}, ["original"])
    assert skipped.notes[-1] == "the original objective: not measured in this report (part seeds_original left out)"


def test_an_unknown_part_to_skip_is_refused_with_the_parts():
    from stir.config.validate import ConfigError
    from stir.experiments.paper import _check
    from stir.experiments.paper.parts import PARTS
    from stir.experiments.paper_config import PaperConfig

    with pytest.raises(ConfigError, match=r"experiment.skip='tables' is not a valid choice; choose one of \['seeds'"):
        _check(PaperConfig(name="paper", kind="paper", skip=["tables"]))
    _check(PaperConfig(name="paper", kind="paper", skip=list(PARTS)))


def test_claim_12_pools_its_differences_over_the_training_seed_positions():
    """Seed position i is (at_i, trades_i, mart_i): each difference is taken within a position and
    pooled over the positions, so two positions that disagree widen the interval past either one's."""
    from stir.experiments.paper.methods import method_contrasts
    from stir.experiments.paper.parts import METHOD_PAIRS

    def position(at_trades, at_mart, trades_mart, half=0.01):
        return dict(zip(METHOD_PAIRS, (Interval(x, x - half, x + half) for x in (at_trades, at_mart, trades_mart))))

    one = [position(0.85, 0.94, 0.84)]
    values, diffs, held = method_contrasts(one, [("at", "trades", "mart")], 1.96, 0.95)
    mart = diffs["STIR(AT, TRADES) - STIR(AT, MART)"]
    assert math.isclose(mart.value, -0.09) and math.isclose(mart.high - mart.value, 0.01 * math.sqrt(2), rel_tol=1e-3)
    assert math.isclose(diffs["STIR(AT, TRADES) - STIR(TRADES, MART)"].value, 0.01)
    assert values[("at", "trades")] == one[0][("at", "trades")] and "one seed position" in held
    two = one + [position(0.95, 0.90, 0.80)]  # the second seed says the opposite of the first on AT / MART
    models = [("at", "trades", "mart"), ("at_s1", "trades_s1", "mart_s1")]
    values, diffs, held = method_contrasts(two, models, 1.96, 0.95)
    mart = diffs["STIR(AT, TRADES) - STIR(AT, MART)"]
    assert math.isclose(mart.value, -0.02, abs_tol=1e-9) and mart.low < -0.09 and mart.high > 0.05
    assert math.isclose(values[("at", "trades")].value, 0.90) and "2 seed positions" in held and "share no model" in held
    shared = method_contrasts(two, [("at", "trades", "mart"), ("at", "trades_s1", "mart_s1")], 1.96, 0.95)[2]
    assert "share models" in shared


def test_claim_11_pools_its_difference_over_the_architectures_training_seed_positions():
    """Position i replaces every architecture by its i-th later seed while all of them have one here;
    the difference is taken within a position and pooled over them, so positions that disagree widen
    the interval past either one's."""
    from stir.experiments.paper.architectures import architecture_contrast
    from stir.experiments.paper.parts import architecture_positions
    from stir.experiments.paper_config import PaperConfig

    cfg = PaperConfig(name="paper", kind="paper",
                      architectures={"vanilla": {"residual": ["r18", "r34"], "vgg": ["v16", "v19"]},
                                     "at": {"residual": ["r18_at", "r34_at"], "vgg": ["v16_at"]}},
                      architecture_seeds={"r18": ["r18_s1", "r18_s2"], "r34": ["r34_s1", "r34_s2"],
                                          "v16": ["v16_s1", "v16_s2"], "v19": ["v19_s1"], "r18_at": ["r18_at_s1"],
                                          "r50": ["r50_s1"]})  # a model the architectures do not name: unused
    here = {"r18", "r34", "v16", "v19", "r18_s1", "r34_s1", "v16_s1", "v19_s1", "r18_s2", "r34_s2", "v16_s2", "r18_at"}
    positions = architecture_positions(cfg, here.__contains__)
    assert positions == {"vanilla": [{"residual": ["r18", "r34"], "vgg": ["v16", "v19"]},
                                     {"residual": ["r18_s1", "r34_s1"], "vgg": ["v16_s1", "v19_s1"]}]}  # v19_s2: none
    # without v19 at all the family keeps its other VGG, and runs to the third position
    assert len(architecture_positions(cfg, (here - {"v19"}).__contains__)["vanilla"]) == 3

    def stir_of(values):  # STIR(b | a) = values[(a, b)] +- 0.01
        return lambda a, b: Interval(values[(a, b)], values[(a, b)] - 0.01, values[(a, b)] + 0.01)

    one = [{"residual": ["a", "b"], "vgg": ["c"]}]
    first = {("a", "b"): 0.6, ("b", "a"): 0.5, ("a", "c"): 0.3, ("c", "a"): 0.4, ("b", "c"): 0.2, ("c", "b"): 0.3}
    among, across, within, d = architecture_contrast(one, stir_of(first), 1.96, 0.95)
    assert math.isclose(among.value, 0.55) and math.isclose(across.value, 0.3) and d == within[0]
    assert math.isclose(d.value, 0.25) and math.isclose(d.high - d.value, math.hypot(0.01 / 2 ** 0.5, 0.01 / 2), rel_tol=1e-3)
    two = one + [{"residual": ["a1", "b1"], "vgg": ["c1"]}]
    second = {(f"{a}1", f"{b}1"): x for (a, b), x in first.items()}
    second.update({("a1", "c1"): 0.55, ("c1", "a1"): 0.55, ("b1", "c1"): 0.55, ("c1", "b1"): 0.55})  # this seed: no gap
    among, across, within, d = architecture_contrast(two, stir_of({**first, **second}), 1.96, 0.95)
    assert math.isclose(within[1].value, 0.0, abs_tol=1e-12) and math.isclose(d.value, 0.125)
    assert d.low < 0.0 < 0.25 < d.high  # the between-seed spread is in the interval


def test_the_methods_of_claim_12_name_as_many_training_seeds_each():
    from stir.config.validate import ConfigError
    from stir.experiments.paper import _check
    from stir.experiments.paper.parts import method_pairs
    from stir.experiments.paper_config import PaperConfig

    uneven = {"r18": {"at": ["at", "at_s1"], "trades": ["trades", "trades_s1"], "mart": ["mart"]}}
    with pytest.raises(ConfigError, match=r"experiment.methods.r18: .* as many of each .* got \{'at': 2, 'trades': 2, 'mart': 1\}"):
        _check(PaperConfig(name="paper", kind="paper", methods=uneven))
    even = PaperConfig(name="paper", kind="paper", methods={"r18": {**uneven["r18"], "mart": ["mart", "mart_s1"]}})
    _check(even)
    assert method_pairs(even) == [("at", "trades"), ("at", "mart"), ("trades", "mart"),
                                   ("at_s1", "trades_s1"), ("at_s1", "mart_s1"), ("trades_s1", "mart_s1")]


def test_claim_8_says_which_chain_is_left_out_or_cut_short():
    """The incremental part keeps each chain up to its first missing model (``parts``); claim 8 is then
    judged on what is left, and its notes name the family left out and where a chain was cut."""
    from types import SimpleNamespace as NS

    from stir.experiments.incremental import IncrementalConfig
    from stir.experiments.paper.figure1 import figure1
    from stir.experiments.paper_config import PaperConfig

    sizes = {f"v{n}": n for n in (5, 10, 15, 20)}
    ctx = NS(model=lambda name: NS(data=NS(train_size=sizes[name])))
    pctx = NS(pair=lambda m1, m2: {})  # no direction measured: the values are NaN
    ok = NS(missing={"v25", "a10", "m5", "m10"},
            why=lambda names: "; ".join(f"{n} is not trained or shipped (python train.py ...)" for n in names))
    cfg = PaperConfig(name="paper", kind="paper", chains={"vanilla": ["v5", "v10", "v15", "v20", "v25"],
                                                          "AT": ["a5", "a10", "a15"], "mart": ["m5", "m10"]})
    # a5 is here but alone (a chain of one has no link): the AT chain is left out at a10
    part = IncrementalConfig(name="incremental", kind="incremental", chains={"vanilla": ["v5", "v10", "v15", "v20"]})
    rows, evidence = figure1(ctx, cfg, ok, (part, pctx))
    assert [r["link"] for r in rows] == ["v5 -> v10", "v10 -> v15", "v15 -> v20"]
    assert evidence.notes == ["vanilla chain cut after v20 (4 of 5 models): v25 is not trained or shipped (python train.py ...)",
                              "AT chain left out: a10 is not trained or shipped (python train.py ...)",
                              "mart chain left out: m5 is not trained or shipped (python train.py ...)",
                              "judged on the raw STIR(m_t|m_t-1): the chance-corrected reading is not measured at every "
                              "link (results stored before it existed)",
                              "one training seed per size: each link's interval is over images and draws only (the "
                              "between-seed spread of a size is not measured)"]
    assert list(evidence.evidence.curves) == ["vanilla"]


def test_claim_8_is_judged_on_each_link_s_chance_corrected_stir_where_every_link_has_it():
    """Each m_t has its own floor (its X' statistics change with the training-set size): the curve the
    claim is judged on is the chance-corrected one, the raw STIR beside it in the table."""
    from types import SimpleNamespace as NS

    from stir.experiments.incremental import IncrementalConfig
    from stir.experiments.paper.figure1 import figure1
    from stir.experiments.paper_config import PaperConfig

    sizes = {f"v{n}": n for n in (5, 10, 15)}
    raw = {"v10": 0.40, "v15": 0.60}  # STIR(m_t|m_t-1), rising
    floors = {"v10": 0.30, "v15": 0.10}  # ... and its floor falling: the corrected rise is larger

    def direction(cur):
        s, f = raw[cur], floors[cur]
        kappa = (s - f) / (1 - f)  # ceiling 1, its floor 0: kappa(C, F_C) = 1
        cal = NS(floor=f, chance_corrected=kappa, chance_corrected_low=kappa - 0.05, chance_corrected_high=kappa + 0.05,
                 low=s - 0.05, high=s + 0.05)
        return NS(stir=NS(mean=s), calibration={"stir": cal})

    ctx = NS(model=lambda name: NS(name=name, data=NS(train_size=sizes[name])))
    pctx = NS(pair=lambda m1, m2: {"m2|m1": direction(m2.name), "m1|m2": None})
    cfg = PaperConfig(name="paper", kind="paper", chains={"vanilla": ["v5", "v10", "v15"]})
    part = IncrementalConfig(name="incremental", kind="incremental", chains={"vanilla": ["v5", "v10", "v15"]})
    rows, evidence = figure1(ctx, cfg, NS(missing=set()), (part, pctx))
    assert [r["STIR(m_t|m_t-1)"] for r in rows] == ["0.400 [0.350, 0.450]", "0.600 [0.550, 0.650]"]
    assert [r["floor"] for r in rows] == ["0.300", "0.100"]
    curve = evidence.evidence.curves["vanilla"]
    assert [n for n, _ in curve] == [10, 15]
    assert [round(i.value, 4) for _, i in curve] == [round(0.1 / 0.7, 4), round(0.5 / 0.9, 4)]
    assert evidence.notes[0] == ("judged on the chance-corrected STIR(m_t|m_t-1) (kappa(S, F) / kappa(C, F_C): each link "
                                 "read against its own floor); the raw values are beside them in the table")


def test_claim_10_on_cifar100_shaped_slopes():
    """Claim 10's code path with CIFAR-100 evidence (synthetic slopes; CIFAR-100 itself is not here)."""
    flat, falls = Interval(0.01, -0.02, 0.04), Interval(-0.3, -0.4, -0.2)
    both = v.SlopeEvidence({"resnet18 m2|m1": falls}, {"resnet18 m2|m1": flat})
    assert claim(10).judge(v.DatasetSlopeEvidence({"cifar10": both, "cifar100": both})).outcome == HOLDS
    missing = v.DatasetSlopeEvidence({"cifar10": both, "cifar100": None}, {"cifar100": "c100 is not trained or shipped"})
    assert claim(10).judge(missing).outcome == NOT_TESTABLE


def test_table2_takes_a_pair_as_evidence_only_where_m1_is_measurably_the_more_robust():
    """at (2 PGD steps) and at_it1 (1 step) of the laptop zoo: 0.442 and 0.433 PGD-l2 over 1000
    images each, a gap within noise, so that pair predicts no direction; at against vanilla does."""
    from types import SimpleNamespace as NS

    from stir.experiments.paper.table2 import NOT_EVIDENCE, robustness_gap, robustness_order

    def model(robust, size=1000):
        return NS(metrics={"test/robust_acc": robust} if robust is not None else {},
                  train=NS(trainer=NS(robust_test_size=size)) if size else None)

    close = robustness_gap(model(0.442), model(0.433), 1.96)
    assert close.low < 0 < close.high and math.isclose(close.high - close.value, 1.96 * math.sqrt(
        (0.442 * 0.558 + 0.433 * 0.567) / 1000))
    assert robustness_order(close) == ("not resolved: " + NOT_EVIDENCE, False)
    assert robustness_order(robustness_gap(model(0.442), model(0.05), 1.96)) == ("m1 more robust", True)
    assert robustness_order(robustness_gap(model(0.05), model(0.442), 1.96)) == ("m2 more robust: " + NOT_EVIDENCE, False)
    for unknown in (robustness_gap(model(None), model(0.05), 1.96), robustness_gap(model(0.4, size=0), model(0.05), 1.96)):
        assert not unknown.measured and robustness_order(unknown) == ("robust accuracy unknown: the configured order", True)


def test_one_seed_pair_keeps_its_own_interval_and_says_so():
    one, method, tau = over_seed_pairs([Interval(0.5, 0.4, 0.6)], 0.95)
    assert one == Interval(0.5, 0.4, 0.6) and "one seed pair: between-seed spread not measured" in method
    three, method, tau = over_seed_pairs([Interval(0.5, 0.45, 0.55), Interval(0.6, 0.55, 0.65), Interval(0.4, 0.35, 0.45)], 0.95)
    assert three.low < 0.45 and three.high > 0.55 and "3 seed pairs" in method and tau > 0
    assert "share models" in method and "they are not independent" in method  # no pairs given: read as sharing
    shared = over_seed_pairs([Interval(0.5, 0.45, 0.55)] * 3, 0.95, [("a", "b"), ("a", "c"), ("b", "c")])[1]
    disjoint = over_seed_pairs([Interval(0.5, 0.45, 0.55)] * 3, 0.95, [("at", "v"), ("at_s1", "v_s1"), ("at_s2", "v_s2")])[1]
    assert "share models" in shared and "share no model" in disjoint and "not independent" not in disjoint
    # a pair not measured does not count: the two measured ones share no model
    gap = over_seed_pairs([Interval(0.5, 0.45, 0.55), Interval(NAN, NAN, NAN), Interval(0.6, 0.55, 0.65)], 0.95,
                          [("a", "b"), ("a", "c"), ("c", "d")])[1]
    assert "share no model" in gap
    verdicts = {c.number: (Verdict(HOLDS if c.number < 3 else NOT_TESTABLE, "r"), []) for c in CLAIMS}
    n = len(CLAIMS)
    assert summary_line(verdicts) == f"2 of {n} claims hold, {n - 2} not testable here"
    verdicts[12] = (Verdict(NOT_RUN, "r"), [])
    assert summary_line(verdicts) == f"2 of {n} claims hold, {n - 3} not testable here, 1 not measured in this report"
    straddles = v.stir_high(v.PairEvidence(Interval(0.85, 0.75, 0.95), Interval(0.9, 0.85, 0.95)))
    wrong_side = v.stir_high(v.PairEvidence(Interval(0.5, 0.4, 0.6), Interval(0.9, 0.85, 0.95)))
    assert straddles.outcome == wrong_side.outcome == FAILS
    verdicts[3], verdicts[4] = (straddles, []), (wrong_side, [])
    assert summary_line(verdicts) == (f"2 of {n} claims hold, 2 do not (1 not resolved at this budget), {n - 5} not "
                                      "testable here, 1 not measured in this report")


def test_a_layer_wise_slope_is_fitted_to_the_reading_it_is_asked_for():
    """At saturated taps (S = C = 1, different floors) the normalised value swings with the two floors;
    the chance-corrected one is 1 there, so the slope of a flat-then-falling curve differs by reading.
    A tap without the reading (stored before it was measured) leaves the slope not measured."""
    from types import SimpleNamespace as NS

    from stir.experiments.paper.layers import normalised_slope
    from stir.measure.calibration import Calibration

    def cal(normalised, corrected):
        nan = float("nan")
        return Calibration(value=1.0, floor=0.2, floor_std=0.01, floor_images=0.2, floor_iris=0.2, ceiling=1.0,
                           ceiling_independent=nan, ceiling_same_draws=1.0, normalised=normalised, low=0.99, high=1.0,
                           normalised_low=normalised - 0.02, normalised_high=normalised + 0.02, confidence=0.95,
                           resamples=100, method="", chance_corrected=corrected, chance_corrected_low=corrected - 0.01,
                           chance_corrected_high=corrected + 0.01)

    def result(cals):
        rows = [NS(get=lambda d, c=c: NS(calibration={"stir": c}), similarity=NS(tap_ref=f"t{i}")) for i, c in enumerate(cals)]
        return NS(depths=[i / (len(cals) - 1) for i in range(len(cals))], rows=rows)

    curve = result([cal(1.16, 1.0), cal(1.04, 1.0), cal(0.86, 1.0), cal(0.95, 0.95)])
    normalised = normalised_slope(curve, "m2|m1", 1.96, 0.95)[0]
    corrected = normalised_slope(curve, "m2|m1", 1.96, 0.95, "chance_corrected")[0]
    assert normalised.value < -0.2 and -0.06 < corrected.value < 0  # the floors' swing against the one falling tap
    assert corrected.low < corrected.value < corrected.high
    stored = result([cal(1.0, float("nan")), cal(0.9, 0.9)])
    slope, why = normalised_slope(stored, "m2|m1", 1.96, 0.95, "chance_corrected")
    assert not slope.measured and "chance-corrected STIR undefined at t0" in why and "stored before" in why


def test_claim_9_reads_the_chance_corrected_slopes_only_where_every_one_is_measured():
    from stir.experiments.paper.layers import _slope_reading

    flat, falling, nan = Interval(0.0, -0.02, 0.02), Interval(-0.4, -0.5, -0.3), Interval(NAN, NAN, NAN)
    normalised = {"vanilla": {"resnet18 m2|m1": falling}, "at": {"resnet18 m2|m1": Interval(-0.12, -0.15, -0.09)}}
    corrected = {"vanilla": {"resnet18 m2|m1": falling}, "at": {"resnet18 m2|m1": flat}}
    chosen, note = _slope_reading(normalised, corrected)
    assert chosen is corrected and note.startswith("judged on the chance-corrected slopes")
    assert claim(9).judge(v.SlopeEvidence(chosen["vanilla"], chosen["at"])).outcome == HOLDS
    stored = {"vanilla": {"resnet18 m2|m1": falling}, "at": {"resnet18 m2|m1": nan}}
    chosen, note = _slope_reading(normalised, stored)
    assert chosen is normalised and "not measured at every tap" in note
    assert _slope_reading(normalised, {"vanilla": {}, "at": {}})[0] is normalised


def test_a_graded_position_cut_by_stored_only_is_not_measured():
    """experiment.stored_only cuts a graded_<i> matrix to its stored models (stir.experiments.paper.stored);
    a position that lost a model reads "not measured" (its cells are not stored), not a KeyError."""
    from types import SimpleNamespace

    from stir.experiments.matrix import MatrixConfig
    from stir.experiments.paper.table2 import graded_from_parts

    ctx = SimpleNamespace(estimator=SimpleNamespace(calibration=SimpleNamespace(confidence=0.95)))
    cfg = SimpleNamespace(graded_robustness=[["vanilla", "at_e025", "at"]])
    cut = MatrixConfig(name="graded_0", kind="matrix", models=["at", "vanilla"])  # at_e025's cells not stored
    ok = SimpleNamespace(all=lambda names: True, why=lambda names: "")
    rows, verdict, why = graded_from_parts(ctx, cfg, {"graded_0": (cut, None)}, ok)
    assert (rows, verdict) == ([], None) and "not in the results store" in why
