"""G-EED on networks whose symmetries are known by construction."""
import math

import pytest
import torch
from torch import nn

from stir.invariance import get_transform, measure_geed, pool, transform_names
from stir.models.taps import collect
from stir.models import build
from stir.config.schema import ModelConfig


class FlipAveraged(nn.Module):
    """(f(x) + f(flip x)) / 2: flip-invariant by construction, whatever f is."""

    def __init__(self, f: nn.Module):
        super().__init__()
        self.f = f

    def forward(self, x):
        return (self.f(x) + self.f(x.flip(-1))) / 2


def small_net(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 5))


def images(n=6, seed=0):
    return torch.rand(n, 3, 8, 8, generator=torch.Generator().manual_seed(seed))


def test_flip_averaged_model_has_zero_flip_invariance_geed_and_plain_model_does_not():
    x = images()
    net = small_net()
    inv = measure_geed(FlipAveraged(net), x, ["logits"], ["hflip"])
    plain = measure_geed(net, x, ["logits"], ["hflip"])
    for dist in ("euclidean", "cosine"):
        assert inv.get("logits", "hflip", distance=dist).values == [0.0] * 6
        assert plain.get("logits", "hflip", distance=dist).interval.mean > 1e-3
    # Averaging over flips gives no invariance to a shift.
    assert measure_geed(FlipAveraged(net), x, ["logits"], ["shift2"]).get("logits", "shift2").interval.mean > 1e-3


def test_conv_with_flip_symmetric_kernel_is_flip_equivariant_but_not_invariant():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3, padding=1, bias=True)
    with torch.no_grad():
        conv.weight.copy_((conv.weight + conv.weight.flip(-1)) / 2)  # w[..., j] == w[..., 2 - j]
    model = nn.Sequential(conv)
    result = measure_geed(model, images(), ["0"], ["hflip", "rot90"])
    eq = result.get("0", "hflip", kind="equivariance")
    assert max(eq.values) < 1e-6
    assert result.get("0", "hflip", kind="invariance").interval.mean > 1e-2
    # The kernel is not rotation-symmetric: rotations do not commute with it.
    assert result.get("0", "rot90", kind="equivariance").interval.mean > 1e-2


def test_any_conv_with_circular_padding_is_shift_equivariant_and_strided_maps_shift_by_cells():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3, padding=1, padding_mode="circular")
    result = measure_geed(nn.Sequential(conv), images(), ["0"], ["shift1", "shift3"])
    assert max(result.get("0", "shift1", kind="equivariance").values) < 1e-6
    strided = nn.Sequential(nn.Conv2d(3, 4, 2, stride=2))  # stride 2: shift2 = one cell, shift1 undefined
    res = measure_geed(strided, images(), ["0"], ["shift1", "shift2"])
    assert res.get("0", "shift1", kind="equivariance") is None
    assert max(res.get("0", "shift2", kind="equivariance").values) < 1e-6


def test_vector_taps_have_invariance_only_and_resnet_taps_keep_their_maps():
    net = build(ModelConfig(arch="resnet18", width=4), 10, (0.5,) * 3, (0.25,) * 3).eval()
    x = torch.rand(3, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    maps = collect(net, x, ["stem", "layer2.1", "penultimate", "logits"], 250, reduce=False)  # unreduced maps
    assert maps["stem"].shape == (3, 4, 32, 32) and maps["layer2.1"].shape == (3, 8, 16, 16)
    assert maps["penultimate"].shape == (3, 32) and maps["logits"].shape == (3, 10)
    res = measure_geed(net, x, ["stem", "penultimate"], ["hflip", "brightness"], noise_levels=(0.0, 0.1))
    assert res.get("penultimate", "hflip", kind="equivariance") is None
    assert res.get("stem", "brightness", kind="equivariance") is None
    assert res.get("stem", "hflip", kind="equivariance", noise=0.1) is not None
    assert net.training is False and all(not m.training for m in net.modules())


def test_pooling_concatenates_seeds_into_one_interval():
    x = images()
    net = small_net()
    zero = measure_geed(net, x, ["logits"], ["rot90"])
    assert zero.get("logits", "rot90").interval.count == 6
    pooled = pool([zero, measure_geed(small_net(1), x, ["logits"], ["rot90"])], "seeds")
    row = pooled.get("logits", "rot90")
    assert len(row.values) == 12 and row.interval.low <= row.interval.mean <= row.interval.high


def test_transforms_keep_images_in_range_and_unknown_names_list_the_choices():
    x = images()
    for name in transform_names():
        y = get_transform(name).apply(x)
        assert y.shape == x.shape and y.min() >= 0 and y.max() <= 1
    with pytest.raises(ValueError, match="choose from .*hflip.*rot90"):
        measure_geed(small_net(), x, ["logits"], ["vflip"])
    with pytest.raises(ValueError, match="choose from"):
        measure_geed(small_net(), x, ["logits"], ["hflip"], distances=["manhattan"])
    with pytest.raises(ValueError, match="unknown tap"):
        measure_geed(small_net(), x, ["nope"], ["hflip"])


def test_euclidean_geed_is_normalised_by_the_representation_norm():
    x = images()
    big = measure_geed(nn.Sequential(nn.Flatten()), x * 0.5, ["logits"], ["hflip"]).get("logits", "hflip")
    small = measure_geed(nn.Sequential(nn.Flatten()), x * 0.25, ["logits"], ["hflip"]).get("logits", "hflip")
    assert math.isclose(big.interval.mean, small.interval.mean, rel_tol=1e-9)
