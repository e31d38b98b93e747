"""Layer matching (Kornblith et al. 2019, table 2) on synthetic networks with known layer correspondences."""
import math

import numpy as np
import pytest
import torch

from stir.judging.layer_matching import (
    LayerMatchingResult, best_matches, layer_matching, matched, measure_names, similarity_grid,
)


def chain(n=60, d=12, layers=5, seed=0):
    """Layer l+1 = tanh(layer l W_l): adjacent layers correlate, as in a real network."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    reps = []
    for _ in range(layers):
        x = torch.tanh(x @ torch.randn(d, d, generator=g, dtype=torch.float64) / math.sqrt(d)) + 0.1 * x
        reps.append(x.clone())
    return reps


def rotated(reps, seed=1):
    """The same network up to a random rotation of every layer (a 'seed' with identical function)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for x in reps:
        q, _ = torch.linalg.qr(torch.randn(x.shape[1], x.shape[1], generator=g, dtype=torch.float64))
        out.append(x @ q)
    return out


def test_rotated_layers_are_matched_perfectly_by_cka_and_procrustes():
    a = chain()
    reps = {"a": a, "b": rotated(a, 1), "c": rotated(a, 2)}
    taps = [f"l{i}" for i in range(5)]
    results = layer_matching(reps, taps, ["linear_cka", "rbf_cka_0.8", "procrustes_distance", "linear_regression"])
    for name, res in results.items():
        assert res.accuracy == 1.0, name
        assert len(res.pairs) == 6 and res.undefined == 0 and res.per_layer == [1.0] * 5
    assert results["procrustes_distance"].distance and not results["linear_cka"].distance
    grid = results["linear_cka"].mean_grid
    assert np.allclose(np.diag(grid), 1.0) and np.allclose(grid, grid.T)


def test_argmax_argmin_nan_rows_and_a_wrong_match():
    grid = np.array([[0.9, 0.95, 0.1], [0.2, 0.8, 0.3], [np.nan, np.nan, np.nan]])
    assert list(best_matches(grid)) == [1, 1, -1]
    assert list(best_matches(grid, distance=True)) == [2, 0, -1]
    hits = matched(grid)
    assert hits[0] == 0.0 and hits[1] == 1.0 and math.isnan(hits[2])
    res = LayerMatchingResult("m", ["a", "b", "c"], [("x", "y")], [grid.tolist()])
    assert res.accuracy == 0.5 and res.undefined == 1
    assert LayerMatchingResult.from_dict(res.to_dict()).accuracy == 0.5


def test_undefined_cells_are_nan_not_errors():
    x = torch.randn(10, 20, dtype=torch.float64)  # d >= n: CCA undefined
    grid = similarity_grid([x], [x @ torch.linalg.qr(torch.randn(20, 20, dtype=torch.float64))[0]], "cca")
    assert math.isnan(grid[0, 0])


def test_bad_input_lists_the_choices():
    a = chain(layers=2)
    with pytest.raises(ValueError, match="valid names: .*linear_cka"):
        layer_matching({"a": a, "b": a}, ["l0", "l1"], ["no_such_measure"])
    with pytest.raises(ValueError, match="at least two seed models"):
        layer_matching({"a": a}, ["l0", "l1"], ["linear_cka"])
    assert "rbf_cka_0.8" in measure_names() and "linear_cka" in measure_names()


def test_assignment_measures_are_skipped_on_wide_representations_with_a_note():
    x = torch.randn(8, 3000, dtype=torch.float64)
    results = layer_matching({"a": [x], "b": [x]}, ["t"], ["relu_procrustes"])
    assert math.isnan(results["relu_procrustes"].grids[0][0][0]) and "skipped" in results["relu_procrustes"].notes[0]
