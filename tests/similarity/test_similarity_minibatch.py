"""MinibatchCKA: one batch == debiased CKA, unequal batches weighted by size, all batches used."""

import math

import pytest
import torch
from simtest_utils import (
    hsic_u_bruteforce,
    randn,
    related_pair,
)

from stir.similarity import MinibatchCKA, linear_cka_debiased


def _batches(x, y, sizes):
    start = 0
    for b in sizes:
        yield x[start : start + b], y[start : start + b]
        start += b


@pytest.mark.parametrize("form", ["auto", "feature", "gram"])
def test_one_batch_equals_debiased_cka(form):
    x, y = related_pair(n=40, seed=1)
    metric = MinibatchCKA(form=form)
    metric.update(x, y)
    assert abs(float(metric.compute()) - float(linear_cka_debiased(x, y))) <= 1e-12


def test_unequal_batches_match_direct_size_weighted_estimator():
    # Direct computation of the same estimator from brute-force U-statistics:
    # CKA = sum_b n_b h_xy(b) / sqrt(sum_b n_b h_xx(b) * sum_b n_b h_yy(b)).
    x, y = related_pair(n=5 + 6 + 7, d1=3, d2=2, seed=2)
    sizes = [5, 6, 7]
    sums = [0.0, 0.0, 0.0]
    metric = MinibatchCKA()
    for xb, yb in _batches(x, y, sizes):
        metric.update(xb, yb)
        k, l = (xb @ xb.T).numpy(), (yb @ yb.T).numpy()
        for i, (a, b) in enumerate([(k, l), (k, k), (l, l)]):
            sums[i] += len(xb) * hsic_u_bruteforce(a, b)
    expected = sums[0] / math.sqrt(sums[1] * sums[2])
    assert abs(float(metric.compute()) - expected) <= 1e-10
    assert metric.num_batches == 3 and metric.num_samples == 18


def test_uses_every_batch_not_only_the_last():
    # Two batches with very different relations: a last-batch-only accumulator would report
    # the second batch's CKA; an accumulator must land strictly between the two.
    x1, y1 = related_pair(n=50, seed=3, noise=0.1)  # strongly related
    x2, y2 = randn(50, 8, 4), randn(50, 6, 5)  # unrelated
    metric = MinibatchCKA()
    metric.update(x1, y1)
    metric.update(x2, y2)
    got = float(metric.compute())
    last_only = float(linear_cka_debiased(x2, y2))
    first_only = float(linear_cka_debiased(x1, y1))
    assert abs(got - last_only) > 0.1
    assert min(first_only, last_only) < got < max(first_only, last_only)


def test_batch_order_does_not_matter():
    x, y = related_pair(n=60, seed=6)
    a, b = MinibatchCKA(), MinibatchCKA()
    for xb, yb in _batches(x, y, [20, 15, 25]):
        a.update(xb, yb)
    for xb, yb in reversed(list(_batches(x, y, [20, 15, 25]))):
        b.update(xb, yb)
    assert abs(float(a.compute()) - float(b.compute())) <= 1e-12


def test_equal_batches_are_a_plain_mean_and_precedence_matters():
    # With equal sizes weights cancel; with unequal sizes an HSIC divided by n/(n-3) or by
    # n*(n-3) gives different answers, which the direct test above pins down.
    x, y = related_pair(n=40, seed=7)
    metric = MinibatchCKA()
    parts = list(_batches(x, y, [10, 10, 10, 10]))
    for xb, yb in parts:
        metric.update(xb, yb)
    from stir.similarity._hsic import linear_hsic_unbiased_terms

    terms = [torch.stack(linear_hsic_unbiased_terms(xb, yb, "gram")) for xb, yb in parts]
    mean = torch.stack(terms).mean(0)
    assert abs(float(metric.compute()) - float(mean[0] / torch.sqrt(mean[1] * mean[2]))) <= 1e-12


def test_float32_offset_batches():
    x, y = related_pair(n=64, seed=8)
    metric = MinibatchCKA()
    for xb, yb in _batches((x + 1000).float(), (y + 1000).float(), [32, 32]):
        metric.update(xb, yb)
    ref = MinibatchCKA()
    for xb, yb in _batches(x, y, [32, 32]):
        ref.update(xb, yb)
    assert abs(float(metric.compute()) - float(ref.compute())) <= 1e-3


def test_reset_and_errors():
    x, y = related_pair(n=20, seed=9)
    metric = MinibatchCKA()
    with pytest.raises(ValueError, match="no batches yet"):
        metric.compute()
    with pytest.raises(ValueError, match="needs at least 4 samples, got 3"):
        metric.update(x[:3], y[:3])
    metric.update(x, y)
    with pytest.raises(ValueError, match="feature widths"):
        metric.update(x[:, :4], y)
    with pytest.raises(ValueError, match="rows but y has"):
        metric.update(x[:10], y[:12])
    metric.reset()
    assert metric.num_batches == 0
    with pytest.raises(ValueError, match="no batches yet"):
        metric.compute()
    metric.update(x[:10], y[:10])
    assert abs(float(metric.compute()) - float(linear_cka_debiased(x[:10], y[:10]))) <= 1e-12


def test_constant_batch_allowed_but_all_constant_is_an_error():
    x, y = related_pair(n=20, seed=10)
    metric = MinibatchCKA()
    metric.update(torch.ones(8, 8, dtype=x.dtype), y[:8])  # self-HSIC 0 for this batch
    with pytest.raises(ValueError, match="HSIC of x with itself"):
        metric.compute()
    metric.update(x[8:], y[8:])
    assert math.isfinite(float(metric.compute()))
