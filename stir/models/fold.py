"""Batch norm folded into the convolution before it, in an eval-mode copy of a network.

In eval mode a batch norm is an affine map per channel. After a convolution y = W * x + b it gives

    z = gamma * (y - mu) / sqrt(var + eps) + beta = W' * x + b',
    W' = s W (per output channel),   b' = s (b - mu) + beta,   s = gamma / sqrt(var + eps)

so the pair is one convolution (Ioffe & Szegedy 2015; the usual inference-time fusion). Exact in
real arithmetic; in float32 the outputs differ by rounding (W' and b' are computed in float64 and
rounded once). On this project's CPU an input-gradient step of a width-16 ResNet18 costs about
0.64x the unfolded one (docs/benchmarks/levers.md): the batch norm
forward and backward passes are memory-bound and disappear.

``InferenceCopy`` is what the inversion engine and the adversarial-training attack use: a deep copy
of the model, frozen in eval mode, every foldable (conv -> batch norm) pair folded (the batch norm
replaced by ``nn.Identity``, so module names, taps and FakeReLU sites are unchanged), optionally in
channels-last memory format; ``refresh()`` re-reads the source model's current weights (after a
training step). The source model is never changed.

A pair is foldable when the convolution's output feeds only the batch norm (found by tracing the
model with ``torch.fx``), the batch norm tracks running statistics and the convolution is not read
by a tap (``keep``). A model that ``torch.fx`` cannot trace is copied without folding (logged).
"""
from __future__ import annotations

import copy
import logging
from typing import Iterable, List, Optional, Tuple

import torch
from torch import nn

log = logging.getLogger(__name__)

_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
CONVOLUTIONS = _CONVS
_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


class _Tracer(torch.fx.Tracer):
    """Keeps every custom module opaque too: only the data flow between modules is needed."""

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return isinstance(m, _CONVS + _NORMS) or super().is_leaf_module(m, qualname)


def conv_bn_pairs(model: nn.Module, keep: Iterable[str] = ()) -> List[Tuple[str, str]]:
    """(conv name, batch-norm name) pairs of ``model`` that can be folded, in graph order.

    ``keep``: module names whose output must stay as it is (taps): a conv among them is not folded.
    Returns [] when the model cannot be traced.
    """
    keep = set(keep)
    try:
        graph = _Tracer().trace(model)
    except Exception as exc:  # foreign models with data-dependent control flow
        log.info("batch norm not folded for %s: torch.fx cannot trace it (%s)", type(model).__name__, exc)
        return []
    modules = dict(model.named_modules())
    pairs = []
    for node in graph.nodes:
        if node.op != "call_module" or not isinstance(modules.get(node.target), _NORMS):
            continue
        source = node.args[0] if node.args else None
        if not isinstance(source, torch.fx.Node) or source.op != "call_module":
            continue
        conv, norm = modules.get(source.target), modules[node.target]
        if (isinstance(conv, _CONVS) and len(source.users) == 1 and not keep & {source.target, node.target}
                and norm.track_running_stats and norm.running_mean is not None
                and conv.out_channels == norm.num_features):
            pairs.append((source.target, node.target))
    return pairs


def _folded(conv: nn.Module, norm: nn.Module) -> Tuple[torch.Tensor, torch.Tensor]:
    """(W', b') of the pair in the conv weight's dtype, computed in float64."""
    w = conv.weight.detach().double()
    b = conv.bias.detach().double() if conv.bias is not None else torch.zeros(w.shape[0], dtype=torch.float64,
                                                                           device=w.device)
    gamma = norm.weight.detach().double() if norm.weight is not None else torch.ones_like(b)
    beta = norm.bias.detach().double() if norm.bias is not None else torch.zeros_like(b)
    s = gamma / (norm.running_var.detach().double() + norm.eps).sqrt()  # (c_out,)
    w_folded = w * s.view(-1, *([1] * (w.dim() - 1)))
    b_folded = s * (b - norm.running_mean.detach().double()) + beta
    return w_folded.to(conv.weight.dtype), b_folded.to(conv.weight.dtype)


def _set(root: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, last = name.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, last, module)


class InferenceCopy:
    """A frozen eval-mode copy of ``source`` for input-gradient work (inversions, attacks).

    ``fold``: fold every foldable (conv -> batch norm) pair (module docstring; ``pairs`` when already
    found by ``conv_bn_pairs``); ``channels_last``:
    parameters in channels-last memory format (feed channels-last inputs too). ``module`` is the
    copy; ``pairs`` the folded pairs. Values equal the source's up to floating-point rounding.
    """

    def __init__(self, source: nn.Module, *, fold: bool = True, channels_last: bool = False,
                 keep: Iterable[str] = (), pairs: Optional[List[Tuple[str, str]]] = None):
        self.source = source
        modes = [(m, m.training) for m in source.modules()]  # per module: restored exactly, not flattened
        source.eval()  # trace and copy the eval-mode network
        try:
            self.pairs = ([] if not fold else pairs if pairs is not None else conv_bn_pairs(source, keep))
            self.module = copy.deepcopy(source)
        finally:
            for m, training in modes:
                m.training = training
        self.channels_last = channels_last
        for conv_name, norm_name in self.pairs:
            conv = self.module.get_submodule(conv_name)
            if conv.bias is None:
                conv.bias = nn.Parameter(torch.zeros(conv.out_channels, dtype=conv.weight.dtype,
                                                     device=conv.weight.device))
            _set(self.module, norm_name, nn.Identity())
        self.module.eval()
        self.module.requires_grad_(False)
        if channels_last:
            self.module.to(memory_format=torch.channels_last)
        self.refresh()

    @torch.no_grad()
    def refresh(self) -> "InferenceCopy":
        """Re-read the source's current parameters and buffers (e.g. after an optimiser step)."""
        folded = {name for pair in self.pairs for name in pair}
        own = dict(self.module.named_parameters())
        own.update(self.module.named_buffers())
        for name, value in list(self.source.named_parameters()) + list(self.source.named_buffers()):
            module_name = name.rpartition(".")[0]
            if module_name in folded or name not in own:
                continue
            own[name].copy_(value)
        for conv_name, norm_name in self.pairs:
            w, b = _folded(self.source.get_submodule(conv_name), self.source.get_submodule(norm_name))
            conv = self.module.get_submodule(conv_name)
            conv.weight.copy_(w)  # copy_ keeps the copy's memory format
            conv.bias.copy_(b)
        return self
