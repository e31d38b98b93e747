"""Layer-wise STIR: taps paired by relative depth, slopes over depth, registered networks' taps."""
import math

import pytest
import torch
from torch import nn

from stir.config.schema import ModelConfig
from stir.inversion import ExecutionConfig, InversionConfig
from stir.measure import CalibrationConfig, Estimator, evaluate_direction, evaluate_layers, fit_slope, slope_reason
from stir.models import build, channel_stats
from stir.models.depth import corresponding_taps, depth_taps, layer_pairs

FAST = Estimator(k=1, iri="arbitrary", inversion=InversionConfig(mode="fast", steps=20, lr=0.05, seed=0),
                 calibration=CalibrationConfig(permutations=2, resamples=20))
QUIET = ExecutionConfig(warn_below=0.0)


def test_equal_lists_pair_one_to_one():
    assert corresponding_taps(["a", "b", "c"], ["x", "y", "z"]) == [("a", "x", 0.0), ("b", "y", 0.5), ("c", "z", 1.0)]


def test_three_against_five_taps_pair_by_relative_depth_either_way():
    short, long = ["a0", "a1", "a2"], ["b0", "b1", "b2", "b3", "b4"]
    assert corresponding_taps(short, long) == [("a0", "b0", 0.0), ("a1", "b2", 0.5), ("a2", "b4", 1.0)]
    # The shorter list drives; tap1 still comes from the first argument.
    assert corresponding_taps(long, short) == [("b0", "a0", 0.0), ("b2", "a1", 0.5), ("b4", "a2", 1.0)]


def test_ties_take_the_shallower_tap_and_a_single_tap_is_the_output_end():
    # 0.5 is equally far from 1/3 and 2/3.
    assert corresponding_taps(["a", "b", "c"], ["w", "x", "y", "z"])[1] == ("b", "x", 0.5)
    assert corresponding_taps(["only"], ["x", "y", "z"]) == [("only", "z", 1.0)]
    with pytest.raises(ValueError, match="non-empty"):
        corresponding_taps([], ["x"])


def test_slope_of_exact_linear_data_and_undefined_slopes():
    slope, intercept = fit_slope([0.0, 0.25, 0.5, 1.0], [1.0, 1.5, 2.0, 3.0])
    assert slope == pytest.approx(2.0, abs=1e-12) and intercept == pytest.approx(1.0, abs=1e-12)
    # NaN values are dropped, not propagated.
    assert fit_slope([0.0, 0.5, 1.0], [1.0, math.nan, -1.0]) == pytest.approx((-2.0, 1.0))
    assert slope_reason([0.0, 0.5, 1.0], [1.0, math.nan, -1.0]) is None
    for depths, values in (([0.5], [1.0]), ([0.0, 1.0], [math.nan, 2.0]), ([0.5, 0.5], [1.0, 2.0])):
        assert all(math.isnan(v) for v in fit_slope(depths, values))
        assert slope_reason(depths, values)


def test_depth_taps_of_registered_and_plain_networks():
    net = build(ModelConfig("resnet18", width=4), 10, *channel_stats("cifar10"))
    taps = depth_taps(net)
    assert taps == [t.name for t in net.taps if t.name != "logits"] and taps[-1] == "penultimate" and taps[0] == "stem"
    seq = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Sequential(nn.ReLU(), nn.Flatten()), nn.LazyLinear(2))
    assert depth_taps(seq) == ["0", "1.0", "1.1", "2"]  # leaves in order; containers are not layers


def test_explicit_tap_lists():
    seq = nn.Sequential(nn.Flatten(), nn.Linear(192, 8), nn.ReLU(), nn.Linear(8, 4))
    assert layer_pairs(seq, seq, ["1", ("3", "1"), "logits"]) == [("1", "1", 1 / 3), ("3", "1", 1.0), ("logits", "logits", 1.0)]
    with pytest.raises(ValueError, match="taps must be"):
        layer_pairs(seq, seq, "penultimate")


def test_registered_network_default_tap_is_penultimate():
    torch.manual_seed(0)
    a = build(ModelConfig("resnet18", width=4), 10, *channel_stats("cifar10"))
    b = build(ModelConfig("resnet18", width=4), 10, *channel_stats("cifar10"))
    images = torch.rand(6, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    r = evaluate_direction(a, b, images, estimator=Estimator(k=1, iri="arbitrary", inversion=InversionConfig(steps=3)), run=QUIET)
    assert (r.tap_ref, r.tap_target) == ("penultimate", "penultimate") and math.isfinite(r.stir.mean)
    assert a.training and b.training  # modes restored after the evaluation


def test_evaluate_layers_rows_depths_and_slopes():
    torch.manual_seed(0)
    deep = nn.Sequential(nn.Flatten(), nn.Linear(48, 16), nn.Tanh(), nn.Linear(16, 8), nn.Tanh())  # 5 depth taps
    shallow = nn.Sequential(nn.Flatten(), nn.Linear(48, 8), nn.Tanh())  # 3 depth taps
    images = torch.rand(8, 3, 4, 4, generator=torch.Generator().manual_seed(2))
    r = evaluate_layers(deep, shallow, images, FAST, run=QUIET)
    assert [(row.similarity.tap_ref, row.similarity.tap_target) for row in r.rows] == [("0", "0"), ("2", "1"), ("4", "2")]
    assert r.depths == [0.0, 0.5, 1.0]
    # Tap "0" of both is the flattened image: an injective reference, STIR ~ 1 both ways.
    assert r.rows[0].stat("m2|m1", "stir").mean > 0.95 and r.rows[0].stat("m1|m2", "stir").mean > 0.95
    assert math.isfinite(r.slope("m2|m1")) and math.isfinite(r.slope("m1|m2"))
    # Arbitrary IRIs only: the raw slope and the calibrated ones a depth claim rests on.
    assert set(r.fits) == {"m2|m1", "m1|m2"} and set(r.fits["m2|m1"]) == {"stir", "stir_normalised", "stir_debiased"}
    values = [row.stat("m2|m1", "stir").mean for row in r.rows]
    assert (r.slope("m2|m1"), r.fits["m2|m1"]["stir"]["intercept"]) == pytest.approx(fit_slope(r.depths, values))
    normalised = [row.get("m2|m1").calibration["stir"].normalised for row in r.rows]
    fit = r.fits["m2|m1"]["stir_normalised"]
    assert (fit["slope"], fit["intercept"]) == pytest.approx(fit_slope(r.depths, normalised), nan_ok=True)
