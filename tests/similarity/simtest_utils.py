"""Seeded data and independent reference implementations for the similarity tests."""

from __future__ import annotations

import itertools

import numpy as np
import torch

F64 = torch.float64


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(n: int, d: int, seed: int, dtype: torch.dtype = F64) -> torch.Tensor:
    return torch.randn(n, d, generator=gen(seed), dtype=F64).to(dtype)


def related_pair(n: int = 60, d1: int = 8, d2: int = 6, seed: int = 0, noise: float = 0.7):
    """x (n, d1) and y (n, d2) that share a linear signal plus independent noise, float64."""
    g = gen(seed)
    x = torch.randn(n, d1, generator=g, dtype=F64) * torch.linspace(0.5, 2.0, d1, dtype=F64)
    mix = torch.randn(d1, d2, generator=g, dtype=F64)
    y = x @ mix + noise * torch.randn(n, d2, generator=g, dtype=F64)
    return x, y


def random_orthogonal(d: int, seed: int) -> torch.Tensor:
    q, r = torch.linalg.qr(torch.randn(d, d, generator=gen(seed), dtype=F64))
    return q * torch.sign(torch.diagonal(r))


def random_invertible(d: int, seed: int) -> torch.Tensor:
    """Well-conditioned but clearly non-orthogonal (singular values in [0.3, 3])."""
    s = torch.linspace(0.3, 3.0, d, dtype=F64)
    return random_orthogonal(d, seed) @ torch.diag(s) @ random_orthogonal(d, seed + 1)


def orthonormal_centred(n: int, k: int, seed: int) -> torch.Tensor:
    """k orthonormal columns (n, k), each with zero mean."""
    a = torch.randn(n, k, generator=gen(seed), dtype=F64)
    q, _ = torch.linalg.qr(a - a.mean(0))
    return q


def close(a, b, tol: float = 1e-6) -> bool:
    """|a - b| <= tol for two scalars (floats or 0-d tensors)."""
    return abs(float(a) - float(b)) <= tol


def uvw(n: int = 10, seed: int = 1):
    """Three mutually orthogonal, centred unit columns (n, 1) each."""
    q = orthonormal_centred(n, 3, seed)
    return q[:, :1], q[:, 1:2], q[:, 2:3]


def hsic_u_bruteforce(k: np.ndarray, l: np.ndarray) -> float:
    """Song et al. (2012) unbiased HSIC as the U-statistic over ordered distinct quadruples.

    HSIC_1 = 1/(n)_4 sum_{(i,j,q,r) distinct} [k_ij l_ij + k_ij l_qr - 2 k_ij l_iq]
    (the expectation form E[kl] + E[k]E[l] - 2E[k l'] of population HSIC).
    O(n^4): tiny n only.
    """
    n = k.shape[0]
    total, count = 0.0, 0
    for i, j, q, r in itertools.permutations(range(n), 4):
        total += k[i, j] * l[i, j] + k[i, j] * l[q, r] - 2.0 * k[i, j] * l[i, q]
        count += 1
    return total / count


def textbook_linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """n x n Gram form with an explicit centring matrix H (numpy, float64)."""
    n = x.shape[0]
    h = np.eye(n) - np.ones((n, n)) / n
    k, l = h @ x @ x.T @ h, h @ y @ y.T @ h
    return float((k * l).sum() / np.sqrt((k * k).sum() * (l * l).sum()))


def textbook_rbf_cka(x: np.ndarray, y: np.ndarray, threshold: float = 1.0) -> float:
    """RBF CKA as in Kornblith et al.'s reference notebook (np.median over the full matrix)."""

    def gram(z: np.ndarray) -> np.ndarray:
        dots = z @ z.T
        sq = np.diag(dots)
        d2 = -2 * dots + sq[:, None] + sq[None, :]
        return np.exp(-d2 / (2 * threshold**2 * np.median(d2)))

    n = x.shape[0]
    h = np.eye(n) - np.ones((n, n)) / n
    k, l = h @ gram(x) @ h, h @ gram(y) @ h
    return float((k * l).sum() / np.sqrt((k * k).sum() * (l * l).sum()))


def textbook_cca(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Canonical correlations via whitening with covariance inverse square roots (full rank only)."""
    xc, yc = x - x.mean(0), y - y.mean(0)

    def inv_sqrt(c: np.ndarray) -> np.ndarray:
        w, v = np.linalg.eigh(c)
        return v @ np.diag(w**-0.5) @ v.T

    m = inv_sqrt(xc.T @ xc) @ (xc.T @ yc) @ inv_sqrt(yc.T @ yc)
    return np.linalg.svd(m, compute_uv=False)
