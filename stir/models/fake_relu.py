"""FakeReLU: ReLU in the forward pass, identity in the backward pass (the published STIR inversion).

The original STIR code (built on the robustness library) inverts its CIFAR ResNets with
``fake_relu=True``: the output ReLU of every block of the last stage (layer4) passes the gradient
through as if it were the identity, so a representation whose units are dead (negative
pre-activation) can still be moved. Its VGGs have no such option. The forward value is unchanged,
so residuals and STIR of a given x' are the same; only the optimisation path differs.

A registered network names the ReLUs that can be faked in ``fake_relu_sites`` (module paths of
``OutputReLU`` modules); ``fake_relu(model)`` switches them within a ``with`` block and restores
them after, exceptions included. A model without sites is left as it is.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, List

import torch
from torch import Tensor, nn


class _FakeReLUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:  # noqa: D401 - autograd signature
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        return grad  # identity: the gradient passes where the unit is dead too


class OutputReLU(nn.Module):
    """A ReLU that can be made fake (``fake = True``): same forward, identity gradient."""

    def __init__(self) -> None:
        super().__init__()
        self.fake = False

    def forward(self, x: Tensor) -> Tensor:
        return _FakeReLUFunction.apply(x) if self.fake else torch.relu(x)

    def extra_repr(self) -> str:
        return "fake=True" if self.fake else ""


def fake_relu_sites(model: nn.Module) -> List[OutputReLU]:
    """The ReLUs of ``model`` that the published code fakes during inversion (empty if none)."""
    modules = dict(model.named_modules())
    return [modules[path] for path in getattr(model, "fake_relu_sites", ())]


@contextmanager
def fake_relu(*models: nn.Module, enabled: bool = True) -> Iterator[None]:
    """Within the block, every ``fake_relu_sites`` ReLU of ``models`` is fake (if ``enabled``)."""
    sites = [s for m in models for s in fake_relu_sites(m)] if enabled else []
    previous = [s.fake for s in sites]
    try:
        for s in sites:
            s.fake = True
        yield
    finally:
        for s, was in zip(sites, previous):
            s.fake = was
