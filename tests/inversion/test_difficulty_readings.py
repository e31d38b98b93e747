"""Controversial-stimulus difficulty as a censored measurement (stir.inversion.controversial): the walk
reading separates pairs that the perturbation reading confuses, the perturbation reading is withheld
where an image was censored, ties at the budget count as reached, and every value has an interval."""
import math

import pytest
import torch

from stir.inversion.controversial import ControversialResult, censored_difficulty, pooled_censored

INF = math.inf


def walk(distance, first_step, walked, steps=20, step_size=1.0) -> ControversialResult:
    distance, first_step, walked = (torch.tensor(v, dtype=torch.float64) for v in (distance, first_step, walked))
    reached = torch.isfinite(distance)
    return ControversialResult(distance=distance, reached=reached, fraction=float(reached.double().mean()),
                               delta=float(distance[reached].mean()) if reached.any() else math.nan,
                               max_r2=torch.zeros_like(distance), walked=walked, first_step=first_step,
                               steps=steps, step_size=step_size)


def test_the_walk_reading_separates_what_the_perturbation_reading_confuses():
    # Pair A: every image becomes controversial at a displacement of about 2 (2 steps of 1).
    a = walk([2.0] * 10, [2.0] * 10, [2.0] * 10)
    # Pair B: half the images get there at the same place, half never do, and their walks stay near x
    # (displacement about 2.1: the censoring is informative: it depends on the pair).
    b = walk([2.0] * 5 + [INF] * 5, [2.0] * 5 + [INF] * 5, [2.0] * 5 + [2.1] * 5)
    raw_a, raw_b = censored_difficulty(a.distance, a.walked), censored_difficulty(b.distance, b.walked)
    assert raw_b["median"] == pytest.approx(raw_a["median"], abs=0.11)  # the perturbation reading: alike
    ra, rb = pooled_censored([a], resamples=200)["walk"], pooled_censored([b], resamples=200)["walk"]
    assert ra["restricted_mean"] == pytest.approx(2.0) and rb["restricted_mean"] == pytest.approx(11.0)
    assert rb["restricted_mean_low"] > ra["restricted_mean_high"]  # the walk reading: clearly apart
    assert pooled_censored([b], resamples=0)["perturbation"]["withheld"] == 1.0
    assert math.isnan(pooled_censored([b], resamples=0)["perturbation"]["median"])
    full = pooled_censored([a], resamples=0)["perturbation"]
    assert full["withheld"] == 0.0 and full["median"] == pytest.approx(2.0)


def test_an_image_reached_at_the_last_step_counts_as_reached():
    # 2 of 4 images reached, one of them exactly at the budget, tied with the two censored ones.
    km = censored_difficulty(torch.tensor([5.0, 20.0, INF, INF]), torch.full((4,), 20.0))
    assert km["fraction"] == 0.5
    assert km["median"] == 20.0 and km["median_censored"] == 0.0  # S falls to 1/2 at 20, before the censorings
    shuffled = censored_difficulty(torch.tensor([INF, 20.0, INF, 5.0]), torch.full((4,), 20.0))
    assert shuffled == km  # the order of the images does not matter


def test_the_interval_holds_the_value_and_narrows_with_more_images():
    g = torch.Generator().manual_seed(0)
    def sample(n):
        d = torch.rand(n, generator=g, dtype=torch.float64) * 30
        return torch.where(d < 20, d, torch.full_like(d, INF)), torch.full((n,), 20.0)
    small, large = censored_difficulty(*sample(40), resamples=400), censored_difficulty(*sample(1000), resamples=400)
    for km in (small, large):
        assert km["median_low"] <= km["median"] <= km["median_high"]
        assert km["restricted_mean_low"] <= km["restricted_mean"] <= km["restricted_mean_high"]
    width = lambda km: km["restricted_mean_high"] - km["restricted_mean_low"]  # noqa: E731
    assert width(small) > 3 * width(large)
    assert math.isnan(censored_difficulty(*sample(10))["median_low"])  # no resamples: no interval
