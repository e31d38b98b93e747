"""bench/bench_matrix.py: an N-model matrix through evaluate.py costs N x n x k x (steps + 1) model
evaluations with the inversion cache (evaluate.py's default), N^2 x ... without it; counted at the models.
With evaluate.py's default calibration the ceiling's independent draw makes it k + 1 inversions per reference."""
import pytest

from bench.bench_matrix import count_matrix, formula

N, n, k, STEPS = 3, 4, 2, 3


@pytest.fixture(scope="module")
def data(cifar10_root):
    return [f"data.root={cifar10_root}", "data.download=false", "data.holdout_size=40"]


def test_cached_matrix_inverts_each_reference_once_per_draw(data, tmp_path):
    r = count_matrix(N, n, k, STEPS, width=2, cache=True, data=data, workdir=tmp_path)
    assert r["inversion_evaluations"] == formula(N, n, k, STEPS) == N * n * k * (STEPS + 1)
    assert r["gradient_evaluations"] == N * n * k * STEPS  # the last iterate is evaluated without gradient
    assert r["engine_evaluations"] == r["inversion_evaluations"]  # the hooks agree with InversionResult.evaluations
    assert (r["inversions"], r["cache_hits"], r["cache_entries"]) == (N * k, (N * N - N) * k, N * k)
    assert r["grid_inversion_evaluations"] == 0  # the report's example IRIs come from the cache


def test_without_the_cache_every_ordered_pair_reinverts(data, tmp_path):
    r = count_matrix(N, n, k, STEPS, width=2, cache=False, data=data, workdir=tmp_path)
    assert r["inversion_evaluations"] == formula(N, n, k, STEPS, pairs=True) == N * N * n * k * (STEPS + 1)
    assert r["engine_evaluations"] == r["inversion_evaluations"]
    assert (r["inversions"], r["cache_hits"], r["cache_entries"]) == (N * N * k, 0, 0)
    assert r["grid_inversion_evaluations"] == 0  # the grid never inverts: without a cache it is left out


def test_the_calibration_ceiling_inverts_each_reference_once_more(data, tmp_path):
    r = count_matrix(N, n, k, STEPS, width=2, cache=True, data=data, workdir=tmp_path, calibrated=True)
    assert r["inversion_evaluations"] == formula(N, n, k, STEPS, calibrated=True) == N * n * (k + 1) * (STEPS + 1)
    assert r["engine_evaluations"] == r["inversion_evaluations"]
    # the ceiling's draw (seed + k) is cached per reference like the k draws: every other target reuses it
    assert (r["inversions"], r["cache_hits"], r["cache_entries"]) == (N * (k + 1), (N * N - N) * (k + 1), N * (k + 1))
