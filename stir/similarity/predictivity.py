"""Cross-validated linear predictivity: ridge regression scored out of fold (Yamins et al. 2014; Schrimpf et al. 2018)."""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import check_pair
from ._linalg import F64, centred, centred_moments, column_mean, work_dtype
from .spec import INF, NO_SCALE, declare, measure

__all__ = ["fold_bounds", "linear_predictivity"]

_SCORES = ("r2", "pearson")


def fold_bounds(n: int, folds: int) -> list[tuple[int, int]]:
    """Contiguous folds [start, stop) as ``sklearn.model_selection.KFold(folds)`` (no shuffle).

    The first n % folds folds have n // folds + 1 samples, the rest n // folds.
    """
    sizes = [n // folds + (1 if f < n % folds else 0) for f in range(folds)]
    bounds, start = [], 0
    for size in sizes:
        bounds.append((start, start + size))
        start += size
    return bounds


def _ridge_fold_primal(
    yt: Tensor, xt: Tensor, n: int, gram: Tensor, cross: Tensor, alpha: float
) -> Tensor:
    """Ridge predictions (n_test, d1) of the test rows, fitted with an intercept on the other rows.

    yt (n_test, d2), xt (n_test, d1): the test rows centred by the means over all n rows,
    so the training sums are minus the test sums; gram = Yc^T Yc (d2, d2) and
    cross = Yc^T Xc (d2, d1) over all rows. The training moments are those minus the
    test block's, centred by the training means: one (n_test, d2) product per fold
    instead of an (n_train, d2) one.
    """
    m = n - yt.shape[0]
    my, mx = -yt.sum(dim=0) / m, -xt.sum(dim=0) / m  # training means
    g = gram - yt.T @ yt - m * torch.outer(my, my)  # (d2, d2) centred training Gram
    g.diagonal().add_(alpha)
    c = cross - yt.T @ xt - m * torch.outer(my, mx)  # (d2, d1)
    return (yt - my) @ torch.linalg.solve(g, c) + mx


def _ridge_fold_dual(yc: Tensor, xc: Tensor, k: Tensor, test: slice, alpha: float) -> Tensor:
    """As :func:`_ridge_fold_primal` through the (n_train, n_train) kernel, from k = yc yc^T (n, n) (d2 > n).

    (Ytr^T Ytr + alpha I)^{-1} Ytr^T = Ytr^T (Ytr Ytr^T + alpha I)^{-1}, with the Gram centred
    by the training means: (y_i - m).(y_j - m) = k_ij - kbar_i - kbar_j + kbar.
    """
    n = yc.shape[0]
    train = torch.ones(n, dtype=torch.bool, device=yc.device)
    train[test] = False
    xtr = xc[train]
    mx = xtr.mean(dim=0)
    kbar = k[:, train].mean(dim=1)  # (n,): mean over training j of k_ij
    kk = kbar[train].mean()
    ktr = k[train][:, train] - kbar[train][:, None] - kbar[train][None, :] + kk  # (m, m)
    kte = k[test][:, train] - kbar[test][:, None] - kbar[train][None, :] + kk  # (n_test, m)
    ktr.diagonal().add_(alpha)
    return kte @ torch.linalg.solve(ktr, xtr - mx) + mx


@measure(family="predictivity", symmetric=False, distance=False, range=(-INF, 1), identity=None,
         invariances=NO_SCALE, reference="scikit-learn 1.9.1 Ridge + KFold", min_n=10, judging_default=True)
def linear_predictivity(
    x: Tensor, y: Tensor, *, alpha: float = 1.0, folds: int = 5, score: str = "r2"
) -> Tensor:
    r"""Out-of-fold ridge prediction of x from y (the neural-predictivity score of Yamins et al. 2014).

    For each of ``folds`` contiguous folds (``sklearn.model_selection.KFold``,
    no shuffle), ridge regression with an intercept (``sklearn.linear_model.Ridge(alpha)``:
    min_B ||Xtr - 1 b^T - Ytr B||_F^2 + alpha ||B||_F^2) is fitted on the other folds
    and predicts the held-out rows; the out-of-fold predictions X^ (n, d1) are scored::

        r2:      1 - sum_ij (x_ij - x^_ij)^2 / sum_ij (x_ij - mean_i x_ij)^2
                 (sklearn's r2_score(X, X^, multioutput="variance_weighted"))
        pearson: mean over the columns j of x with nonzero variance of r(x^_.j, x_.j)
                 (Brain-Score's per-neuron Pearson r, averaged)

    x is the target and y the predictor, as in :func:`linear_regression`. alpha is
    on the unscaled sum of squares (sklearn's convention), so the score depends on
    the scale of y. Ridge is solved in the primal (d2 x d2; the moments over all rows
    are formed once and each fold's test block subtracted) or, for d2 > n, the dual
    (n x n) form; one loop over the folds, none over samples.

    Asymmetric. Shapes: x (n, d1), y (n, d2), n >= 2 * folds -> 0-d float64 tensor.
    Invariant to: translations, permutations of neurons, orthogonal transforms of y
    (and for "r2" of x). Not to scaling of y (it rescales the penalty).
    Range: r2 (-inf, 1], pearson [-1, 1]; close to 1, not exactly 1, for identical
    representations (the held-out fit is regularised).
    """
    measure = "linear_predictivity"
    if not isinstance(folds, int) or folds < 2:
        raise ValueError(f"{measure}: folds must be an integer >= 2, got {folds!r}")
    check_pair(x, y, measure=measure, min_n=2 * folds)
    if score not in _SCORES:
        raise ValueError(f"{measure}: score must be 'r2' or 'pearson', got {score!r}")
    if not alpha > 0:
        raise ValueError(f"{measure}: alpha (ridge penalty) must be > 0, got {alpha}")
    n, d2 = y.shape
    if d2 > n:
        xc, yc = centred(x), centred(y)  # (n, d1), (n, d2) float64; centring changes no prediction
        k = yc @ yc.T  # (n, n)
        pred = torch.empty_like(xc)
        for start, stop in fold_bounds(n, folds):
            pred[start:stop] = _ridge_fold_dual(yc, xc, k, slice(start, stop), alpha)
    else:
        # Yc^T Yc (d2, d2) and Xc^T Yc over all rows, once, in the work dtype summed in float64
        # (numpy's syrk on CPU); the penalty alpha I bounds the conditioning of the solve.
        m = centred_moments(x, y, xx=False, row_norms=False, dtype=work_dtype(x, y))
        mx, my = column_mean(x), column_mean(y)
        xc = x.to(F64) - mx  # (n, d1) the targets, for the score
        pred = torch.empty_like(xc)
        for start, stop in fold_bounds(n, folds):
            yt = y[start:stop].to(F64) - my  # (n_test, d2) centred test rows
            pred[start:stop] = _ridge_fold_primal(yt, xc[start:stop], n, m["yy"], m["xy"].T, alpha)
    if score == "r2":
        return 1.0 - (xc - pred).square().sum() / xc.square().sum()
    pc = pred - pred.mean(dim=0)
    num = (pc * xc).sum(dim=0)
    den = torch.linalg.vector_norm(pc, dim=0) * torch.linalg.vector_norm(xc, dim=0)
    live = den > 0  # constant target columns (or constant predictions) have no correlation
    return (num[live] / den[live]).mean()


declare("linear_predictivity_r", linear_predictivity, options={"score": "pearson"}, family="predictivity",
        symmetric=False, distance=False, range=(-1, 1), identity=None, invariances={"translation", "permutation"},
        reference="scikit-learn 1.9.1 Ridge + KFold", min_n=10, judging_default=True)
