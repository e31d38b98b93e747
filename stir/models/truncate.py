"""A network cut at one tap, without hooks: the graph ``torch.compile`` can take whole.

``representations`` reads a tap by a forward hook and stops the pass with an exception; that is
right for eager use, but ``torch.compile`` breaks its graph at both. ``TapForward(model, tap)``
instead traces the model with ``torch.fx`` (the tap's module and FakeReLU sites kept as opaque
modules), makes the tap's value the graph's output and drops everything after it: the forward pass
to the tap as one graph. It exposes the tap through ``named_taps`` (a function tap), so
``stir.models.representation(TapForward(m, tap), x, tap)`` equals ``representation(m, x, tap)``
(reductions such as ``@spatial_mean`` are applied outside, as for any tap), and it carries the
model's ``fake_relu_sites`` so ``stir.models.fake_relu`` still reaches them (a FakeReLU spec naming
modules of the original model resolves against the cut graph: ``inner``, ``dropped_modules``).

``compiled(tap_forward)`` wraps its forward in ``torch.compile``; a model fx cannot trace raises
``TypeError`` here, and a compilation that fails at the first call falls back to the eager graph
with a warning (``CompiledOnce``), so an inversion never fails because of the compiler.
"""
from __future__ import annotations

import logging
from typing import Callable, Optional

import torch
from torch import Tensor, fx, nn

from stir.models.fake_relu import OutputReLU
from stir.models.taps import INPUT, TapPoint, split_reduction, tap_point

log = logging.getLogger(__name__)


class _Tracer(fx.Tracer):
    def __init__(self, opaque: set):
        super().__init__()
        self.opaque = opaque

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return qualname in self.opaque or isinstance(m, OutputReLU) or super().is_leaf_module(m, qualname)


class TapForward(nn.Module):
    """``model`` up to ``tap`` (no reduction suffix): forward(x (b, c, h, w)) -> the tap's raw value."""

    def __init__(self, model: nn.Module, tap: str):
        super().__init__()
        name, _ = split_reduction(tap)
        point = tap_point(model, name)
        if point.module is None:
            raise TypeError(f"tap {tap!r} is not a module's output or input: nothing to cut at")
        tracer = _Tracer({point.module})
        try:
            graph = tracer.trace(model)
        except Exception as exc:
            raise TypeError(f"torch.fx cannot trace {type(model).__name__}: {exc}") from exc
        found = [n for n in graph.nodes if n.op == "call_module" and n.target == point.module]
        if len(found) != 1:
            raise TypeError(f"module {point.module!r} is called {len(found)} times in the traced graph; need once")
        value = found[0].args[0] if point.at == INPUT else found[0]
        for node in list(graph.nodes):
            if node.op == "output":
                graph.erase_node(node)
        graph.output(value)
        self.net = fx.GraphModule(model, graph)
        self.net.graph.eliminate_dead_code()  # everything after the tap
        self.net.recompile()
        self.net.delete_all_unused_submodules()
        self.tap_name = name
        self.named_taps = {name: TapPoint(fn=lambda module, x: module.net(x), spec=f"{point.spec}|cut")}
        # FakeReLU sites that are still in the cut graph, under this wrapper's path
        kept = dict(self.named_modules())
        self.fake_relu_sites = tuple(f"net.{s}" for s in getattr(model, "fake_relu_sites", ()) if f"net.{s}" in kept)
        self.published_fake_relu = getattr(model, "published_fake_relu", False)
        # Modules of the original that the cut never runs: a FakeReLU spec naming one fakes nothing.
        self.dropped_modules = tuple(n for n, _ in model.named_modules() if n and f"net.{n}" not in kept)

    @property
    def inner(self) -> nn.Module:
        """The cut graph, whose module names are the original model's (FakeReLU specs name them)."""
        return self.net

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class CompiledOnce:
    """``torch.compile(fn)``, or ``fn`` itself if compiling fails at the first call (logged once)."""

    def __init__(self, fn: Callable[[Tensor], Tensor], **compile_kwargs):
        self.eager = fn
        self.compiled: Optional[Callable] = torch.compile(fn, **compile_kwargs)

    def __call__(self, x: Tensor) -> Tensor:
        if self.compiled is not None:
            try:
                return self.compiled(x)
            except Exception as exc:  # a missing C++ compiler, an unsupported op, ...
                log.warning("torch.compile failed (%s: %s); running eagerly", type(exc).__name__, exc)
                self.compiled = None
        return self.eager(x)


def compiled(tap_forward: TapForward, **compile_kwargs) -> TapForward:
    """``tap_forward`` with its graph run through ``torch.compile`` as one graph (``fullgraph``: a
    graph break, which made compiled taps slower than eager ones here, falls back to eager)."""
    runner = CompiledOnce(tap_forward.net, **{"fullgraph": True, **compile_kwargs})
    tap_forward.named_taps = {tap_forward.tap_name: TapPoint(fn=lambda module, x: runner(x),
                                                             spec=tap_forward.named_taps[tap_forward.tap_name].spec)}
    return tap_forward
