"""linear_cka, linear_cka_debiased, rbf_cka: hand values, equivalent forms, invariances, numerics."""

import math

import numpy as np
import pytest
import torch
from simtest_utils import (
    F64,
    close,
    hsic_u_bruteforce,
    orthonormal_centred,
    randn,
    random_invertible,
    random_orthogonal,
    related_pair,
    textbook_linear_cka,
    textbook_rbf_cka,
)

from stir.similarity import linear_cka, linear_cka_debiased, rbf_cka
from stir.similarity._hsic import hsic_unbiased
from stir.similarity.cka import rbf_gram

MEASURES = {
    "linear_cka": linear_cka,
    "linear_cka_debiased": linear_cka_debiased,
    "rbf_cka": rbf_cka,
    "rbf_cka_debiased": lambda x, y: rbf_cka(x, y, debiased=True),
    "rbf_cka_t05": lambda x, y: rbf_cka(x, y, threshold=0.5),
}


# ---------------------------------------------------------------- hand-computed values


@pytest.mark.parametrize("form", ["feature", "gram"])
def test_linear_cka_hand_value(form):
    # X = [10u, v], Y = [u, 10v], u, v orthonormal and centred:
    # X^T X = diag(100, 1), Y^T Y = diag(1, 100), Y^T X = diag(10, 10) -> 200 / 10001.
    uv = orthonormal_centred(8, 2, seed=1)
    u, v = uv[:, :1], uv[:, 1:]
    x, y = torch.cat([10 * u, v], 1), torch.cat([u, 10 * v], 1)
    assert close(linear_cka(x, y, form=form), 200 / 10001, 1e-12)


@pytest.mark.parametrize("form", ["feature", "gram"])
def test_linear_cka_debiased_hand_value(form):
    # n = 4, d = 1: s = (1,-1,1,-1), t = (1,1,-1,-1). By hand with Song et al.'s formula:
    # HSIC_1(K, L) = (-1/4 + 1/6 - 1/4) / 4 = -1/12, HSIC_1(K, K) = HSIC_1(L, L) = 1/6 -> -1/2.
    s = torch.tensor([[1.0], [-1.0], [1.0], [-1.0]], dtype=F64)
    t = torch.tensor([[1.0], [1.0], [-1.0], [-1.0]], dtype=F64)
    assert close(linear_cka_debiased(s, t, form=form), -0.5, 1e-12)


def test_rbf_bandwidth_hand_value_odd_n():
    # Squared distances of 0, 1, 3: {0,0,0,1,1,4,4,9,9}; median (full matrix, zeros included) = 1.
    x = torch.tensor([[0.0], [1.0], [3.0]], dtype=F64)
    k = rbf_gram(x, threshold=1.0)
    assert close(k[0, 1], math.exp(-1 / 2), 1e-12)
    assert close(k[0, 2], math.exp(-9 / 2), 1e-12)
    assert close(k[1, 2], math.exp(-4 / 2), 1e-12)
    assert close(k[1, 1], 1.0, 1e-12)


def test_rbf_bandwidth_hand_value_even_n_averages_middle_pair():
    # Squared distances of 0, 1, 3, 7: 4 zeros, then 1,1,4,4,9,9,16,16,36,36,49,49.
    # Median of the 16 values = (4 + 9) / 2 = 6.5 (np.median convention); threshold 2 -> sigma^2 = 4 * 6.5.
    x = torch.tensor([[0.0], [1.0], [3.0], [7.0]], dtype=F64)
    k = rbf_gram(x, threshold=2.0)
    assert close(k[0, 1], math.exp(-1 / (2 * 4 * 6.5)), 1e-12)
    assert close(k[2, 3], math.exp(-16 / (2 * 4 * 6.5)), 1e-12)


# ---------------------------------------------------------------- equivalent forms / references


