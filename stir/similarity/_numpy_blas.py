"""Centred second moments on CPU through numpy's BLAS.

The feature-space measures (linear CKA, its debiased form, Procrustes) spend
nearly all their time in three d x d products of the centred representations,
Xc^T Xc, Yc^T Yc and Xc^T Yc. On CPU numpy does these better than torch can:

- numpy turns ``a.T @ a`` into a symmetric rank-k update (BLAS syrk), which
  forms only one triangle: half the multiply-adds. torch exposes no syrk.
- numpy's bundled OpenBLAS ran float64 GEMM ~15% faster than torch's MKL on the
  project's 2-core CPU, and takes the transpose as a flag, so the centred copy
  stays in row layout (torch's products wanted a transposing copy).

Measured at n = 10000, d = 512, float64, 2 threads
(``python bench/bench_similarity.py --threads 2 --numpy-only``): see docs/benchmarks/similarity.md.

The same precision rules as the torch path (:mod:`stir.similarity._linalg`):
centring in float64 before any product, products in the work dtype, sums of
float32 products over at most ``rows`` rows, accumulated in float64. numpy's
BLAS runs with ``torch.get_num_threads()`` threads (set through threadpoolctl,
~10 us a call), so ``torch.set_num_threads`` governs this path as it does torch's.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from threadpoolctl import ThreadpoolController
from torch import Tensor

NUMPY_DTYPES = {torch.float64: np.float64, torch.float32: np.float32}

__all__ = ["NUMPY_DTYPES", "numpy_blas_applies", "numpy_moments"]


def numpy_blas_applies(*tensors: Tensor) -> bool:
    """True for CPU float32/float64 tensors outside autograd (``.numpy()`` then shares their memory)."""
    return all(
        t.device.type == "cpu" and t.dtype in NUMPY_DTYPES and not (t.requires_grad and torch.is_grad_enabled())
        for t in tensors
    )


@functools.cache
def _threadpools() -> ThreadpoolController:
    """The process's native thread pools (found once: ~1 ms); numpy's BLAS is loaded with numpy."""
    return ThreadpoolController()


def _centred_rows(a: np.ndarray, mean: np.ndarray, dtype: type, row_norms: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """(a - mean) computed in float64, then in ``dtype``, and (if asked) its float64 squared row norms.

    a (b, d) any float dtype, mean (d,) float64 -> ((b, d) dtype, (b,) float64 or None).
    """
    c = np.subtract(a, mean, dtype=np.float64)  # (b, d); never writes into a
    norms = np.einsum("ij,ij->i", c, c) if row_norms else None
    return c.astype(dtype, copy=False), norms


def numpy_moments(
    x: Tensor,
    y: Tensor,
    *,
    xx: bool,
    yy: bool,
    xy: bool,
    row_norms: bool,
    dtype: torch.dtype,
    rows: int,
) -> dict[str, Tensor]:
    """The dict of :func:`stir.similarity._linalg.centred_moments`, computed with numpy.

    x (n, d1), y (n, d2) CPU tensors (see :func:`numpy_blas_applies`); products
    in ``dtype`` over blocks of ``rows`` rows, summed in float64. Returns float64
    CPU tensors: ``xx`` (d1, d1), ``yy`` (d2, d2), ``xy`` (d1, d2) as requested,
    ``kx``, ``ky`` (n,) if ``row_norms``.
    """
    xn, yn = x.detach().numpy(), y.detach().numpy()
    np_dtype = NUMPY_DTYPES[dtype]
    mx, my = xn.mean(axis=0, dtype=np.float64), yn.mean(axis=0, dtype=np.float64)  # (d1,), (d2,)
    wanted = [k for k, want in (("xx", xx), ("yy", yy), ("xy", xy)) if want]
    acc: dict[str, np.ndarray] = {}
    kxs, kys = [], []
    with _threadpools().limit(limits=torch.get_num_threads(), user_api="blas"):
        for start in range(0, xn.shape[0], rows):
            xc, kx = _centred_rows(xn[start : start + rows], mx, np_dtype, row_norms)  # (b, d1), (b,)
            yc, ky = _centred_rows(yn[start : start + rows], my, np_dtype, row_norms)  # (b, d2), (b,)
            for key in wanted:
                a, b = {"xx": (xc, xc), "yy": (yc, yc), "xy": (xc, yc)}[key]
                prod = (a.T @ b).astype(np.float64, copy=False)  # (d_a, d_b); a.T @ a is a syrk
                acc[key] = prod if key not in acc else np.add(acc[key], prod, out=acc[key])
            kxs.append(kx)
            kys.append(ky)
    out = {k: torch.from_numpy(v) for k, v in acc.items()}
    if row_norms:
        out["kx"], out["ky"] = torch.from_numpy(np.concatenate(kxs)), torch.from_numpy(np.concatenate(kys))
    return out
