"""Seed images: each kind as specified, drawn from an explicit generator, chunking-independent."""
import pytest
import torch

from stir.inversion import SEED_KINDS, make_seed, seed_generator


def _images(n=5):
    return torch.rand(n, 3, 8, 8, generator=torch.Generator().manual_seed(123))


def test_normal_is_iid_standard_normal_per_image():
    x = _images(64)
    s = make_seed("normal", x, seed_generator(0))
    assert s.shape == x.shape and s.dtype == x.dtype
    assert abs(s.mean().item()) < 0.05 and abs(s.std().item() - 1) < 0.05
    assert (s < 0).any() and (s > 1).any()  # raw noise: outside [0, 1], as published
    assert not torch.equal(s[0], s[1])  # one draw per image
    assert torch.equal(s, torch.randn(x.shape, generator=torch.Generator().manual_seed(0)))


def test_uniform_shared_white_black_reversed():
    x = _images()
    u = make_seed("uniform", x, seed_generator(0))
    assert u.min() >= 0 and u.max() < 1 and not torch.equal(u[0], u[1])
    shared = make_seed("shared_normal", x, seed_generator(0))
    assert all(torch.equal(shared[0], shared[i]) for i in range(len(x)))
    assert torch.equal(shared[0], torch.randn(x.shape[1:], generator=torch.Generator().manual_seed(0)))
    assert torch.equal(make_seed("white", x, seed_generator(0)), torch.ones_like(x))
    assert torch.equal(make_seed("black", x, seed_generator(0)), torch.zeros_like(x))
    rev = make_seed("reversed", x, seed_generator(0))
    assert all(torch.equal(rev[i], x[len(x) - 1 - i]) for i in range(len(x)))


@pytest.mark.parametrize("kind", SEED_KINDS)
def test_same_seed_same_images_other_seed_other_noise(kind):
    x = _images()
    a, b = make_seed(kind, x, seed_generator(7)), make_seed(kind, x, seed_generator(7))
    assert torch.equal(a, b)
    c = make_seed(kind, x, seed_generator(8))
    assert torch.equal(a, c) == (kind in ("white", "black", "reversed"))


def test_unknown_kind_names_the_valid_ones():
    with pytest.raises(ValueError, match="shared_normal"):
        make_seed("super-noise", _images(), seed_generator(0))


@pytest.mark.parametrize("bad", [{"mode": "slow"}, {"seed_kind": "noise"}, {"precision": "fp8"},
                                 {"schedule": "linear"}, {"stop_fraction": 0.0}])
def test_config_rejects_unknown_values(bad):
    from stir.inversion import InversionConfig

    with pytest.raises(ValueError, match="inversion."):
        InversionConfig(**bad)
