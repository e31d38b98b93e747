"""procrustes, procrustes_distance, linear_regression: hand values, forms, invariances."""

import math

import pytest
import torch
from simtest_utils import (
    close,
    randn,
    random_invertible,
    random_orthogonal,
    related_pair,
    uvw,
)

from stir.similarity import linear_regression, procrustes, procrustes_distance
from stir.similarity.procrustes import _cheaper_form


# ---------------------------------------------------------------- Procrustes


@pytest.mark.parametrize("form", ["feature", "gram"])
def test_procrustes_hand_values(form):
    u, v, _ = uvw()
    # Unit-norm X = [10u, v]/sqrt(101), Y = [u, 10v]/sqrt(101): X^T Y = diag(10, 10)/101 -> ||.||_* = 20/101.
    x, y = torch.cat([10 * u, v], 1), torch.cat([u, 10 * v], 1)
    assert close(procrustes(x, y, form=form), 20 / 101, 1e-12)
    assert close(procrustes_distance(x, y, form=form), math.sqrt(2 - 40 / 101), 1e-12)
    # Swapped columns are a rotation away: similarity 1, distance 0.
    assert close(procrustes(torch.cat([u, v], 1), torch.cat([v, u], 1), form=form), 1.0, 1e-12)


@pytest.mark.parametrize("n,d1,d2", [(40, 5, 7), (12, 60, 90), (30, 1, 200), (16, 400, 300)])
def test_procrustes_forms_agree(n, d1, d2):
    x, y = randn(n, d1, 2), randn(n, d2, 3)
    y[:, :1] += 2 * x[:, :1]
    a, b = procrustes(x, y, form="feature"), procrustes(x, y, form="gram")
    assert close(a, b, 1e-10) and close(procrustes(x, y), a, 1e-10)


def test_auto_form_choice():
    assert _cheaper_form(2000, 512, 512) == "feature"
    assert _cheaper_form(10000, 512, 512) == "feature"
    assert _cheaper_form(1000, 65536, 65536) == "gram"
    assert _cheaper_form(1000, 10, 65536) == "feature"  # a thin side keeps the cross matrix small


def test_similarity_equals_one_minus_half_squared_distance():
    x, y = related_pair(seed=4)
    s, d = procrustes(x, y), procrustes_distance(x, y)
    assert close(s, 1 - float(d) ** 2 / 2, 1e-12)


def test_procrustes_matches_explicit_rotation():
    # The optimal rotation Q = U V^T from the SVD of Y^T X attains ||X - Y Q||^2 = d^2.
    x, y = related_pair(n=50, d1=5, d2=5, seed=5)
    xc, yc = x - x.mean(0), y - y.mean(0)
    xc, yc = xc / xc.norm(), yc / yc.norm()
    u, _, vt = torch.linalg.svd(yc.T @ xc)
    residual = (xc - yc @ (u @ vt)).norm() ** 2
    assert close(procrustes_distance(x, y) ** 2, residual, 1e-12)


@pytest.mark.parametrize("fn", [procrustes, procrustes_distance])
def test_procrustes_invariances_and_symmetry(fn):
    x, y = related_pair(n=50, d1=8, d2=6, seed=6)
    base = fn(x, y)
    assert close(fn(x @ random_orthogonal(8, 7) * 3.0 + 5.0, y @ random_orthogonal(6, 8) * 0.2 - 1.0), base)
    assert close(fn(y, x), base, 1e-10)
    assert abs(float(fn(x @ random_invertible(8, 9), y)) - float(base)) > 1e-3


@pytest.mark.parametrize("form", ["feature", "gram"])
def test_procrustes_float32_offset_and_wide(form):
    x, y = related_pair(n=64, seed=10)
    x32, y32 = (x + 1000).float(), (y + 1000).float()
    got = procrustes(x32, y32, form=form)
    assert close(got, procrustes(x32.double(), y32.double(), form=form), 1e-6)
    assert close(got, procrustes(x, y), 1e-3)
    wide = randn(16, 300, 11)
    assert close(procrustes(wide, wide, form=form), 1.0, 1e-10)
    assert close(procrustes_distance(wide, wide * 2, form=form), 0.0, 1e-6)


def test_procrustes_collinear_columns():
    x, y = related_pair(n=40, d1=3, d2=4, seed=12)
    dup = torch.cat([x, x[:, :1]], 1)
    assert math.isfinite(float(procrustes(dup, y)))
    near = torch.cat([x, x[:, :1] * (1 + 1e-9)], 1)
    assert close(procrustes(near, y), procrustes(dup, y), 1e-6)


# ---------------------------------------------------------------- linear regression


def test_regression_hand_values():
    u, v, w = uvw()
    x = torch.cat([10 * u, v], 1)
    # y spans u and w: the fit recovers 10u but not v -> R^2 = 100 / 101.
    assert close(linear_regression(x, torch.cat([u, w], 1)), 100 / 101, 1e-12)
    assert close(linear_regression(x, torch.cat([u, 10 * v], 1)), 1.0, 1e-12)
    # Asymmetric: predicting [u, w] from X recovers u only -> 1 / 2.
    assert close(linear_regression(torch.cat([u, w], 1), x), 0.5, 1e-12)


def test_regression_matches_lstsq():
    x, y = related_pair(n=50, d1=5, d2=4, seed=13)
    xc, yc = x - x.mean(0), y - y.mean(0)
    b = torch.linalg.lstsq(yc, xc).solution
    expected = 1 - ((xc - yc @ b) ** 2).sum() / (xc**2).sum()
    assert close(linear_regression(x, y), expected, 1e-12)


def test_regression_invariances():
    x, y = related_pair(n=50, d1=8, d2=6, seed=14)
    base = linear_regression(x, y)
    assert close(linear_regression(x @ random_orthogonal(8, 15) * 2.0 + 1.0, y @ random_invertible(6, 16) - 3.0), base)
    assert abs(float(linear_regression(x @ random_invertible(8, 17), y)) - float(base)) > 1e-3
    assert abs(float(linear_regression(y, x)) - float(base)) > 1e-3


def test_regression_numerics():
    x, y = related_pair(n=64, seed=18)
    x32, y32 = (x + 1000).float(), (y + 1000).float()
    assert close(linear_regression(x32, y32), linear_regression(x, y), 1e-3)
    collinear = torch.cat([y, y[:, :2] * 3.0], 1)
    assert close(linear_regression(x, collinear), linear_regression(x, y), 1e-10)
    # y spanning every centred direction (d2 >= n - 1): in-sample fit is exact, R^2 = 1 (documented).
    assert close(linear_regression(x, randn(64, 80, 19)), 1.0, 1e-10)
