"""Linear regression fit R^2 (Kornblith et al., ICML 2019, section 4)."""

from __future__ import annotations

from torch import Tensor

from ._checks import check_pair
from ._linalg import centred, orthonormal_basis
from .spec import KORNBLITH, RIGID, measure

__all__ = ["linear_regression"]


@measure(family="regression", symmetric=False, distance=False, range=(0, 1), identity=1.0, invariances=RIGID,
         reference=KORNBLITH, judging_default=True)
def linear_regression(x: Tensor, y: Tensor, *, rtol: float | None = None) -> Tensor:
    r"""R^2 of the least-squares prediction of the centred x from the centred y.

    ::

        R^2_LR(X <- Y) = 1 - min_B ||Xc - Yc B||_F^2 / ||Xc||_F^2 = ||Qy^T Xc||_F^2 / ||Xc||_F^2

    (Kornblith et al. 2019, section 4), with Qy (n, r) an orthonormal basis of
    the column space of Yc from its SVD; r is the numerical rank with relative
    tolerance ``rtol`` (default max(n, d2) * eps(float64)), so collinear
    columns of y are handled. This is the in-sample R^2: if y's columns span
    every centred direction (rank n - 1, e.g. d2 >= n - 1) the fit is exact and
    the result is 1 by construction.

    Asymmetric: predicts x from y; linear_regression(x, y) != linear_regression(y, x).
    Shapes: x (n, d1), y (n, d2), n >= 2 -> 0-d float64 tensor.
    Invariant to: invertible linear maps of y; orthogonal transforms and
    isotropic scaling of x; translations. Not invariant to non-orthogonal maps of x.
    Range: [0, 1]; 1 for identical representations.
    """
    check_pair(x, y, measure="linear_regression")
    xc = centred(x)  # (n, d1)
    qy, _ = orthonormal_basis(centred(y), rtol)  # (n, r)
    explained = (qy.T @ xc).square().sum()
    return (explained / xc.square().sum()).clamp(max=1.0)
