"""The measure families of issue 32, against their definitions on seeded data.

RSM norm difference, uncentred orthogonal and permutation Procrustes, aligned cosine
similarity, hard and soft correlation match, joint rank-Jaccard and LCS k-NN, and the
``eps`` of CKNNA. The registry-wide properties (flags, invariances, symmetry, dtypes,
bad input) are in test_similarity_properties.py; the package values in
test_similarity_references.py (fixture entries ``added_by`` ``add_families.py``).
"""

import itertools
import math

import numpy as np
import pytest
import torch
from simtest_utils import F64, gen, random_orthogonal, related_pair

import stir.similarity as sim
from stir.similarity.correlation_match import correlation_matrix
from stir.similarity.neighbours import knn_indices


def _np(t):
    return t.detach().numpy()


# ---------------------------------------------------------------- RSM norm difference

def test_rsm_norm_difference_is_the_norm_of_the_distance_matrices():
    x, y = related_pair(n=30, d1=7, d2=5, seed=1)
    d = np.linalg.norm(_np(x)[:, None] - _np(x)[None], axis=2)
    e = np.linalg.norm(_np(y)[:, None] - _np(y)[None], axis=2)
    assert math.isclose(float(sim.rsm_norm_difference(x, y)), np.linalg.norm(d - e, "fro"), rel_tol=1e-10)
    spectral = float(sim.rsm_norm_difference(x, y, norm="spectral"))
    assert math.isclose(spectral, np.linalg.norm(d - e, 2), rel_tol=1e-10)
    assert spectral <= float(sim.rsm_norm_difference(x, y)) <= math.sqrt(30) * spectral
    moved = x @ random_orthogonal(7, 2) + 5.0
    assert float(sim.rsm_norm_difference(x, moved)) < 1e-9
    assert float(sim.get("measure/resi/rsm_norm_difference")(x, y)) == spectral
    with pytest.raises(ValueError, match="norm must be"):
        sim.rsm_norm_difference(x, y, norm="nuclear")


def test_rsm_norm_difference_blocks_agree():
    from stir.similarity import rsm

    x, y = related_pair(n=50, d1=6, d2=4, seed=3)
    whole = float(sim.rsm_norm_difference(x, y))
    old = rsm._BLOCK_ELEMS
    try:
        rsm._BLOCK_ELEMS = 7 * 50  # 7 rows a block
        assert math.isclose(float(sim.rsm_norm_difference(x, y)), whole, rel_tol=1e-12)
    finally:
        rsm._BLOCK_ELEMS = old


# ---------------------------------------------------------------- uncentred Procrustes, permutations

def _pad(a, d):
    return np.concatenate([a, np.zeros((a.shape[0], d - a.shape[1]))], axis=1)


def test_uncentred_procrustes_is_the_best_rotation():
    x, y = related_pair(n=40, d1=6, d2=4, seed=4)
    a, b = _np(x), _pad(_np(y), 6)
    u, _, vt = np.linalg.svd(a.T @ b)
    best = np.linalg.norm(a @ u @ vt - b)
    assert math.isclose(float(sim.uncentred_procrustes(x, y)), best, rel_tol=1e-10)
    for seed in range(5):  # no other rotation does better
        assert np.linalg.norm(a @ _np(random_orthogonal(6, seed)) - b) >= best
    cos = np.trace((a @ u @ vt).T @ b) / (np.linalg.norm(a) * np.linalg.norm(b))
    assert math.isclose(float(sim.get("uncentred_procrustes_angular")(x, y)), math.acos(cos), rel_tol=1e-10)
    xc, yc = x - x.mean(0), y - y.mean(0)  # on centred input: the centred forms
    assert math.isclose(float(sim.uncentred_procrustes(xc, yc)), float(sim.bures_distance(x, y)), rel_tol=1e-9)
    assert math.isclose(float(sim.get("uncentred_procrustes_angular")(xc, yc)), float(sim.procrustes_angular(x, y)),
                        rel_tol=1e-9)
    assert float(sim.uncentred_procrustes(x, x + 1.0)) > 1.0  # not translation invariant


def test_permutation_procrustes_is_the_best_permutation():
    x, y = related_pair(n=30, d1=4, d2=4, seed=5)
    a, b = _np(x), _np(y)
    brute = min(np.linalg.norm(a - b[:, list(p)]) for p in itertools.permutations(range(4)))
    got = float(sim.permutation_procrustes(x, y))
    assert math.isclose(got, brute, rel_tol=1e-10)
    assert got >= float(sim.uncentred_procrustes(x, y)) - 1e-9  # permutations are rotations
    assert float(sim.permutation_procrustes(x, 2.0 * x[:, [2, 0, 3, 1]], distance="angular")) < 1e-6
    xc, yc = x - x.mean(0), y - y.mean(0)
    assert math.isclose(float(sim.permutation_procrustes(xc, yc)),
                        float(sim.permutation_metric(x, y, distance="euclidean")), rel_tol=1e-9)
    w = related_pair(n=30, d1=4, d2=6, seed=6)[1]  # unequal widths: as zero padding
    pad = torch.tensor(_pad(a, 6))
    assert math.isclose(float(sim.permutation_procrustes(x, w)), float(sim.permutation_procrustes(pad, w)),
                        rel_tol=1e-12)


# ---------------------------------------------------------------- aligned cosine

