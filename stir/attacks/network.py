"""What an attack differentiates: the network's eval-mode function, optionally as a faster copy.

An attack (PGD, TRADES' KL attack) only needs the input gradient of the network in eval mode, with
its parameters frozen. ``AttackNetwork`` keeps an ``stir.models.fold.InferenceCopy`` of the network
for that: batch norm folded into the convolution before it (``fold_batch_norm``) and / or the copy in
channels-last memory format (``channels_last``, CPU too). Both change the function only by
floating-point rounding (tests/training/test_attack_network.py measures it). The copy is built on
first use on the network's device (rebuilt when the network moved to another device, e.g. after
Lightning's setup) and ``refresh``-ed by the caller whenever the weights may have changed: once per
training step. The training forward and backward stay on the network itself.

With neither option on, the network itself is attacked (inside ``stir.models.frozen``), as before.

``attacked(model)`` wraps a model for the attack code: its inputs are handed over in the model's
memory format, and the input gradient always comes back in the standard (NCHW-contiguous) format,
which torchattacks needs (it ``.view``-s the gradient: a channels-last gradient would raise).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from stir.models.fold import InferenceCopy


def memory_format_of(model: nn.Module) -> torch.memory_format:
    """channels_last when the model's 4-d weights are stored channels-last, else contiguous_format."""
    for p in model.parameters():
        if p.dim() == 4 and p.shape[2] * p.shape[3] > 1 and p.shape[1] > 1:  # unambiguous strides
            if p.is_contiguous(memory_format=torch.channels_last) and not p.is_contiguous():
                return torch.channels_last
            return torch.contiguous_format
    return torch.contiguous_format


class _Layout(torch.autograd.Function):
    """x in ``memory_format`` forward; the gradient back in the standard contiguous format."""

    @staticmethod
    def forward(ctx, x: Tensor, memory_format: torch.memory_format) -> Tensor:
        return x.clone(memory_format=memory_format)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return grad.contiguous(), None


class Attacked(nn.Module):
    """``model`` as the attacks call it: inputs in the model's memory format, NCHW input gradients.

    Always in eval mode (``training`` is False on the wrapper itself, so torchattacks never calls
    ``train()`` on it); has no parameters of its own.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.memory_format = memory_format_of(model)
        self.training = False  # the wrapper only: the model's own modes are left as they are

    def forward(self, x: Tensor) -> Tensor:
        fmt = self.memory_format if x.dim() == 4 else torch.contiguous_format
        return self.model(_Layout.apply(x, fmt))


def attacked(model: nn.Module) -> Attacked:
    return model if isinstance(model, Attacked) else Attacked(model)


class AttackNetwork:
    """The model an attack on ``network`` differentiates (module docstring).

    ``get(network, refresh=True)``: the copy (rebuilt when the network is another object or moved to another device or dtype, its
    weights re-read from the network when ``refresh``), or ``network`` itself when neither
    ``fold_batch_norm`` nor ``channels_last`` is on. Not an ``nn.Module``: the copy is never part
    of a state dict, a checkpoint or the optimiser's parameters.
    """

    def __init__(self, fold_batch_norm: bool = True, channels_last: bool = True):
        self.fold_batch_norm, self.channels_last = fold_batch_norm, channels_last
        self.copy: Optional[InferenceCopy] = None
        self._where: Optional[tuple] = None  # (device, dtype) the copy was built for

    @property
    def enabled(self) -> bool:
        return self.fold_batch_norm or self.channels_last

    def get(self, network: nn.Module, refresh: bool = True) -> nn.Module:
        if not self.enabled:
            return network
        where = _where(network)
        # Normal tensors even when called under inference mode (a Lightning validation step): the
        # attack differentiates the copy, and autograd refuses inference tensors.
        with torch.inference_mode(False), torch.no_grad():
            if self.copy is None or self.copy.source is not network or where != self._where:
                # A fresh copy has just read the weights: no refresh needed.
                self.copy = InferenceCopy(network, fold=self.fold_batch_norm, channels_last=self.channels_last)
                self._where = where
            elif refresh:
                self.copy.refresh()
        return self.copy.module


def _where(model: nn.Module) -> Optional[tuple]:
    """(device, dtype) of the model's first parameter: a copy made elsewhere is rebuilt."""
    for t in model.parameters():
        return t.device, t.dtype
    return None
