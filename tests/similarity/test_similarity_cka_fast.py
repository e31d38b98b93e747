"""The fast feature form of linear CKA (issue 12): same values as plain float64 formulas.

linear_cka / linear_cka_debiased / procrustes compute the centred moments Xc^T Xc, Yc^T Yc, Xc^T Yc
(or their squared norms) by one of two paths: on CPU outside autograd through numpy's BLAS (syrk for
the symmetric ones, stir/similarity/_numpy_blas.py), elsewhere from the upper block triangle of
Z^T Z, Z = [Xc, Yc], on one transposed centred copy (row blocks only when memory or the float32
precision bound asks for them). Every test runs on both paths (the ``path`` fixture selects the torch
one on CPU by turning the numpy one off). These tests pin them to straightforward float64 references,
to the Gram form, to each other, to themselves when forced into many row blocks, and check that they
never write into their inputs and that non-finite input still fails with the same message.
"""

import numpy as np
import pytest
import torch
from simtest_utils import F64, close, randn

import stir.similarity._linalg as la
from stir.similarity import linear_cka, linear_cka_debiased, procrustes
from stir.similarity._hsic import hsic_unbiased

# (n, d1, d2): d1 != d2, blocks of 128 columns that do not divide d, a single column, d around n.
SHAPES = [(300, 200, 130), (257, 129, 7), (120, 1, 300), (64, 40, 33)]


def _pair(n: int, d1: int, d2: int, seed: int, offset: float = 0.0):
    x = randn(n, d1, seed) * torch.linspace(0.2, 3.0, d1, dtype=F64) + offset
    y = randn(n, d2, seed + 1) + offset
    k = min(d1, d2)
    y[:, :k] += 0.8 * x[:, :k]  # shared signal
    return x, y


def ref_moments(x: torch.Tensor, y: torch.Tensor):
    """Plain float64 numpy: centre, the three d x d products, their squared Frobenius norms, row norms."""
    xc = x.double().numpy() - x.double().numpy().mean(0)
    yc = y.double().numpy() - y.double().numpy().mean(0)
    sq = lambda m: float((m * m).sum())  # noqa: E731
    return sq(xc.T @ xc), sq(yc.T @ yc), sq(xc.T @ yc), (xc * xc).sum(1), (yc * yc).sum(1)


def ref_linear_cka(x, y) -> float:
    xx, yy, xy, _, _ = ref_moments(x, y)
    return xy / np.sqrt(xx * yy)


def ref_linear_cka_debiased(x, y) -> float:
    """Song et al.'s unbiased HSIC on the explicit float64 Gram matrices (hsic_unbiased is tested elsewhere)."""
    xc = x.double() - x.double().mean(0)
    yc = y.double() - y.double().mean(0)
    k, l = xc @ xc.T, yc @ yc.T
    return float(hsic_unbiased(k, l) / torch.sqrt(hsic_unbiased(k, k) * hsic_unbiased(l, l)))


def rel(a, b) -> float:
    return abs(float(a) - float(b)) / abs(float(b))


@pytest.fixture(autouse=True, params=["numpy", "torch"])
def path(request, monkeypatch):
    """Run each test on the numpy-BLAS path (CPU default) and on the torch block-triangular path."""
    if request.param == "torch":
        monkeypatch.setattr(la, "numpy_blas_applies", lambda *tensors: False)
    return request.param


@pytest.fixture
def tiny_pieces(monkeypatch):
    """Force the feature form into many row blocks (and float64 centring into many chunks)."""
    monkeypatch.setattr(la, "_PIECE_ELEMS", 5000)
    monkeypatch.setattr(la, "_CHUNK_ELEMS", 3000)


@pytest.mark.parametrize("n,d1,d2", SHAPES)
def test_moment_norms_match_plain_float64_products(n, d1, d2):
    x, y = _pair(n, d1, d2, seed=n + d1)
    xx, yy, xy, kx, ky = ref_moments(x, y)
    m = la.centred_moment_norms(x, y, row_norms=True)
    for key, want in (("xx", xx), ("yy", yy), ("xy", xy)):
        assert m[key].dtype == F64 and m[key].ndim == 0
        assert rel(m[key], want) < 1e-12, key
    np.testing.assert_allclose(m["kx"].numpy(), kx, rtol=1e-12)
    np.testing.assert_allclose(m["ky"].numpy(), ky, rtol=1e-12)