def test_aligned_cosine_of_a_rotation_is_one_and_zero_rows_are_left_out():
    x, y = related_pair(n=40, d1=6, d2=5, seed=7)
    assert math.isclose(float(sim.aligned_cosine(x, x @ random_orthogonal(6, 8))), 1.0, abs_tol=1e-12)
    base = float(sim.aligned_cosine(x, y))
    assert -1.0 <= base <= 1.0
    x0, y0 = x.clone(), y.clone()
    x0[0], y0[1] = 0.0, 0.0  # zero rows add nothing to X^T Y: the same rotation, on the other rows
    assert math.isclose(float(sim.aligned_cosine(x0, y0)), float(sim.aligned_cosine(x0[2:], y0[2:])), rel_tol=1e-12)
    a, b = torch.zeros(3, 2, dtype=F64), torch.zeros(3, 2, dtype=F64)
    a[0, 0], b[1, 0], b[2, 1] = 1.0, 1.0, 1.0
    with pytest.raises(ValueError, match="no cosine is defined"):
        sim.aligned_cosine(a, b)


# ---------------------------------------------------------------- correlation match

def test_correlation_match_against_brute_force():
    x, y = related_pair(n=50, d1=4, d2=4, seed=9)
    c = np.corrcoef(_np(x).T, _np(y).T)[:4, 4:]
    assert np.allclose(_np(correlation_matrix(x, y)), c, atol=1e-12)
    brute = max(np.mean([c[i, p[i]] for i in range(4)]) for p in itertools.permutations(range(4)))
    hard, soft = float(sim.hard_correlation_match(x, y)), float(sim.soft_correlation_match(x, y))
    assert math.isclose(hard, brute, rel_tol=1e-12)
    assert math.isclose(soft, (c.max(1).mean() + c.max(0).mean()) / 2, rel_tol=1e-12)
    assert soft >= hard - 1e-12  # equal widths: each best match is at least the matched one
    moved = 3.0 * x[:, [1, 3, 0, 2]] + 2.0
    assert math.isclose(float(sim.hard_correlation_match(x, moved)), 1.0, abs_tol=1e-12)
    assert math.isclose(float(sim.soft_correlation_match(x, moved)), 1.0, abs_tol=1e-12)


def test_a_constant_neuron_correlates_zero():
    x, y = related_pair(n=30, d1=3, d2=3, seed=10)
    dead = y.clone()
    dead[:, 1] = 0.0  # a dead unit
    c = correlation_matrix(x, dead)
    assert torch.equal(c[:, 1], torch.zeros(3, dtype=F64))
    assert math.isfinite(float(sim.hard_correlation_match(x, dead)))
    assert float(sim.hard_correlation_match(dead, dead)) == pytest.approx(2 / 3, abs=1e-12)


# ---------------------------------------------------------------- ordered k-NN lists

def _lcs(a, b):
    t = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, p in enumerate(a):
        for j, q in enumerate(b):
            t[i + 1][j + 1] = t[i][j] + 1 if p == q else max(t[i][j + 1], t[i + 1][j])
    return t[-1][-1]


def _rank_score(a, b):
    shared = set(a) & set(b)
    if not shared:
        return 0.0
    total = sum(2 / ((1 + abs(a.index(j) - b.index(j))) * (a.index(j) + b.index(j) + 2)) for j in shared)
    return total / sum(1 / t for t in range(1, len(shared) + 1))


@pytest.mark.parametrize("k", [3, 10])
def test_lcs_and_joint_rank_jaccard_against_the_lists(k):
    x, y = related_pair(n=40, d1=6, d2=5, seed=11, noise=1.5)
    nx, ny = knn_indices(x, k).tolist(), knn_indices(y, k).tolist()
    lcs = np.mean([_lcs(a, b) for a, b in zip(nx, ny)])
    assert math.isclose(float(sim.lcs_knn(x, y, k=k)), lcs / k, rel_tol=1e-12)
    assert math.isclose(float(sim.lcs_knn(x, y, k=k, normalize=False)), lcs, rel_tol=1e-12)
    assert float(sim.lcs_knn(x, y, k=k)) <= float(sim.mutual_knn(x, y, k=k)) + 1e-12
    jrj = np.mean([len(set(a) & set(b)) / len(set(a) | set(b)) * _rank_score(a, b) for a, b in zip(nx, ny)])
    got = float(sim.joint_rank_jaccard(x, y, k=k))
    assert math.isclose(got, jrj, rel_tol=1e-12, abs_tol=1e-15)
    assert got <= min(float(sim.jaccard_knn(x, y, k=k)), float(sim.rank_similarity(x, y, k=k))) + 1e-12


def test_lcs_ids_name_the_length_for_platonic():
    x = torch.randn(30, 4, generator=gen(12), dtype=F64)
    assert float(sim.get("measure/platonic/lcs_knn-topk=5")(x, x)) == 5.0
    assert float(sim.get("measure/stir/lcs_knn-topk=5")(x, x)) == 1.0
    assert sim.info("measure/platonic/lcs_knn-topk=5").name == "lcs_knn_length"
    assert sim.info("measure/stir/lcs_knn-topk=5").name == "lcs_knn"


# ---------------------------------------------------------------- CKNNA eps

def test_cknna_eps():
    x, y = related_pair(n=40, d1=8, d2=6, seed=13)
    plain = float(sim.cknna(x, y))
    assert float(sim.cknna(x, y, eps=0.0)) == plain
    small = float(sim.cknna(x, y, eps=1e-6))
    assert 0 < small < plain and plain - small > 1e-7  # L2-normalised rows: small HSIC terms, a visible eps
    assert float(sim.get("measure/platonic/cknna-topk=10")(x, y)) == plain  # the id keeps eps = 0
    with pytest.raises(ValueError, match="eps must be >= 0"):
        sim.cknna(x, y, eps=-1.0)
