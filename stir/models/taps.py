"""Read the (n, d) representation of a batch at named taps of any network.

Registered networks (``stir.models.Network``) name their taps (``stem``, ``layer2.1``,
``penultimate``, ``logits`` ...). Any other ``nn.Module`` taking images in [0, 1] works too: its
taps are ``logits`` (the output), the dotted names of its submodules (``named_modules()``: the
module's output, by forward hook) and ``NAME:input`` (the first input a module receives, by
forward pre-hook: ``fc:input`` is the vector a final linear layer classifies, even when the
network computes that vector functionally in its ``forward``).

A model may also carry ``named_taps``, a dict {name: ``TapPoint``}, read before anything else
(models from ``stir.models.sources`` put their ``penultimate`` there, possibly a function tap),
and ``inner``, the network it wraps: module names are then those of ``inner`` (torchvision's
``layer4.1``, not the wrapper's ``net.layer4.1``; both are accepted).
Registered networks may also name inner taps (``inner_taps``: readable, not in the depth list).

The one tap reader of the project: ``representations`` / ``representation`` give (b, d) vectors
(differentiable: inversions use them), ``read_taps`` the unreduced tensors (feature maps for
equivariance, the input of a stitching layer), ``collect`` either of them for many images in chunks
without gradient (measurements), ``run_from`` the logits of a model whose tap is replaced (the
back half of a stitched network). Every reader takes every tap form above.

A tap name may end in ``@REDUCE`` to say how a spatial map (n, c, h, w) becomes a vector
(``REDUCTIONS``): no suffix (= ``flatten``) keeps every unit in (c, h, w) order, (n, c*h*w);
``@spatial_mean`` averages over positions, (n, c); ``@original`` reproduces the original STIR
code's ``mean(axis=(1, 2))`` over channels and height, (n, w): a defect of that code (it mixes
channels and keeps the width axis), offered only to compare with its numbers. A reduced tap is a
different representation everywhere: in the inversion objective, the similarity and every key.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from stir.models.modes import frozen
from stir.models.probe import check_tap_output

LOGITS = "logits"
INPUT = "input"  # NAME:input reads the first positional input of module NAME
REDUCTIONS = ("flatten", "spatial_mean", "original")

# A function tap: (the model as ``representations`` receives it, x (b, c, h, w) in [0, 1]) -> (b, d).
TapFn = Callable[[nn.Module, Tensor], Tensor]


@dataclass(frozen=True)
class TapPoint:
    """Where one representation is read.

    ``module`` (a dotted path of the model's ``named_modules()``) with ``at`` = "output" (forward
    hook) or "input" (forward pre-hook); or ``fn`` (a function of the model and the batch); or
    neither: the model's output (logits). ``spec`` is a stable text describing it (identities).
    """

    module: Optional[str] = None
    at: str = "output"
    fn: Optional[TapFn] = None
    spec: str = LOGITS


def split_reduction(tap: str) -> Tuple[str, str]:
    """'layer1.0.sum@spatial_mean' -> ('layer1.0.sum', 'spatial_mean'); no suffix -> 'flatten'."""
    name, sep, reduce = tap.partition("@")
    if not sep:
        return tap, "flatten"
    if reduce not in REDUCTIONS:
        raise ValueError(f"unknown reduction {reduce!r} in tap {tap!r}; choose one of {REDUCTIONS}")
    return name, reduce


def with_reduction(tap: str, reduce: str) -> str:
    """The tap name that reads ``tap`` reduced by ``reduce`` ('flatten' adds no suffix)."""
    if reduce not in REDUCTIONS:
        raise ValueError(f"unknown reduction {reduce!r}; choose one of {REDUCTIONS}")
    return tap if reduce == "flatten" else f"{tap}@{reduce}"


def reduce_map(output: Tensor, reduce: str) -> Tensor:
    """(b, ...) -> (b, d): flatten, or for (b, c, h, w) maps the spatial or original-code mean."""
    if output.dim() == 4 and reduce == "spatial_mean":
        return output.mean(dim=(2, 3))  # (b, c)
    if output.dim() == 4 and reduce == "original":
        return output.mean(dim=(1, 2))  # (b, w): over channels and height, as the original code
    if output.dim() == 1:
        return output.unsqueeze(1)  # (b,) -> (b, 1): one number per image
    return output.flatten(1)  # (b, c, h, w) -> (b, c*h*w); vectors stay (b, d)


class _Captured(Exception):
    """Raised by a hook once every requested tap is read: the rest of the forward pass is skipped."""


def _inner(model: nn.Module) -> tuple[nn.Module, str]:
    """(the network whose module names users give, its path prefix inside ``model``)."""
    inner = getattr(model, "inner", None)
    if isinstance(inner, nn.Module) and inner is not model:
        for name, module in model.named_modules():
            if module is inner:
                return inner, name + "."
    return model, ""


def tap_names(model: nn.Module) -> list[str]:
    """The valid tap names of ``model``, in depth order for registered networks.

    Any module name also works as ``NAME:input`` (not listed, to keep the list readable).
    """
    named = list(getattr(model, "named_taps", None) or {})
    taps = getattr(model, "taps", None)
    if taps:
        declared = tuple(taps) + tuple(getattr(model, "inner_taps", ()))
        return named + [t.name for t in declared if t.name not in named]
    inner, _ = _inner(model)
    return named + [name for name, _ in inner.named_modules() if name and name not in named] + [LOGITS]


def tap_point(model: nn.Module, tap: str) -> TapPoint:
    """Where ``tap`` is read in ``model``; ValueError listing the valid taps when it names nothing."""
    named = getattr(model, "named_taps", None) or {}
    if tap in named:
        return named[tap]
    taps = getattr(model, "taps", None)
    if taps:  # a registered network: its declared taps (and inner taps) only
        for t in tuple(taps) + tuple(getattr(model, "inner_taps", ())):
            if t.name == tap:
                return TapPoint(module=t.module, spec=tap)
    elif tap == LOGITS:
        return TapPoint()
    else:
        name, at = (tap[: -len(INPUT) - 1], INPUT) if tap.endswith(":" + INPUT) else (tap, "output")
        modules = dict(model.named_modules())
        _, prefix = _inner(model)
        for path in (name, prefix + name) if prefix else (name,):
            if path and path in modules:
                return TapPoint(module=path, at=at, spec=tap)
    raise ValueError(f"unknown tap {tap!r} for {type(model).__name__}; valid taps: {tap_names(model)}"
                     + (" (any module name also as NAME:input)" if not taps else ""))


def read_taps(model: nn.Module, x: Tensor, taps: Sequence[str]) -> Dict[str, Tensor]:
    """The unreduced tensor at each tap for the batch ``x`` (b, 3, h, w): {tap: (b, c, h', w') or (b, d)}.

    Gradients flow through. The forward pass stops as soon as every hooked tap has been read, so
    early taps cost only the layers below them; function taps are computed by their own call.
    A ``@REDUCE`` suffix is not applied here (``representations`` applies it).
    """
    points = {tap: tap_point(model, split_reduction(tap)[0]) for tap in taps}
    out = _hooked_outputs(model, x, points)
    for tap, p in points.items():
        if p.fn is not None:
            value = p.fn(model, x)
            if not isinstance(value, Tensor) or value.dim() < 2 or value.shape[0] != x.shape[0]:
                shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
                raise ValueError(f"function tap {p.spec!r} must return a ({x.shape[0]}, ...) tensor, got {shape}")
            out[tap] = value
    return {tap: out[tap] for tap in taps}


def refuse_script_module(model: nn.Module, module: nn.Module, name: str, what: str) -> None:
    """ValueError in one line when ``module`` (``name`` in ``model``) is TorchScript: a
    ``torch.jit.ScriptModule`` refuses forward hooks (and runs its submodules inside the TorchScript
    interpreter, where no Python hook fires), so no representation inside it can be read."""
    if isinstance(module, torch.jit.ScriptModule):
        raise ValueError(f"{what}: module {name or '(the model itself)'!r} of {type(model).__name__} is TorchScript "
                         "(torch.jit.ScriptModule), which refuses forward hooks, so no tap inside it can be read; load "
                         "the eager nn.Module it was scripted from (its logits, tap 'logits', can still be read)")


def _hooked_outputs(model: nn.Module, x: Tensor, points: Dict[str, TapPoint]) -> Dict[str, Tensor]:
    """{tap: tensor} of the module taps (forward hooks / pre-hooks) and the output tap, one pass."""
    hooked = {tap: p for tap, p in points.items() if p.module is not None}
    wants_output = any(p.module is None and p.fn is None for p in points.values())
    out: Dict[str, Tensor] = {}
    if not hooked and not wants_output:
        return out
    modules = dict(model.named_modules())

    def store(tap: str, value: Tensor) -> None:
        if not isinstance(value, Tensor):
            raise ValueError(f"tap {tap!r} read a {type(value).__name__}, not a tensor; choose another module")
        check_tap_output(value, tap, x.shape[0], model)  # one row per image: a 0-d output is named here
        out[tap] = value
        if not wants_output and all(t in out for t in hooked):
            raise _Captured  # every tap is read: skip the rest of the forward pass

    def hook_for(tap: str, point: TapPoint):
        refuse_script_module(model, modules[point.module], point.module, f"tap {tap!r}")
        if point.at == INPUT:
            def pre_hook(_module, inputs):
                if not inputs:
                    raise ValueError(f"tap {tap!r}: the module received no positional input")
                store(tap, inputs[0])
            return modules[point.module].register_forward_pre_hook(pre_hook)
        return modules[point.module].register_forward_hook(lambda _m, _i, output: store(tap, output))

    handles: List = []
    try:
        handles = [hook_for(tap, p) for tap, p in hooked.items()]
        try:
            logits = model(x)
        except _Captured:
            pass
        else:
            outputs = {tap: logits for tap, p in points.items() if p.module is None and p.fn is None}
            for tap in outputs:
                if not isinstance(logits, Tensor):
                    raise ValueError(f"tap {tap!r}: the model returned a {type(logits).__name__}, not a tensor")
                check_tap_output(logits, tap, x.shape[0], model)
            out.update(outputs)
    finally:
        for h in handles:
            h.remove()
    missing = [t for t in hooked if t not in out]
    if missing:
        raise ValueError(f"taps {missing} of {type(model).__name__} were never reached by its forward pass "
                         f"(the module is not used); valid taps: {tap_names(model)}")
    return out


def representations(model: nn.Module, x: Tensor, taps: Sequence[str]) -> Dict[str, Tensor]:
    """Representations of the batch ``x`` (b, 3, h, w) at each tap, as {tap: (b, d)}.

    ``read_taps`` with each tap's reduction applied (``@REDUCE``; default: flatten). Gradients flow
    through (inversions differentiate these).
    """
    raw = read_taps(model, x, taps)
    return {tap: reduce_map(raw[tap], split_reduction(tap)[1]) for tap in taps}


def collect(model: nn.Module, x: Tensor, taps: Sequence[str], batch_size: int, *, reduce: bool = True,
            dtype: Optional[torch.dtype] = None, device: Optional[torch.device] = None) -> Dict[str, Tensor]:
    """The taps of ``model`` for many images x (n, 3, h, w), read in chunks of ``batch_size`` without
    gradient, the model frozen in eval mode (every mode restored): {tap: (n, d)}, or with
    ``reduce=False`` the unreduced {tap: (n, ...)}; each cast to ``dtype`` / moved to ``device``
    when given (e.g. float64 on the CPU for the similarity measures)."""
    read = representations if reduce else read_taps
    taps = list(dict.fromkeys(taps))  # a tap asked for twice is read once
    chunks: Dict[str, List[Tensor]] = {tap: [] for tap in taps}
    with frozen(model), torch.no_grad():
        for s in range(0, x.shape[0], batch_size):
            for tap, value in read(model, x[s:s + batch_size], list(taps)).items():
                chunks[tap].append(value.detach().to(dtype=dtype or value.dtype, device=device or value.device))
    return {tap: torch.cat(c) for tap, c in chunks.items()}


def run_from(model: nn.Module, x: Tensor, tap: str, replacement: Tensor) -> Tensor:
    """Logits of ``model`` on x (b, 3, h, w) with the tensor at ``tap`` replaced by ``replacement``.

    The back half of a stitched network, B[tap:]: a module tap's output (forward hook) or a
    ``NAME:input`` tap's input (forward pre-hook) is swapped for ``replacement``, which must have the
    tap's own shape (ValueError otherwise); gradients flow from the logits into ``replacement``.
    The layers before the tap still run on x (their result is discarded), which is exact for any
    network whose forward uses the tapped tensor only through what follows it (sequential at block
    granularity, as the registered networks are). Function taps and the output cannot be replaced.
    """
    point = tap_point(model, split_reduction(tap)[0])
    if point.module is None:
        raise ValueError(f"cannot run {type(model).__name__} from tap {tap!r}: only a module's output or input "
                         f"can be replaced (a function tap or the output has nothing after it to run)")
    module = dict(model.named_modules())[point.module]
    refuse_script_module(model, module, point.module, f"run from tap {tap!r}")

    def check(value: Tensor) -> Tensor:
        if value.shape != replacement.shape:
            raise ValueError(f"tap {tap!r} holds {tuple(value.shape)}, the replacement is {tuple(replacement.shape)}")
        return replacement

    if point.at == INPUT:
        handle = module.register_forward_pre_hook(lambda _m, inputs: (check(inputs[0]), *inputs[1:]))
    else:
        handle = module.register_forward_hook(lambda _m, _i, output: check(output))
    try:
        return model(x)
    finally:
        handle.remove()


def representation(model: nn.Module, x: Tensor, tap: str) -> Tensor:
    """Representation of ``x`` (b, 3, h, w) at one tap: (b, d). See ``representations``."""
    return representations(model, x, [tap])[tap]


def find_penultimate(model: nn.Module, x: Tensor) -> str:
    """The tap ``NAME:input`` of the final linear layer of ``model``, found by one forward pass on ``x``.

    Every ``nn.Linear`` is watched; the last one called whose output has the shape of the
    model's output is the classifier, and its input (read by a forward pre-hook) is the
    penultimate representation, however the network computed it. ValueError listing candidate
    module names when there is none (e.g. a functional ``F.linear`` head): pass an explicit tap.
    """
    calls: List[tuple] = []
    handles = [m.register_forward_hook(lambda mod, _i, o, name=name: calls.append((name, tuple(getattr(o, "shape", ())))))
               for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    try:
        logits = model(x)
    finally:
        for h in handles:
            h.remove()
    shape = tuple(getattr(logits, "shape", ()))
    for name, out_shape in reversed(calls):
        if out_shape == shape:
            return f"{name}:{INPUT}"
    for name, m in model.named_modules():  # a classifier inside TorchScript is invisible to hooks: say so
        refuse_script_module(model, m, name, "the penultimate layer cannot be found")
    leaves = [name for name, m in model.named_modules() if name and not any(True for _ in m.children())]
    raise ValueError(
        f"cannot find the penultimate layer of {type(model).__name__}: no nn.Linear produces its output "
        f"{shape}. Give the tap explicitly (a module name, NAME:input, or python:module:function); "
        f"candidates, last modules first: {leaves[::-1][:12]}"
    )
