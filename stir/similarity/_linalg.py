"""Centring, Gram and cross-product kernels shared by the measures.

Everything here returns float64 on the input's device, whatever the input
dtype. Representations are centred in float64 *before* any product is formed,
so a large common offset cannot swamp the signal. Matrix products (GEMMs) run
in the "work dtype": float64 when either input is float64, else float32 (for
float32/float16/bfloat16 input), with every chunk's product accumulated into a
float64 result. Centring is what precision needs: a float32 GEMM of centred
float32 data changes linear CKA by ~1e-9 (measured at offset 1000) while being
2-3x faster than float64 on CPU and far faster on GPUs. The n x n Gram
kernels convert large inputs a chunk at a time. The feature-space moments
(linear CKA and co.) make one centred copy of x and y in the work dtype, as the
textbook ``x - x.mean(0)`` does, and chunk rows only above ``_PIECE_ELEMS``
(or, for float32 products, every ``_CHUNK_ELEMS`` elements: a precision bound);
on CPU outside autograd their products run through numpy's BLAS
(:mod:`stir.similarity._numpy_blas`), elsewhere through torch.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ._numpy_blas import NUMPY_DTYPES, numpy_blas_applies, numpy_moments

F64 = torch.float64
# Elements per float64 working chunk (32 MiB): large enough that each matmul
# runs at full BLAS speed, small enough to bound the extra memory.
_CHUNK_ELEMS = 1 << 22
# Elements of the centred copy of x and y (together) that the feature-space
# moments make in one piece (128 MiB in float64, e.g. n = 16384 at d1 + d2 = 1024);
# larger inputs are processed in blocks of rows of this size.
_PIECE_ELEMS = 1 << 24
# Columns per block of the block-triangular Z^T Z (see centred_moment_norms).
_BLOCK = 128

__all__ = [
    "F64",
    "centred",
    "centred_gram",
    "centred_moment_norms",
    "centred_moments",
    "column_mean",
    "default_rtol",
    "orthonormal_basis",
    "prefer_gram",
    "work_dtype",
]


def work_dtype(*tensors: Tensor) -> torch.dtype:
    """GEMM precision for these inputs: float64 if any is float64, else float32.

    float32 only while ``torch.get_float32_matmul_precision()`` is "highest"
    (the default): under "high"/"medium" float32 products may run as TF32 or
    bfloat16 (~1e-3 relative error), so float64 is used instead.
    """
    if any(t.dtype == F64 for t in tensors) or torch.get_float32_matmul_precision() != "highest":
        return F64
    return torch.float32


def column_mean(x: Tensor) -> Tensor:
    """Column means of x (n, d) accumulated in float64 -> (d,).

    Summed a block of rows at a time: ``x.mean(0, dtype=float64)`` would first
    materialise a float64 copy of the whole of x.
    """
    n, d = x.shape
    if x.dtype == F64:
        return x.mean(dim=0)
    step = max(1, _CHUNK_ELEMS // d)
    total = torch.zeros(d, dtype=F64, device=x.device)
    for start in range(0, n, step):
        total += x[start : start + step].sum(dim=0, dtype=F64)
    return total / n


def centred(x: Tensor) -> Tensor:
    """Column-centred float64 copy of x (n, d) -> (n, d)."""
    return x.to(F64, copy=True).sub_(column_mean(x))


def centred_gram(x: Tensor, dtype: torch.dtype = F64) -> Tensor:
    """Gram matrix K = Xc Xc^T (n, n) of the column-centred x (n, d), returned in float64.

    Accumulated over column chunks: K = sum_c Xc[:, c] Xc[:, c]^T, each chunk
    centred in float64, multiplied in ``dtype`` (see :func:`work_dtype`) and
    added into the float64 K, so the extra memory is one (n, n) matrix plus one
    chunk. The centring matrix H = I - 11^T/n is never formed; since Xc is
    centred, K = H (X X^T) H already.
    """
    n, d = x.shape
    mean = column_mean(x)
    step = max(1, _CHUNK_ELEMS // n)
    gram = torch.zeros((n, n), dtype=F64, device=x.device)
    for start in range(0, d, step):
        # copy=True: the in-place centring must never write into a float64 input.
        chunk = x[:, start : start + step].to(F64, copy=True).sub_(mean[start : start + step]).to(dtype)  # (n, c)
        if dtype == F64:
            gram.addmm_(chunk, chunk.T)
        else:
            gram += chunk @ chunk.T
    return gram


def _empty(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Tensor:
    """Uninitialised tensor; large CPU buffers are allocated by numpy.

    numpy asks the kernel for transparent huge pages on large arrays
    (``madvise``), torch's CPU allocator does not (unless THP_MEM_ALLOC_ENABLE=1),
    and first touching a fresh 80 MiB buffer in 4 KiB pages costs about as much
    as centring into it. The tensor shares the numpy array's memory and frees it
    with it.
    """
    if device.type == "cpu" and dtype in NUMPY_DTYPES:
        return torch.from_numpy(np.empty(shape, dtype=NUMPY_DTYPES[dtype]))
    return torch.empty(shape, dtype=dtype, device=device)


def _fill_centred_t(out: Tensor, t: Tensor, mean: Tensor | None, row_norms: bool) -> Tensor | None:
    """Write the column-centred t (b, d) transposed into out (d, b); return its squared row norms (b,) if asked.

    Centring is in float64 whatever the dtypes: a float64 ``out`` receives the
    (exact) float64 conversion of t and is centred in place (``mean`` None: t
    is the whole input and its column means are taken from ``out``, where each
    column of t is contiguous); a float32 ``out`` receives float64-centred
    blocks of rows, rounded once (the float64 temporary is one block of at most
    ``_CHUNK_ELEMS`` elements). The squared row norms (diag(Xc Xc^T), float64)
    are those of the float64-centred values.
    """
    b, d = t.shape
    if out.dtype == F64:
        out.copy_(t.T)
        out.sub_(out.mean(dim=1, keepdim=True) if mean is None else mean[:, None])
        return torch.linalg.vector_norm(out, dim=0).square_() if row_norms else None
    norms = torch.empty(b, dtype=F64, device=t.device) if row_norms else None
    step = max(1, _CHUNK_ELEMS // d)
    for start in range(0, b, step):
        block = t[start : start + step].to(F64, copy=True).sub_(mean)  # (s, d); copy: never write into t
        if norms is not None:
            norms[start : start + step] = block.square().sum(dim=1)
        out[:, start : start + step].copy_(block.T)
    return norms


def _piece_rows(x: Tensor, y: Tensor, dtype: torch.dtype) -> int:
    """Rows of x (n, d1) and y (n, d2) centred in one piece: see :func:`_centred_pieces`."""
    return max(1, (_PIECE_ELEMS if dtype == F64 else _CHUNK_ELEMS) // (x.shape[1] + y.shape[1]))


def _centred_pieces(x: Tensor, y: Tensor, dtype: torch.dtype, row_norms: bool):
    """Yield (zt, kx, ky) for consecutive blocks of rows of the column-centred x (n, d1), y (n, d2).

    zt (d1 + d2, b) holds the centred x rows then the centred y rows of the
    block, transposed (each feature contiguous, the layout in which the d x d
    products run fastest), in ``dtype``; kx, ky (b,) their squared row norms in
    float64 (None unless ``row_norms``). The whole of x and y is one block
    unless that copy would exceed ``_PIECE_ELEMS`` elements: chunk only when
    memory requires it. Exception: float32 products are summed in float64 every
    ``_CHUNK_ELEMS`` elements of rows, as before, so that no float32 sum runs over
    more than that many rows (a precision bound, not a memory one: one float32
    product over all n = 20000 rows was ~4x further from float64 than 6000-row
    blocks summed in float64).
    """
    n = x.shape[0]
    d1, d2 = x.shape[1], y.shape[1]
    rows = _piece_rows(x, y, dtype)
    # One float64 piece takes the means from its own copy (contiguous rows, faster than x.mean(0)).
    mx, my = (None, None) if rows >= n and dtype == F64 else (column_mean(x), column_mean(y))
    buf = _empty((d1 + d2, min(n, rows)), dtype, x.device)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        zt = buf[:, : stop - start]
        kx = _fill_centred_t(zt[:d1], x[start:stop], mx, row_norms)
        ky = _fill_centred_t(zt[d1:], y[start:stop], my, row_norms)
        yield zt, kx, ky


def _accumulate(acc: Tensor | None, a: Tensor, b: Tensor) -> Tensor:
    """acc + a @ b in float64 (acc None: start a new float64 sum); a, b in the work dtype."""
    if a.dtype == F64:
        return a @ b if acc is None else acc.addmm_(a, b)
    prod = (a @ b).to(F64)
    return prod if acc is None else acc.add_(prod)


def centred_moments(
    x: Tensor,
    y: Tensor,
    *,
    xx: bool = True,
    yy: bool = True,
    xy: bool = True,
    row_norms: bool = True,
    dtype: torch.dtype = F64,
) -> dict[str, Tensor]:
    """Second moments of the column-centred x (n, d1) and y (n, d2), returned in float64.

    Returns a dict with (as requested) ``xx`` = Xc^T Xc (d1, d1),
    ``yy`` = Yc^T Yc (d2, d2), ``xy`` = Xc^T Yc (d1, d2), and the squared row
    norms ``kx`` = diag(Xc Xc^T) (n,) and ``ky`` (n,) (the diagonals of the
    n x n Gram matrices, needed by the unbiased HSIC; computed in float64).
    Products in ``dtype``, accumulated in float64 over blocks of rows when the
    centred copy is too large to make in one piece (see :func:`_centred_pieces`).
    On CPU outside autograd the products run through numpy's BLAS instead
    (:mod:`stir.similarity._numpy_blas`: syrk for Xc^T Xc and Yc^T Yc).
    """
    if numpy_blas_applies(x, y):
        return numpy_moments(x, y, xx=xx, yy=yy, xy=xy, row_norms=row_norms, dtype=dtype, rows=_piece_rows(x, y, dtype))
    d1 = x.shape[1]
    acc: dict[str, Tensor | None] = {k: None for k, want in (("xx", xx), ("yy", yy), ("xy", xy)) if want}
    kxs, kys = [], []
    for zt, kx, ky in _centred_pieces(x, y, dtype, row_norms):
        xt, yt = zt[:d1], zt[d1:]  # (d1, b), (d2, b)
        for key, a, b in (("xx", xt, xt), ("yy", yt, yt), ("xy", xt, yt)):
            if key in acc:
                acc[key] = _accumulate(acc[key], a, b.T)
        if row_norms:
            kxs.append(kx)
            kys.append(ky)
    out = {k: v for k, v in acc.items()}
    if row_norms:
        out["kx"], out["ky"] = torch.cat(kxs), torch.cat(kys)
    return out  # type: ignore[return-value]


def centred_moment_norms(
    x: Tensor, y: Tensor, *, row_norms: bool = False, dtype: torch.dtype = F64
) -> dict[str, Tensor]:
    """Squared Frobenius norms of the centred second moments of x (n, d1) and y (n, d2), in float64.

    Returns ``xx`` = ||Xc^T Xc||_F^2, ``yy`` = ||Yc^T Yc||_F^2 and
    ``xy`` = ||Xc^T Yc||_F^2 (0-d each), plus the squared row norms ``kx``,
    ``ky`` (n,) if ``row_norms`` (as in :func:`centred_moments`).

    With Z = [Xc, Yc] (n, d1 + d2), the three moments are the blocks of the
    symmetric Z^T Z, so only its upper triangle is formed: for each block of
    ``_BLOCK`` columns Z[:, a:b], one product Z[:, a:b]^T Z[:, a:] (what a
    symmetric rank-k update, which torch does not expose, would do). That is
    n (d1 + d2)^2 / 2 multiply-adds plus the diagonal blocks, against
    n (d1^2 + d1 d2 + d2^2) for three separate products: 2.25 instead of 3
    d x d products at d1 = d2 = 512. Off-diagonal blocks of Xc^T Xc and Yc^T Yc
    count twice in their norms. On CPU outside autograd the three moments go
    through numpy's BLAS instead, whose syrk forms Xc^T Xc and Yc^T Yc at half
    cost: 2 product-units, at a faster GEMM (:mod:`stir.similarity._numpy_blas`).
    """
    if numpy_blas_applies(x, y):
        m = centred_moments(x, y, row_norms=row_norms, dtype=dtype)
        out = {key: torch.dot(m[key].reshape(-1), m[key].reshape(-1)) for key in ("xx", "yy", "xy")}  # ||.||_F^2
        if row_norms:
            out["kx"], out["ky"] = m["kx"], m["ky"]
        return out
    n, d1 = x.shape
    d = d1 + y.shape[1]
    starts = [*range(0, d1, _BLOCK), *range(d1, d, _BLOCK)]  # no block straddles x and y
    ends = [*starts[1:], d]
    acc: list[Tensor | None] = [None] * len(starts)
    kxs, kys = [], []
    for zt, kx, ky in _centred_pieces(x, y, dtype, row_norms):
        for i, (a, b) in enumerate(zip(starts, ends)):
            acc[i] = _accumulate(acc[i], zt[a:b], zt[a:].T)  # (b - a, d - a): Z[:, a:b]^T Z[:, a:]
        if row_norms:
            kxs.append(kx)
            kys.append(ky)
    sq = {"xx": x.new_zeros((), dtype=F64), "yy": x.new_zeros((), dtype=F64), "xy": x.new_zeros((), dtype=F64)}
    for a, b, p in zip(starts, ends, acc):
        w = b - a
        if a < d1:  # columns a:d1 of Xc^T Xc (diagonal block, then the rest twice), then Xc^T Yc
            sq["xx"] += p[:, :w].square().sum() + 2.0 * p[:, w : d1 - a].square().sum()
            sq["xy"] += p[:, d1 - a :].square().sum()
        else:
            sq["yy"] += p[:, :w].square().sum() + 2.0 * p[:, w:].square().sum()
    if row_norms:
        sq["kx"], sq["ky"] = torch.cat(kxs), torch.cat(kys)
    return sq


def prefer_gram(n: int, d1: int, d2: int) -> bool:
    """True when the n x n Gram form is cheaper than the feature-space form.

    Multiply-add counts: feature form n (d1^2 + d1 d2 + d2^2) (three d x d
    products), Gram form n^2 (d1 + d2) (two n x n Grams).
    """
    return n * n * (d1 + d2) < n * (d1 * d1 + d1 * d2 + d2 * d2)


def default_rtol(n: int, d: int) -> float:
    """Relative singular-value tolerance for numerical rank: max(n, d) * eps(float64).

    The same rule as ``numpy.linalg.matrix_rank`` / LAPACK: singular values
    below ``rtol * s_max`` are treated as zero.
    """
    return max(n, d) * torch.finfo(F64).eps


def orthonormal_basis(xc: Tensor, rtol: float | None = None) -> tuple[Tensor, Tensor]:
    """Orthonormal basis of the column space of a centred float64 xc (n, d).

    Returns (Q, s): Q (n, r) the left singular vectors whose singular values
    exceed ``rtol * s_max`` (default :func:`default_rtol`), and s (r,) those
    singular values, descending. r is the numerical rank.
    """
    n, d = xc.shape
    tol = default_rtol(n, d) if rtol is None else float(rtol)
    u, s, _ = torch.linalg.svd(xc, full_matrices=False)  # u (n, min(n,d)), s (min(n,d),)
    rank = int((s > tol * s[0]).sum())
    return u[:, :rank], s[:rank]