@pytest.mark.parametrize("n,d1,d2", [(40, 5, 7), (12, 60, 90), (30, 1, 200)])
@pytest.mark.parametrize("fn", [linear_cka, linear_cka_debiased])
def test_feature_and_gram_forms_agree(fn, n, d1, d2):
    x, y = randn(n, d1, 1), randn(n, d2, 2)
    y[:, :1] += x[:, :1]  # some shared signal
    a, b, auto = fn(x, y, form="feature"), fn(x, y, form="gram"), fn(x, y)
    assert close(a, b, 1e-12) and close(auto, a, 1e-12)


def test_linear_cka_matches_textbook():
    x, y = related_pair(seed=3)
    assert close(linear_cka(x, y), textbook_linear_cka(x.numpy(), y.numpy()), 1e-12)


@pytest.mark.parametrize("n", [5, 6, 7])
def test_unbiased_hsic_matches_u_statistic(n):
    # Catches a `/ n * (n - 3)` precedence bug: it changes raw HSIC (and cancels only in a CKA ratio).
    x, y = randn(n, 3, 10 + n), randn(n, 2, 20 + n)
    k, l = x @ x.T, y @ y.T
    expected = hsic_u_bruteforce(k.numpy(), l.numpy())
    assert abs(float(hsic_unbiased(k, l)) - expected) <= 1e-10 * max(1.0, abs(expected))


def test_linear_cka_debiased_matches_u_statistics():
    x, y = randn(7, 3, 5), randn(7, 4, 6)
    y[:, 0] += x[:, 0]
    k, l = (x @ x.T).numpy(), (y @ y.T).numpy()
    expected = hsic_u_bruteforce(k, l) / math.sqrt(hsic_u_bruteforce(k, k) * hsic_u_bruteforce(l, l))
    assert close(linear_cka_debiased(x, y), expected, 1e-10)


@pytest.mark.parametrize("threshold", [0.5, 1.0, 2.0])
def test_rbf_cka_matches_reference(threshold):
    x, y = related_pair(n=31, seed=4)
    expected = textbook_rbf_cka(x.numpy(), y.numpy(), threshold)
    assert close(rbf_cka(x, y, threshold=threshold), expected, 1e-10)


def test_rbf_cka_debiased_uses_unbiased_hsic():
    x, y = related_pair(n=7, seed=5)
    k, l = rbf_gram(x, 1.0).numpy(), rbf_gram(y, 1.0).numpy()
    expected = hsic_u_bruteforce(k, l) / math.sqrt(hsic_u_bruteforce(k, k) * hsic_u_bruteforce(l, l))
    assert close(rbf_cka(x, y, debiased=True), expected, 1e-10)


# ---------------------------------------------------------------- invariances


@pytest.mark.parametrize("name", list(MEASURES))
def test_invariances(name):
    fn = MEASURES[name]
    x, y = related_pair(n=50, d1=8, d2=6, seed=7)
    base = fn(x, y)
    shift = randn(1, 8, 8) * 5
    assert close(fn(x @ random_orthogonal(8, 9), y), base)
    assert close(fn(x, y @ random_orthogonal(6, 10)), base)
    assert close(fn(3.7 * x, 0.02 * y), base)
    assert close(fn(x + shift, y - 2.0), base)


@pytest.mark.parametrize("name", list(MEASURES))
def test_not_invariant_to_invertible_maps(name):
    fn = MEASURES[name]
    x, y = related_pair(n=50, d1=8, d2=6, seed=7)
    assert abs(float(fn(x @ random_invertible(8, 11), y)) - float(fn(x, y))) > 1e-3


@pytest.mark.parametrize("name", list(MEASURES))
def test_symmetric_and_identity(name):
    fn = MEASURES[name]
    x, y = related_pair(seed=12)
    assert close(fn(x, y), fn(y, x), 1e-10)
    assert close(fn(x, x), 1.0, 1e-10)


# ---------------------------------------------------------------- numerics


