"""Minibatch linear CKA (Nguyen, Raghu & Kornblith, ICLR 2021)."""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import check_pair
from ._hsic import cka_ratio, linear_hsic_unbiased_terms, resolve_form
from ._linalg import F64

__all__ = ["MinibatchCKA"]


class MinibatchCKA:
    r"""Accumulates linear CKA over minibatches, for n too large to hold at once.

    Nguyen et al. (2021, eq. 2-3) average the unbiased HSIC of Song et al.
    (2012) over k batches and take the CKA ratio of the averages::

        CKA_mb = mean_b HSIC_1(K_b, L_b) / sqrt(mean_b HSIC_1(K_b, K_b) * mean_b HSIC_1(L_b, L_b))

    Each batch's HSIC_1 is an unbiased estimate of the same population HSIC;
    batches of unequal size are averaged with weights proportional to their
    size n_b (a larger batch is a proportionally better estimate; with equal
    sizes this is the paper's plain mean). Every batch counts: the accumulator
    sums, it never keeps only the last batch.

    A single batch gives exactly :func:`linear_cka_debiased` of that batch.

    Usage (torchmetrics-like)::

        metric = MinibatchCKA()
        for xb, yb in loader:          # xb (b, d1), yb (b, d2), b >= 4
            metric.update(xb, yb)
        value = metric.compute()       # 0-d float64 tensor
        metric.reset()

    Invariances and range as :func:`linear_cka_debiased`. Symmetric.
    """

    def __init__(self, *, form: str = "auto") -> None:
        self.form = form
        self.reset()

    def reset(self) -> None:
        """Forget every batch seen so far."""
        # Weighted sums sum_b n_b * HSIC_1 of (x, y), (x, x), (y, y); None until the first batch.
        self._sums: Tensor | None = None
        self._num_samples = 0
        self._num_batches = 0
        self._widths: tuple[int, int] | None = None

    @property
    def num_samples(self) -> int:
        """Total rows seen since the last reset."""
        return self._num_samples

    @property
    def num_batches(self) -> int:
        """Batches seen since the last reset."""
        return self._num_batches

    def update(self, x: Tensor, y: Tensor) -> None:
        """Add one batch: x (b, d1) and y (b, d2), rows paired, b >= 4.

        A batch may be constant on its own (its self-HSIC is then 0); only the
        accumulated result must be non-degenerate.
        """
        measure = "MinibatchCKA.update"
        check_pair(x, y, measure=measure, min_n=4, allow_constant=True)
        widths = (x.shape[1], y.shape[1])
        if self._widths is not None and widths != self._widths:
            raise ValueError(
                f"{measure}: batch has feature widths (d1, d2) = {widths} but earlier batches had "
                f"{self._widths}; every batch must come from the same two representations"
            )
        b = x.shape[0]
        form = resolve_form(self.form, b, widths[0], widths[1], measure)
        batch = torch.stack(linear_hsic_unbiased_terms(x, y, form)) * b  # (3,) = n_b * HSIC_1
        if self._sums is None:
            self._sums = batch
        else:
            self._sums = self._sums + batch.to(self._sums.device)
        self._widths = widths
        self._num_samples += b
        self._num_batches += 1

    def compute(self) -> Tensor:
        """CKA from the size-weighted mean HSIC over all batches -> 0-d float64 tensor."""
        if self._sums is None:
            raise ValueError("MinibatchCKA.compute: no batches yet; call update(x_batch, y_batch) first")
        hxy, hxx, hyy = (self._sums / self._num_samples).to(F64).unbind()
        return cka_ratio(hxy, hxx, hyy, measure="MinibatchCKA")
