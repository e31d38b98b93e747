"""Read the (n, d) representation of a batch at named taps of any network.

Registered networks (``stir.models.Network``) name their taps (``stem``, ``layer2.1``,
``penultimate``, ``logits`` ...) and inner taps (``layer2.1.sum`` ...). Any other ``nn.Module``
taking images in [0, 1] works too: its taps are ``logits`` (the output) and the dotted names of its
submodules (``named_modules()``).

A tap name may end in ``@REDUCE`` to say how a spatial map (n, c, h, w) becomes a vector
(``REDUCTIONS``): no suffix (= ``flatten``) keeps every unit in (c, h, w) order, (n, c*h*w);
``@spatial_mean`` averages over positions, (n, c); ``@original`` reproduces the original STIR
code's ``mean(axis=(1, 2))`` over channels and height, (n, w): a defect of that code (it mixes
channels and keeps the width axis), offered only to compare with its numbers. A reduced tap is a
different representation everywhere: in the inversion objective, the similarity and every key.
"""
from __future__ import annotations

from typing import Dict, Sequence, Tuple

from torch import Tensor, nn

LOGITS = "logits"
REDUCTIONS = ("flatten", "spatial_mean", "original")


class _Captured(Exception):
    """Raised by a hook once every requested tap is read: the rest of the forward pass is skipped."""


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
    return output.flatten(1)  # (b, c, h, w) -> (b, c*h*w); vectors stay (b, d)


def tap_names(model: nn.Module) -> list[str]:
    """The valid tap names of ``model`` (without reductions), in depth order for registered networks."""
    taps = getattr(model, "taps", None)
    if taps:
        return [t.name for t in taps] + [t.name for t in getattr(model, "inner_taps", ())]
    return [name for name, _ in model.named_modules() if name] + [LOGITS]


def _module_path(model: nn.Module, tap: str) -> str | None:
    """Dotted module path for a tap name; None means the model's own output (logits)."""
    taps = getattr(model, "taps", None)
    if taps:
        for t in tuple(taps) + tuple(getattr(model, "inner_taps", ())):
            if t.name == tap:
                return t.module
    elif tap == LOGITS:
        return None
    elif tap in dict(model.named_modules()):
        return tap
    raise ValueError(f"unknown tap {tap!r} for {type(model).__name__}; valid taps: {tap_names(model)}")


def representations(model: nn.Module, x: Tensor, taps: Sequence[str]) -> Dict[str, Tensor]:
    """Representations of the batch ``x`` (b, 3, h, w) at each tap, as {tap: (b, d)}.

    Gradients flow through (inversions differentiate these). The forward pass stops as soon as
    every requested tap has been read, so early taps cost only the layers below them.
    """
    parsed = {tap: split_reduction(tap) for tap in taps}
    paths = {tap: _module_path(model, name) for tap, (name, _) in parsed.items()}
    modules = dict(model.named_modules())
    out: Dict[str, Tensor] = {}
    handles = []

    def hook_for(tap: str):
        reduce = parsed[tap][1]

        def hook(_module, _inputs, output):
            out[tap] = reduce_map(output, reduce)
            if len(out) == len(paths):
                raise _Captured

        return hook

    try:
        for tap, path in paths.items():
            if path is not None:
                handles.append(modules[path].register_forward_hook(hook_for(tap)))
        try:
            logits = model(x)
        except _Captured:
            pass
        else:
            for tap, path in paths.items():
                if path is None:
                    out[tap] = logits
    finally:
        for h in handles:
            h.remove()
    return {tap: out[tap] for tap in taps}


def representation(model: nn.Module, x: Tensor, tap: str) -> Tensor:
    """Representation of ``x`` (b, 3, h, w) at one tap: (b, d). See ``representations``."""
    return representations(model, x, [tap])[tap]
