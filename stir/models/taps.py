"""Read the (n, d) representation of a batch at named taps of any network.

Registered networks (``stir.models.Network``) name their taps (``stem``, ``layer2.1``,
``penultimate``, ``logits`` ...). Any other ``nn.Module`` taking images in [0, 1] works too: its
taps are ``logits`` (the output) and the dotted names of its submodules (``named_modules()``).
Spatial maps are flattened in (c, h, w) order, so every representation is (n, d).
"""
from __future__ import annotations

from typing import Dict, Sequence

from torch import Tensor, nn

LOGITS = "logits"


class _Captured(Exception):
    """Raised by a hook once every requested tap is read: the rest of the forward pass is skipped."""


def tap_names(model: nn.Module) -> list[str]:
    """The valid tap names of ``model``, in depth order for registered networks."""
    taps = getattr(model, "taps", None)
    if taps:
        return [t.name for t in taps]
    return [name for name, _ in model.named_modules() if name] + [LOGITS]


def _module_path(model: nn.Module, tap: str) -> str | None:
    """Dotted module path for a tap name; None means the model's own output (logits)."""
    taps = getattr(model, "taps", None)
    if taps:
        for t in taps:
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
    paths = {tap: _module_path(model, tap) for tap in taps}
    modules = dict(model.named_modules())
    out: Dict[str, Tensor] = {}
    handles = []

    def hook_for(tap: str):
        def hook(_module, _inputs, output):
            out[tap] = output.flatten(1)  # (b, c, h, w) -> (b, c*h*w)
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
