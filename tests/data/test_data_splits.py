"""Holdout and nested training subsets from one seeded permutation."""
import pytest
import torch

from stir.data import sample_indices, split_indices


def test_holdout_disjoint_and_covering():
    holdout, train = split_indices(100, 20, None, data_seed=0)
    assert holdout.dtype == train.dtype == torch.int64
    assert len(holdout) == 20 and len(train) == 80
    assert torch.equal(torch.sort(torch.cat([holdout, train])).values, torch.arange(100))


def test_nested_subsets_and_fixed_holdout():
    h_small, small = split_indices(100, 20, 10, data_seed=3)
    h_big, big = split_indices(100, 20, 40, data_seed=3)
    h_all, full = split_indices(100, 20, None, data_seed=3)
    assert torch.equal(h_small, h_big) and torch.equal(h_big, h_all)
    assert torch.equal(big[:10], small) and torch.equal(full[:40], big)
    assert set(small.tolist()) <= set(big.tolist()) and not set(big.tolist()) & set(h_big.tolist())


def test_determinism_and_seed_dependence():
    a = split_indices(100, 20, 30, data_seed=0)
    b = split_indices(100, 20, 30, data_seed=0)
    c = split_indices(100, 20, 30, data_seed=1)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])


@pytest.mark.parametrize("holdout,train,match", [
    (100, None, "holdout_size=100 .* 100 training images"),
    (-1, None, "holdout_size=-1"),
    (20, 81, "train_size=81 .* leave 80"),
    (20, 0, "train_size=0"),
])
def test_size_errors(holdout, train, match):
    with pytest.raises(ValueError, match=match):
        split_indices(100, holdout, train, data_seed=0)


def test_sample_indices():
    assert torch.equal(sample_indices(5, 50, 7)[:3], sample_indices(3, 50, 7))
    assert len(set(sample_indices(50, 50, 7).tolist())) == 50
    with pytest.raises(ValueError, match="n=51 .* 50"):
        sample_indices(51, 50, 7)
