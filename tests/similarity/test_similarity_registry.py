"""Registry and bad-input handling, checked uniformly over every registered measure."""

import functools
import math

import pytest
import torch
from simtest_utils import (
    F64,
    randn,
    related_pair,
)

import stir.similarity as sim

# The measures of the first release, checked here one by one as before; every measure (these and
# the later ones) is checked by its flags in test_similarity_properties.py.
ORIGINAL = [
    "cca",
    "cca_squared",
    "linear_cka",
    "linear_cka_debiased",
    "linear_regression",
    "procrustes",
    "procrustes_distance",
    "pwcca",
    "rbf_cka",
    "relu_cka",
    "relu_procrustes",
    "relu_procrustes_distance",
    "svcca",
]
ALL = ORIGINAL
NEEDS_4 = {"linear_cka_debiased", "relu_cka"}  # unbiased HSIC by default
CCA_LIKE = {"cca", "cca_squared", "pwcca"}  # raise when d >= n - 1


def test_names_are_the_contract():
    assert sim.names() == sorted(sim.names())
    assert set(ALL) <= set(sim.names())  # later measures are added, none of these removed or renamed
    assert set(ALL) == {
        "linear_cka",
        "linear_cka_debiased",
        "rbf_cka",
        "cca",
        "cca_squared",
        "svcca",
        "pwcca",
        "linear_regression",
        "procrustes",
        "procrustes_distance",
        "relu_cka",
        "relu_procrustes",
        "relu_procrustes_distance",
    }


def test_get_and_options():
    assert sim.get("linear_cka") is sim.linear_cka
    rbf = sim.get("rbf_cka", threshold=0.5, debiased=True)
    assert isinstance(rbf, functools.partial)
    x, y = related_pair(seed=1)
    assert float(rbf(x, y)) == float(sim.rbf_cka(x, y, threshold=0.5, debiased=True))
    assert float(sim.get("svcca", threshold=0.9)(x, y)) == float(sim.svcca(x, y, threshold=0.9))
    with pytest.raises(ValueError, match="does not take option.*sigma.*valid options: threshold, debiased"):
        sim.get("rbf_cka", sigma=1.0)


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match="unknown similarity measure 'cka'.*linear_cka"):
        sim.get("cka")
    with pytest.raises(KeyError):  # also a KeyError, for dict-like callers
        sim.is_symmetric("nope")


def test_symmetry_table_matches_behaviour():
    x, y = related_pair(n=50, d1=7, d2=5, seed=2)
    x = torch.relu(x)
    assert set(sim.SYMMETRIC) == set(sim.names())
    for name in ALL:
        fn = sim.get(name)
        same = math.isclose(float(fn(x, y)), float(fn(y, x)), abs_tol=1e-10)
        assert same == sim.is_symmetric(name), name
    assert not sim.is_symmetric("pwcca") and not sim.is_symmetric("linear_regression")


@pytest.mark.parametrize("name", ALL)
def test_identical_inputs(name):
    x, _ = related_pair(n=40, seed=3)
    value = float(sim.get(name)(x, x.clone()))
    assert math.isclose(value, 0.0 if sim.is_distance(name) else 1.0, abs_tol=1e-6)


@pytest.mark.parametrize("name", ALL)
def test_float32_offset_and_wide_inputs(name):
    fn = sim.get(name)
    x, y = related_pair(n=64, seed=4)
    got = fn((x + 1000).float(), (y + 1000).float())
    assert torch.isfinite(got) and math.isclose(float(got), float(fn(x, y)), abs_tol=2e-3)
    wide_x, wide_y = randn(12, 400, 5), randn(12, 300, 6)
    if name in CCA_LIKE:
        with pytest.raises(ValueError, match="trivially 1.*svcca"):
            fn(wide_x, wide_y)
    elif name == "svcca":  # isotropic noise: 99% of the variance needs all n - 1 components
        with pytest.raises(ValueError, match="11 principal components.*trivially 1"):
            fn(wide_x, wide_y)
        assert math.isfinite(float(sim.svcca(wide_x, wide_y, threshold=0.5)))
    else:
        assert math.isfinite(float(fn(wide_x, wide_y)))


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("name", ALL)
def test_bad_input_errors(name):
    fn = sim.get(name)
    x, y = related_pair(n=20, seed=7)
    with pytest.raises(ValueError, match="x has 20 rows but y has 18: representations must be paired"):
        fn(x, y[:18])
    bad = x.clone()
    bad[3, 2] = float("nan")
    with pytest.raises(ValueError, match=r"x contains NaN or Inf \(first at row 3, column 2\)"):
        fn(bad, y)
    bad = y.clone()
    bad[5, 0] = float("inf")
    with pytest.raises(ValueError, match=r"y contains NaN or Inf \(first at row 5, column 0\)"):
        fn(x, bad)
    with pytest.raises(ValueError, match="y is constant"):
        fn(x, torch.full_like(y, 3.0))
    with pytest.raises(ValueError, match="must be 2-D"):
        fn(x[:, 0], y)
    with pytest.raises(ValueError, match="floating-point"):
        fn(x.long(), y)
    with pytest.raises(ValueError, match="no features"):
        fn(x[:, :0], y)
    with pytest.raises(TypeError, match="torch.Tensor"):
        fn(x.numpy(), y)
    need = 4 if name in NEEDS_4 else 2
    with pytest.raises(ValueError, match=f"{name} needs at least {need} samples, got {need - 1}"):
        fn(x[: need - 1], y[: need - 1])


def test_unbiased_estimators_need_four_samples():
    x, y = related_pair(n=3, seed=8)
    with pytest.raises(ValueError, match="linear_cka_debiased needs at least 4 samples, got 3"):
        sim.linear_cka_debiased(x, y)
    with pytest.raises(ValueError, match="rbf_cka needs at least 4 samples, got 3"):
        sim.rbf_cka(x, y, debiased=True)
    assert math.isfinite(float(sim.rbf_cka(x, y)))  # biased RBF CKA is fine at n = 3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_device_mismatch_and_cuda_inputs():
    x, y = related_pair(seed=9)
    with pytest.raises(ValueError, match="same device"):
        sim.linear_cka(x, y.cuda())
    for name in ALL:
        got = sim.get(name)(x.cuda(), y.cuda())
        assert got.device.type == "cuda"
        assert math.isclose(float(got), float(sim.get(name)(x, y)), abs_tol=1e-8)


def test_no_import_side_effects_on_dtype():
    assert torch.get_default_dtype() == torch.float32
    assert F64 == torch.float64


@pytest.mark.parametrize("name", ALL)
def test_inputs_are_not_modified(name):
    # The kernels centre chunks in place; they must work on copies, never on a float64 input.
    x, y = related_pair(n=30, seed=10)
    x0, y0 = x.clone(), y.clone()
    sim.get(name)(x, y)
    assert torch.equal(x, x0) and torch.equal(y, y0)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_inputs(name, dtype):
    x, y = related_pair(n=40, seed=11)
    x, y = torch.relu(x), torch.relu(y)
    got = sim.get(name)(x.to(dtype), y.to(dtype))
    assert got.dtype == torch.float64
    ref = sim.get(name)(x.to(dtype).double(), y.to(dtype).double())
    assert math.isclose(float(got), float(ref), abs_tol=1e-5)
