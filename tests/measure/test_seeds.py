"""Intervals over training seeds (stir.measure.seeds): random effects over seed pairs, differences of
two arms, and equivalence only at a stated margin."""
import math
import random

import pytest

from stir.measure.seeds import difference, seed_estimate, standard_error, welch


def test_one_seed_pair_has_no_interval_of_the_recipe():
    one = seed_estimate([0.4], [0.03])
    assert one.mean == 0.4 and math.isnan(one.low) and math.isnan(one.tau) and "not measured" in one.method
    assert math.isnan(difference(one, seed_estimate([0.6, 0.62], [0.03, 0.03]), margin=0.05).p_difference)


def test_between_seed_spread_widens_the_interval_beyond_the_image_level_one():
    agree = seed_estimate([0.40, 0.41, 0.40], [0.02] * 3)
    spread = seed_estimate([0.30, 0.50, 0.40], [0.02] * 3)
    assert agree.tau == 0.0 and spread.tau > 0.05
    assert spread.high - spread.low > 3 * (agree.high - agree.low)
    assert agree.low < 0.403 < agree.high and spread.mean == pytest.approx(0.40, abs=1e-9)


def test_the_interval_covers_the_recipe_mean_at_its_nominal_rate_with_three_pairs():
    rng = random.Random(0)
    covered, trials = 0, 2000
    for _ in range(trials):  # mu = 0.5, tau = 0.1 between seed pairs, image se 0.03 within
        values = [0.5 + rng.gauss(0, 0.1) + rng.gauss(0, 0.03) for _ in range(3)]
        est = seed_estimate(values, [0.03] * 3)
        covered += est.low <= 0.5 <= est.high
    assert covered / trials > 0.92  # nominal 0.95 (HKSJ with m = 3); a z interval over images alone: far below


def test_equivalence_needs_its_margin():
    # docs/results.md: the original code 0.104 (sd 0.024) against ours 0.118 (sd 0.009), four seeds each.
    d = welch(0.118, 0.009 / 2, 3, 0.104, 0.024 / 2, 3, margin=0.05)
    assert d.low < 0 < d.high and not d.different
    assert d.equivalent and d.p_equivalence < 0.05  # within 0.05 ...
    tight = welch(0.118, 0.009 / 2, 3, 0.104, 0.024 / 2, 3, margin=0.03)
    assert not tight.equivalent and tight.p_equivalence > 0.05  # ... but not shown within 0.03


def test_standard_error_inverts_a_normal_interval():
    assert standard_error(0.4 - 1.959964 * 0.02, 0.4 + 1.959964 * 0.02) == pytest.approx(0.02, rel=1e-5)
