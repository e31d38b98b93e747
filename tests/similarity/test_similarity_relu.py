"""relu_cka, relu_procrustes(_distance): G_ReLU invariances (permutations, positive scalings), hand values."""

import math

import pytest
import torch
from simtest_utils import (
    F64,
    close,
    gen,
    orthonormal_centred,
    random_orthogonal,
)

from stir.similarity import linear_cka_debiased, relu_cka, relu_procrustes, relu_procrustes_distance
from stir.similarity.relu import max_kernel

MEASURES = {
    "relu_cka": relu_cka,
    "relu_cka_biased": lambda x, y: relu_cka(x, y, debiased=False),
    "relu_procrustes": relu_procrustes,
    "relu_procrustes_distance": relu_procrustes_distance,
}


def relu_pair(n=60, d1=10, d2=8, seed=0):
    g = gen(seed)
    x = torch.relu(torch.randn(n, d1, generator=g, dtype=F64))
    y = torch.relu(x @ torch.randn(d1, d2, generator=g, dtype=F64) + 0.5 * torch.randn(n, d2, generator=g, dtype=F64))
    return x, y


def g_relu(d, seed):
    """A random element of G_ReLU: a permutation and positive per-neuron scales in [0.1, 10]."""
    g = gen(seed)
    perm = torch.randperm(d, generator=g)
    scale = 10 ** (2 * torch.rand(d, generator=g, dtype=F64) - 1)
    return perm, scale


U4 = torch.tensor([1.0, -1, 1, -1], dtype=F64)[:, None]
V4 = torch.tensor([1.0, 1, -1, -1], dtype=F64)[:, None]


# ---------------------------------------------------------------- hand-computed values


def test_max_kernel_hand_value():
    # Unit neurons u/2, v/2: K_ij = max(u_i u_j, v_i v_j) / 4.
    k = max_kernel(torch.cat([U4, V4], 1) / 2)
    q = 0.25
    expected = torch.tensor(
        [[q, q, q, -q], [q, q, -q, q], [q, -q, q, q], [-q, q, q, q]],
        dtype=F64,
    )
    assert torch.allclose(k, expected, atol=1e-15)


def test_relu_cka_hand_values():
    # One neuron: the max kernel is the linear kernel, so relu_cka = debiased linear CKA = -1/2 here.
    assert close(relu_cka(U4, V4), -0.5, 1e-12)
    assert close(linear_cka_debiased(U4, V4), -0.5, 1e-12)
    # Two neurons against one (by hand from the kernel above): HSIC_1(K, L) = 1/12,
    # HSIC_1(K, K) = HSIC_1(L, L) = 1/6 -> 1/2.
    assert close(relu_cka(torch.cat([U4, V4], 1), U4), 0.5, 1e-12)


def test_relu_procrustes_hand_values():
    q = orthonormal_centred(10, 3, seed=1)
    u, v, w = q[:, :1], q[:, 1:2], q[:, 2:3]
    x = torch.cat([u, v], 1)
    assert close(relu_procrustes(x, torch.cat([5 * v, 2 * u], 1)), 1.0, 1e-12)  # permuted + scaled
    assert close(relu_procrustes(x, torch.cat([u, w], 1)), 0.5, 1e-12)  # C = [[1, 0], [0, 0]]
    assert close(relu_procrustes(torch.cat([u, v, w], 1), 2 * u), 1 / math.sqrt(3), 1e-12)
    assert close(relu_procrustes_distance(x, torch.cat([u, w], 1)), 1.0, 1e-12)  # sqrt(2 - 2 * 1/2)


# ---------------------------------------------------------------- invariances


@pytest.mark.parametrize("name", list(MEASURES))
def test_g_relu_invariance(name):
    fn = MEASURES[name]
    x, y = relu_pair(seed=2)
    base = fn(x, y)
    px, sx = g_relu(10, 3)
    py, sy = g_relu(8, 4)
    assert close(fn(x[:, px] * sx, y), base)
    assert close(fn(x, y[:, py] * sy), base)
    assert close(fn(x[:, px] * sx + 2.0, y[:, py] * sy - 1.0), base)  # translations too (centred)
    assert close(fn(y, x), base, 1e-10)


@pytest.mark.parametrize("name", list(MEASURES))
def test_not_invariant_to_rotations(name):
    fn = MEASURES[name]
    x, y = relu_pair(seed=5)
    assert abs(float(fn(x @ random_orthogonal(10, 6), y)) - float(fn(x, y))) > 1e-3


@pytest.mark.parametrize("name", ["relu_cka", "relu_cka_biased", "relu_procrustes"])
def test_identity_up_to_g_relu_is_one(name):
    x, _ = relu_pair(seed=7)
    perm, scale = g_relu(10, 8)
    assert close(MEASURES[name](x, x[:, perm] * scale), 1.0, 1e-10)


def test_dead_neurons_are_dropped():
    x, y = relu_pair(seed=9)
    x_dead = torch.cat([x, torch.zeros(60, 3, dtype=F64)], 1)
    assert close(relu_cka(x_dead, y), relu_cka(x, y), 1e-12)


def test_uncentred_variant_is_not_translation_invariant():
    x, y = relu_pair(seed=10)
    assert not close(relu_procrustes(x + 3.0, y, center=False), relu_procrustes(x, y, center=False), 1e-3)
    assert not close(relu_cka(x + 3.0, y, center=False), relu_cka(x, y, center=False), 1e-5)
    perm, scale = g_relu(10, 11)
    assert close(relu_procrustes(x[:, perm] * scale, y, center=False), relu_procrustes(x, y, center=False))


@pytest.mark.parametrize("name", list(MEASURES))
def test_float32_offset(name):
    fn = MEASURES[name]
    x, y = relu_pair(n=64, seed=12)
    got = fn((x + 1000).float(), (y + 1000).float())
    assert close(got, fn(x, y), 2e-3)
