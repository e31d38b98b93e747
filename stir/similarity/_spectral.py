"""Singular values and the cross matrix of orthonormal bases, shared by the subspace measures.

For x (n, d1), y (n, d2) (column-centred, or not), with thin SVDs Xc = Ux Sx Vx^T and
Yc = Uy Sy Vy^T restricted to their numerical ranks rx, ry, this module returns
(sx, sy, G) with G = Ux^T Uy (rx, ry). The generalized shape metrics, GULP,
eigenspace overlap and the CCA family are all functions of these three things:
the canonical correlations are the singular values of G, and a (partially)
whitened Xc Z = Ux diag(a(sx)) Vx^T for any spectral map a.

Two exactly equivalent forms, chosen by cost like the CKA forms:
- feature form: eigendecompositions of Xc^T Xc (d1, d1) and Yc^T Yc and the
  cross moment Xc^T Yc; then G = diag(1/sx) Wx^T (Xc^T Yc) Wy diag(1/sy).
- Gram form: eigendecompositions of the n x n Grams Xc Xc^T, Yc Yc^T, whose
  eigenvectors are Ux, Uy; then G = Ux^T Uy.

Numerical rank: eigenvalues lambda <= max(n, d) * eps(float64) * lambda_max are
dropped (the rule of :func:`stir.similarity.procrustes` for its Gram factors):
an eigendecomposition of a Gram matrix is accurate to ~eps * lambda_max, so
smaller eigenvalues are rounding noise. Everything is float64 on the input's device.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._linalg import F64, centred_gram, centred_moments, prefer_gram

__all__ = ["spectral_pair"]


def _keep(lam: Tensor, n: int, d: int) -> Tensor:
    """Boolean mask of the eigenvalues (ascending) inside the numerical rank."""
    return lam > max(n, d) * torch.finfo(F64).eps * lam[-1].clamp(min=0.0)


def _eig_desc(m: Tensor, n: int, d: int) -> tuple[Tensor, Tensor]:
    """(lambda (r,), V (d, r)) of a symmetric PSD m, descending, inside the numerical rank."""
    lam, v = torch.linalg.eigh(m)  # ascending
    keep = _keep(lam, n, d)
    return lam[keep].flip(0), v[:, keep].flip(1)


def spectral_pair(x: Tensor, y: Tensor, *, center: bool = True, form: str = "auto") -> tuple[Tensor, Tensor, Tensor]:
    """(sx (rx,), sy (ry,), G (rx, ry)) for x (n, d1), y (n, d2): see the module docstring.

    sx, sy are the singular values of the (centred if ``center``) inputs, descending,
    within the numerical rank; G = Ux^T Uy. ``form``: "auto", "feature" or "gram".
    """
    n, d1, d2 = x.shape[0], x.shape[1], y.shape[1]
    if form == "auto":
        form = "gram" if prefer_gram(n, d1, d2) else "feature"
    if form == "gram":
        if center:
            k, l = centred_gram(x), centred_gram(y)  # (n, n) each
        else:
            x64, y64 = x.to(F64), y.to(F64)
            k, l = x64 @ x64.T, y64 @ y64.T
        lx, ux = _eig_desc(k, n, d1)  # ux (n, rx): left singular vectors
        ly, uy = _eig_desc(l, n, d2)
        return lx.sqrt(), ly.sqrt(), ux.T @ uy
    if center:
        m = centred_moments(x, y, row_norms=False, dtype=F64)  # Xc^T Xc, Yc^T Yc, Xc^T Yc
        xx, yy, xy = m["xx"], m["yy"], m["xy"]
    else:
        x64, y64 = x.to(F64), y.to(F64)
        xx, yy, xy = x64.T @ x64, y64.T @ y64, x64.T @ y64
    lx, wx = _eig_desc(xx, n, d1)  # wx (d1, rx): right singular vectors
    ly, wy = _eig_desc(yy, n, d2)
    sx, sy = lx.sqrt(), ly.sqrt()
    g = (wx.T @ xy @ wy) / sx[:, None] / sy[None, :]  # Ux^T Uy with Ux = Xc Wx / sx
    return sx, sy, g
