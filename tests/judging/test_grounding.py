"""Grounding (Ding et al. 2021) building blocks on data with known answers."""
import math

import numpy as np
import pytest
import torch

from stir.judging.grounding import (
    GroundingTest, delete_top_pcs, depth_test, dissimilarity, pc_deletion_test, probe_accuracy, rank_correlation,
)


def known_spectrum(n=80, s=(8.0, 4.0, 2.0, 1.0, 0.5), seed=0):
    """x (n, 5) with centred orthogonal columns of norms s: principal values are exactly s."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, len(s), generator=g, dtype=torch.float64)
    q, _ = torch.linalg.qr(z - z.mean(dim=0))
    return q * torch.tensor(s, dtype=torch.float64) + 3.0  # offset: the mean is kept by deletion


def test_pc_deletion_removes_exactly_the_top_components_and_cka_follows_the_spectrum():
    s = np.array([8.0, 4.0, 2.0, 1.0, 0.5])
    x = known_spectrum(s=tuple(s))
    for k in range(4):
        xk = delete_top_pcs(x, k)
        kept = torch.linalg.svdvals(xk - xk.mean(dim=0))[: 5 - k].numpy()
        assert np.allclose(kept, s[k:], atol=1e-9)
        assert torch.allclose(xk.mean(dim=0), x.mean(dim=0))
        # linear CKA(X, X_k) = sqrt(sum_{i>k} s_i^4 / sum_i s_i^4) for orthogonal principal columns
        expected = math.sqrt((s[k:] ** 4).sum() / (s ** 4).sum())
        assert math.isclose(1 - dissimilarity("linear_cka", x, xk), expected, rel_tol=1e-9)
    with pytest.raises(ValueError, match="cannot delete"):
        delete_top_pcs(x, 80)


def test_probe_is_deterministic_perfect_on_separable_data_and_near_chance_on_noise():
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(200) % 4
    centres = torch.randn(4, 30, generator=g, dtype=torch.float64) * 10
    x = centres[labels] + torch.randn(200, 30, generator=g, dtype=torch.float64)
    assert probe_accuracy(x, labels) == 1.0 == probe_accuracy(x, labels)
    noise = torch.randn(200, 30, generator=g, dtype=torch.float64)
    assert probe_accuracy(noise, labels) < 0.5


def test_rank_correlation_and_its_interval():
    a = np.arange(20.0)
    up = rank_correlation(a, a ** 2, n_boot=200)
    assert up.rho == 1.0 and up.low == 1.0 and up.high == 1.0 and up.count == 20
    assert rank_correlation(a, -a, n_boot=200).rho == -1.0
    noisy = rank_correlation(a, np.random.default_rng(0).normal(size=20), n_boot=200)
    assert noisy.low <= noisy.rho <= noisy.high
    assert math.isnan(rank_correlation([1.0, np.nan], [1.0, 2.0]).rho)


def test_deleting_pcs_of_a_label_coded_representation_hurts_the_probe_and_cka_tracks_it():
    g = torch.Generator().manual_seed(1)
    labels = torch.arange(120) % 3
    x = torch.randn(3, 10, generator=g, dtype=torch.float64)[labels] * 5 + torch.randn(120, 10, generator=g, dtype=torch.float64)
    test = pc_deletion_test({"x": x}, labels, [0, 1, 2, 4, 8], ["linear_cka", "procrustes_distance"])
    drops = [p.functional for p in test.points]
    assert drops[0] == 0.0 and drops[2] > 0.3  # two PCs carry the three class means
    assert test.correlation("linear_cka", n_boot=100).rho > 0.8
    assert GroundingTest.from_dict(test.to_dict()).points[2].dissimilarity == test.points[2].dissimilarity


def test_depth_test_pairs_every_representation():
    g = torch.Generator().manual_seed(2)
    labels = torch.arange(60) % 2
    reps = {f"r{i}": torch.randn(60, 8, generator=g, dtype=torch.float64) + i * labels[:, None] for i in range(4)}
    test = depth_test(reps, labels, ["linear_cka"])
    assert len(test.points) == 6 and all(p.functional >= 0 for p in test.points)
    with pytest.raises(ValueError, match="at least two"):
        depth_test({"r0": reps["r0"]}, labels, ["linear_cka"])
    with pytest.raises(ValueError, match="valid names"):
        depth_test(reps, labels, ["nope"])


def test_bottom_pc_deletion_removes_the_smallest_components():
    s = np.array([8.0, 4.0, 2.0, 1.0, 0.5])
    x = known_spectrum(s=tuple(s))
    from stir.judging.grounding import delete_pcs

    xk = delete_pcs(x, 2, "bottom")
    assert np.allclose(torch.linalg.svdvals(xk - xk.mean(dim=0))[:3].numpy(), s[:3], atol=1e-9)
    expected = math.sqrt((s[:3] ** 4).sum() / (s ** 4).sum())  # CKA barely moves: 0.9999...
    assert math.isclose(1 - dissimilarity("linear_cka", x, xk), expected, rel_tol=1e-9)
    with pytest.raises(ValueError, match="choose from"):
        delete_pcs(x, 1, "middle")
    with pytest.raises(ValueError, match="rank-5"):
        delete_pcs(x, 6, "bottom")
