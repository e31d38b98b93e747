"""cca, cca_squared, svcca, pwcca: hand values, invariances, ranks, d >= n."""

import numpy as np
import pytest
import torch
from simtest_utils import (
    close,
    randn,
    random_invertible,
    random_orthogonal,
    related_pair,
    textbook_cca,
    uvw,
)

from stir.similarity import cca, cca_squared, pwcca, svcca


# ---------------------------------------------------------------- hand-computed values


def test_hand_values_same_span():
    # X = [10u, v], Y = [u, 10v]: same column space, so every canonical correlation is 1.
    u, v, _ = uvw()
    x, y = torch.cat([10 * u, v], 1), torch.cat([u, 10 * v], 1)
    for fn in (cca, cca_squared, pwcca):
        assert close(fn(x, y), 1.0, 1e-12)
    # SVCCA keeps 99% of the variance: only 10u of X (100/101) and only 10v of Y -> correlation 0.
    assert close(svcca(x, y), 0.0, 1e-12)
    assert close(svcca(x, y, threshold=1.0), 1.0, 1e-12)


def test_hand_values_half_shared():
    # X = [3u, v], Y = [u, 5w]: correlations (1, 0).
    u, v, w = uvw()
    x, y = torch.cat([3 * u, v], 1), torch.cat([u, 5 * w], 1)
    assert close(cca(x, y), 0.5, 1e-12)
    assert close(cca_squared(x, y), 0.5, 1e-12)
    # PWCCA weights from x's variates h1 = u, h2 = v: alpha = (|<u,3u>| + |<u,v>|, |<v,3u>| + |<v,v>|) = (3, 1).
    assert close(pwcca(x, y), 3 / 4, 1e-12)
    # ... and from y's variates h1 = u, h2 = w: alpha = (1, 5) -> 1/6. Asymmetric.
    assert close(pwcca(y, x), 1 / 6, 1e-12)


def test_cca_squared_partial_correlation_hand_value():
    # Y = [u cos t + w sin t] against X = [u, v]: single correlation cos t.
    u, v, w = uvw()
    t = 0.3
    x, y = torch.cat([u, v], 1), u * np.cos(t) + w * np.sin(t)
    assert close(cca(x, y), np.cos(t), 1e-12)
    assert close(cca_squared(x, y), np.cos(t) ** 2, 1e-12)


def test_matches_textbook_whitening():
    x, y = related_pair(n=80, d1=6, d2=4, seed=2)
    rho = textbook_cca(x.numpy(), y.numpy())
    assert close(cca(x, y), rho.mean(), 1e-10)
    assert close(cca_squared(x, y), (rho**2).mean(), 1e-10)


# ---------------------------------------------------------------- invariances


@pytest.mark.parametrize("fn", [cca, cca_squared])
def test_cca_invariant_to_invertible_maps_and_symmetric(fn):
    x, y = related_pair(n=60, d1=8, d2=6, seed=3)
    base = fn(x, y)
    assert close(fn(x @ random_invertible(8, 4) + 3.0, y @ random_invertible(6, 5) - 1.0), base)
    assert close(fn(y, x), base, 1e-10)


def test_svcca_invariances():
    x, y = related_pair(n=60, d1=8, d2=6, seed=6)
    base = svcca(x, y)
    assert close(svcca(x @ random_orthogonal(8, 7) * 4.0 + 2.0, y @ random_orthogonal(6, 8) * 0.1), base)
    assert close(svcca(y, x), base, 1e-10)
    # PCA changes under non-orthogonal maps, so SVCCA does too (CCA would not).
    scale = torch.diag(torch.tensor([30.0, 1, 1, 1, 1, 1, 1, 1], dtype=x.dtype))
    assert abs(float(svcca(x @ scale, y)) - float(base)) > 1e-3


def test_pwcca_invariances_and_asymmetry():
    x, y = related_pair(n=60, d1=8, d2=6, seed=9)
    base = pwcca(x, y)
    perm, signs = torch.randperm(8, generator=torch.Generator().manual_seed(10)), torch.tensor([1.0, -1] * 4)
    assert close(pwcca(x[:, perm] * signs * 2.5 + 1.0, y @ random_invertible(6, 11)), base)
    assert abs(float(pwcca(x @ random_orthogonal(8, 12), y)) - float(base)) > 1e-4
    assert abs(float(pwcca(y, x)) - float(base)) > 1e-4


# ---------------------------------------------------------------- ranks, d >= n, numerics


@pytest.mark.parametrize("fn", [cca, cca_squared, pwcca])
def test_d_at_least_n_raises_with_advice(fn):
    x, y = randn(20, 30, 13), randn(20, 5, 14)
    with pytest.raises(ValueError, match="trivially 1.*svcca"):
        fn(x, y)
    with pytest.raises(ValueError, match="numerical rank 19 >= n - 1 = 19"):
        fn(y, randn(20, 19, 15))


def test_svcca_handles_d_larger_than_n():
    x, y = randn(30, 200, 16), randn(30, 300, 17)
    y[:, :50] += x[:, :50]
    value = float(svcca(x, y, threshold=0.5))
    assert 0.0 <= value <= 1.0
    with pytest.raises(ValueError, match="29 principal components.*Lower the threshold"):
        svcca(x, y, threshold=1.0)


def test_collinear_columns_use_numerical_rank():
    x, y = related_pair(n=40, d1=3, d2=3, seed=18)
    dup = torch.cat([x, x[:, :1] * 2.0, x[:, 1:2] - x[:, 2:3]], 1)  # rank 3, 5 columns
    for fn in (cca, cca_squared):
        assert close(fn(dup, y), fn(x, y), 1e-10)
    # PWCCA's weights count neurons, so duplicated neurons change it, but y's collinearity does not.
    assert close(pwcca(y, dup), pwcca(y, x), 1e-10)
    # Wide but rank-deficient: d = 60 >= n = 40, rank 3 -> computed on the rank, no error.
    wide = x @ randn(3, 60, 19)
    assert close(cca(wide, y), cca(x, y), 1e-8)


def test_nearly_collinear_columns_are_stable():
    x, y = related_pair(n=50, d1=3, d2=4, seed=20)
    a, b = x[:, :1], x[:, 1:2]
    near = torch.cat([a, a + 1e-8 * b, x[:, 2:]], 1)  # span equals span(x)
    for fn in (cca, cca_squared):
        assert close(fn(near, y), fn(x, y), 1e-6)


def test_rtol_controls_rank():
    x, y = related_pair(n=50, d1=3, d2=4, seed=21)
    near = torch.cat([x, x[:, :1] + 1e-9 * randn(50, 1, 22)], 1)
    assert close(cca(near, y, rtol=1e-6), cca(x, y), 1e-10)  # tiny direction dropped
    assert not close(cca(near, y), cca(x, y), 1e-3)  # kept at the default tolerance


@pytest.mark.parametrize("fn", [cca, cca_squared, svcca, pwcca])
def test_float32_with_offset(fn):
    x, y = related_pair(n=64, seed=23)
    x32, y32 = (x + 1000).float(), (y + 1000).float()
    got = fn(x32, y32)
    assert close(got, fn(x32.double(), y32.double()), 1e-10)
    assert close(got, fn(x, y), 2e-3)


def test_svcca_threshold_validation():
    x, y = related_pair(seed=24)
    with pytest.raises(ValueError, match="threshold"):
        svcca(x, y, threshold=0.0)
    with pytest.raises(ValueError, match="threshold"):
        svcca(x, y, threshold=1.5)