@pytest.mark.parametrize("name", list(MEASURES))
@pytest.mark.parametrize("offset", [1e3, 1e5])
def test_float32_with_large_offset(name, offset):
    # A naive float32 uncentred Gram loses everything at offset 1e3; centring first in float64 does not.
    fn = MEASURES[name]
    x, y = related_pair(n=64, seed=13)
    x32, y32 = (x + offset).float(), (y + offset).float()
    got = fn(x32, y32)
    assert torch.isfinite(got)
    # Same as float64 on the very same (rounded) values: products of float32 input run in float32
    # after float64 centring (~1e-7 here, far below the input's own rounding of ~3e-5 at offset 1e3) ...
    assert close(got, fn(x32.double(), y32.double()), 1e-6)
    if offset == 1e3:  # ... and close to the unrounded data (float32 keeps ~1e-4 of the signal).
        assert close(got, fn(x, y), 1e-3)


@pytest.mark.parametrize("name", list(MEASURES))
def test_d_much_larger_than_n(name):
    fn = MEASURES[name]
    x, y = randn(16, 3000, 14), randn(16, 2000, 15)
    y[:, :100] += x[:, :100] * 3
    value = float(fn(x, y))
    assert math.isfinite(value) and -1.0 <= value <= 1.0 + 1e-12
    assert close(fn(x, x), 1.0, 1e-10)


@pytest.mark.parametrize("name", ["linear_cka", "linear_cka_debiased", "rbf_cka"])
def test_nearly_collinear_columns_are_continuous(name):
    fn = MEASURES[name]
    a, b = randn(40, 1, 16), randn(40, 1, 17)
    y = randn(40, 3, 18) + a
    exact = torch.cat([a, a, 2 * a], 1)
    near = torch.cat([a, a + 1e-9 * b, 2 * a - 1e-9 * b], 1)
    assert torch.isfinite(fn(exact, y))
    assert close(fn(near, y), fn(exact, y), 1e-6)


def test_cka_of_independent_noise_is_small_when_debiased():
    x, y = randn(400, 20, 19), randn(400, 20, 20)
    assert abs(float(linear_cka_debiased(x, y))) < 0.05
    assert float(linear_cka(x, y)) > float(linear_cka_debiased(x, y))  # the biased one is inflated


def test_result_is_float64_scalar_on_input_device():
    x, y = related_pair(seed=21)
    for fn in MEASURES.values():
        out = fn(x.float(), y.float())
        assert out.ndim == 0 and out.dtype == torch.float64 and out.device == x.device


def test_rbf_errors():
    x, y = related_pair(seed=22)
    with pytest.raises(ValueError, match="threshold must be > 0"):
        rbf_cka(x, y, threshold=0.0)
    dup = torch.zeros(10, 2, dtype=F64)
    dup[0] = 1.0  # 9 identical rows: median squared distance 0
    with pytest.raises(ValueError, match="median squared distance"):
        rbf_cka(dup, randn(10, 2, 23))


def test_form_argument_is_checked():
    x, y = related_pair(seed=24)
    with pytest.raises(ValueError, match="form must be"):
        linear_cka(x, y, form="fast")


def test_float32_input_agrees_with_float64_textbook():
    # float32 input (float32 products after float64 centring) agrees with the float64 textbook.
    x, y = related_pair(seed=25)
    got = linear_cka(x.float(), y.float())
    ref = textbook_linear_cka(x.float().double().numpy(), y.float().double().numpy())
    assert np.isfinite(ref) and close(got, ref, 1e-6)


def test_float32_products_respect_matmul_precision_setting():
    # Under "high"/"medium" float32 matmuls may use TF32/bfloat16, so float64 is used instead.
    x, y = related_pair(seed=26)
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")
        got = linear_cka(x.float(), y.float())
    finally:
        torch.set_float32_matmul_precision(before)
    assert close(got, linear_cka(x.float().double(), y.float().double()), 1e-12)