@pytest.mark.parametrize("n,d1,d2", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_linear_cka_feature_form_matches_reference_and_gram_form(n, d1, d2, dtype):
    x, y = _pair(n, d1, d2, seed=3 * n + d2)
    x, y = x.to(dtype), y.to(dtype)
    ref = ref_linear_cka(x, y)  # float64 formula on the same (rounded) values
    feature, gram = linear_cka(x, y, form="feature"), linear_cka(x, y, form="gram")
    tol = 1e-12 if dtype == torch.float64 else 1e-6  # float32: float32 products after float64 centring
    assert rel(feature, ref) < tol and rel(gram, ref) < tol
    assert rel(feature, gram) < tol


@pytest.mark.parametrize("n,d1,d2", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_linear_cka_debiased_feature_form_matches_reference_and_gram_form(n, d1, d2, dtype):
    x, y = _pair(n, d1, d2, seed=5 * n + d1)
    x, y = x.to(dtype), y.to(dtype)
    ref = ref_linear_cka_debiased(x, y)
    feature, gram = linear_cka_debiased(x, y, form="feature"), linear_cka_debiased(x, y, form="gram")
    tol = 1e-10 if dtype == torch.float64 else 1e-5
    assert rel(feature, ref) < tol and rel(gram, ref) < tol


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_row_blocks_give_the_same_value(tiny_pieces, dtype, offset):
    # Many row blocks (float64 sums of per-block products) against the one-piece float64 reference.
    x, y = _pair(203, 150, 45, seed=11, offset=offset)
    x, y = x.to(dtype), y.to(dtype)
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    assert rel(linear_cka(x, y, form="feature"), ref_linear_cka(x, y)) < tol
    assert rel(linear_cka_debiased(x, y, form="feature"), ref_linear_cka_debiased(x, y)) < 100 * tol
    assert rel(procrustes(x, y, form="feature"), procrustes(x.double(), y.double(), form="gram")) < 100 * tol


def test_row_blocks_match_one_piece_exactly_enough(monkeypatch):
    x, y = _pair(500, 140, 60, seed=12)
    one = la.centred_moment_norms(x, y, row_norms=True)
    monkeypatch.setattr(la, "_PIECE_ELEMS", 7 * 200)  # 7 rows a block
    many = la.centred_moment_norms(x, y, row_norms=True)
    for key in ("xx", "yy", "xy"):
        assert rel(many[key], one[key]) < 1e-13, key
    assert torch.allclose(many["kx"], one["kx"], rtol=1e-14, atol=0)
    assert torch.allclose(many["ky"], one["ky"], rtol=1e-14, atol=0)


def test_centred_moments_matrices_match_plain_products(tiny_pieces):
    x, y = _pair(97, 30, 140, seed=13)
    xc, yc = x - x.mean(0), y - y.mean(0)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        m = la.centred_moments(x, y, dtype=dtype)
        for key, want in (("xx", xc.T @ xc), ("yy", yc.T @ yc), ("xy", xc.T @ yc)):
            assert m[key].dtype == F64 and m[key].shape == want.shape
            assert torch.linalg.vector_norm(m[key] - want) <= tol * torch.linalg.vector_norm(want), key
        assert torch.allclose(m["kx"], (xc * xc).sum(1), rtol=1e-12)
        assert torch.allclose(m["ky"], (yc * yc).sum(1), rtol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_inputs_are_not_modified(dtype):
    # The centred copy is made in place: it must never be the input itself, whatever its layout.
    x, y = _pair(80, 130, 20, seed=14, offset=5.0)
    x, y = x.to(dtype), y.to(dtype).T.contiguous().T  # y non-contiguous (column-major)
    x0, y0 = x.clone(), y.clone()
    for fn in (linear_cka, linear_cka_debiased, procrustes):
        fn(x, y, form="feature")
    assert torch.equal(x, x0) and torch.equal(y, y0)


def test_float32_input_with_offset_keeps_float64_centring():
    # A +1e4 offset in float32: centring in float64 before the float32 products keeps the value.
    x, y = _pair(400, 140, 70, seed=15)
    x32, y32 = (x + 1e4).float(), (y + 1e4).float()
    assert rel(linear_cka(x32, y32, form="feature"), ref_linear_cka(x32, y32)) < 1e-6


@pytest.mark.parametrize("fn", [linear_cka, linear_cka_debiased])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_non_finite_input_still_names_the_entry(fn, dtype):
    x, y = _pair(300, 200, 130, seed=16)
    x, y = x.to(dtype), y.to(dtype)
    bad = x.clone()
    bad[123, 45] = float("nan")
    with pytest.raises(ValueError, match=r"x contains NaN or Inf \(first at row 123, column 45\)"):
        fn(bad, y)
    bad = y.clone()
    bad[7, 129] = float("-inf")
    with pytest.raises(ValueError, match=r"y contains NaN or Inf \(first at row 7, column 129\)"):
        fn(x, bad, form="feature")


def test_identical_inputs_give_one():
    x, _ = _pair(300, 200, 130, seed=17)
    assert close(linear_cka(x, x, form="feature"), 1.0, 1e-13)
    assert close(linear_cka(x.float(), x.float(), form="feature"), 1.0, 1e-6)


def test_cpu_default_is_the_numpy_path_and_autograd_takes_the_torch_path(path):
    x, y = _pair(50, 20, 10, seed=18)
    assert la.numpy_blas_applies(x, y) == (path == "numpy")
    assert not la.numpy_blas_applies(x.clone().requires_grad_(), y)
    assert not la.numpy_blas_applies(x.to(torch.float16), y)


def test_the_two_paths_agree(monkeypatch, path):
    x, y = _pair(300, 200, 130, seed=19)
    fast = la.centred_moments(x, y)
    monkeypatch.setattr(la, "numpy_blas_applies", lambda *tensors: False)
    slow = la.centred_moments(x, y)
    for key in ("xx", "yy", "xy", "kx", "ky"):
        assert torch.allclose(fast[key], slow[key], rtol=1e-13, atol=1e-10), key


def test_gradient_flows_through_linear_cka():
    # requires_grad input takes the torch path; the gradient matches the float64 textbook formula's.
    x, y = _pair(60, 12, 9, seed=20)
    xa = x.clone().requires_grad_()
    linear_cka(xa, y, form="feature").backward()
    xb = x.clone().requires_grad_()
    xc, yc = xb - xb.mean(0), y - y.mean(0)
    (torch.linalg.norm(yc.T @ xc) ** 2 / (torch.linalg.norm(xc.T @ xc) * torch.linalg.norm(yc.T @ yc))).backward()
    assert torch.allclose(xa.grad, xb.grad, rtol=1e-10, atol=1e-14)
