"""The recipe ablation's table (stir.experiments.paper.ablation): arms read against the baseline
over their seed pairs, a resolved move, an equivalence at the margin, and no test with one pair."""
import math

import pytest

from stir.experiments.paper import ablation as ab
from stir.paper import Interval

CONF = 0.95


def _pairs(values, half_width=0.02):
    return [Interval(v, v - half_width, v + half_width) for v in values]


def _arm(values):
    s = _pairs(values)
    return {"STIR(m1|m2)": s, "STIR(m2|m1)": s, "CKA": [Interval(0.9, 0.9, 0.9)] * len(values),
            "STIR, mean of directions": [ab.mean_of_directions(a, b, CONF) for a, b in zip(s, s)]}


def _row(rows, arm, quantity="STIR(m1|m2)"):
    return next(r for r in rows if r["arm"] == arm and r["quantity"] == quantity)


def test_an_arm_far_from_the_baseline_moves_it_and_one_at_it_is_equivalent():
    rows = ab.rows({"base": _arm([0.49, 0.50, 0.51]), "far": _arm([0.69, 0.70, 0.71]),
                    "same": _arm([0.495, 0.50, 0.505])}, margin=0.05, confidence=CONF)
    assert _row(rows, "base")["reading"] == "baseline"
    far = _row(rows, "far")
    assert far["reading"] == "moves it" and far["minus baseline"].startswith("+0.200")
    assert float(far["p (difference)"]) < 0.05
    same = _row(rows, "same")
    assert same["reading"] == "equivalent within +-0.05" and float(same["TOST p (margin 0.05)"]) < 0.05
    assert len(rows) == 3 * len(ab.QUANTITIES)


def test_a_wide_between_seed_spread_leaves_the_difference_unresolved():
    """Three seed pairs that scatter by 0.2 cannot tell 0.08 apart, nor call it equivalent."""
    rows = ab.rows({"base": _arm([0.30, 0.50, 0.70]), "other": _arm([0.38, 0.58, 0.78])}, margin=0.05, confidence=CONF)
    other = _row(rows, "other")
    assert other["reading"].startswith("not resolved")
    assert float(other["between-pair sd (tau)"]) > 0.15


def test_one_seed_pair_in_an_arm_is_no_test():
    rows = ab.rows({"base": _arm([0.49, 0.50, 0.51]), "one": _arm([0.70])}, margin=0.05, confidence=CONF)
    one = _row(rows, "one")
    assert one["reading"].startswith("no test") and one["ours"].endswith("(one seed pair)")
    assert one["p (difference)"] == "-"


def test_an_unmeasured_pair_is_left_out_and_the_mean_of_directions_needs_both():
    nan = Interval(math.nan, math.nan, math.nan)
    assert not ab.mean_of_directions(Interval(0.5, 0.48, 0.52), nan, CONF).measured
    m = ab.mean_of_directions(Interval(0.4, 0.38, 0.42), Interval(0.6, 0.58, 0.62), CONF)
    assert m.value == pytest.approx(0.5) and (m.high - m.low) == pytest.approx(0.04 / math.sqrt(2))
    est = ab.arm_estimate([nan, *_pairs([0.5, 0.52])], CONF)
    assert est.pairs == 2
    assert ab.arm_estimate([nan], CONF) is None
    assert ab.rows({}, 0.05, CONF) == []


def test_the_absent_row_has_the_table_s_columns():
    full = ab.rows({"base": _arm([0.49, 0.50, 0.51])}, margin=0.05, confidence=CONF)[0]
    assert set(ab.absent_row("arm", "a lever", "vanilla_ls0 is not trained", 0.05)) == set(full)
