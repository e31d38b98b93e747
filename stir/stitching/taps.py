"""Reading a tap's unflattened output, and running a network from a tap on: the two halves of a stitch.

``stir.models.representations`` flattens every representation to (n, d); a stitching layer needs the
map itself, (n, c, h, w) for a spatial tap or (n, d) for a vector tap. Tap names resolve as in
``stir.models.taps``: a registered network's declared taps, or for any other module the dotted name
of a submodule (``named_modules()``). The output tap ``logits`` cannot be stitched (nothing follows it).

"B[tap:]" is implemented by running B on the images with a forward hook on the tapped module that
*replaces* its output (``run_from``). This is exact for any network whose forward uses the tapped
module's output only through what follows it, which holds for the registered CIFAR ResNets and VGGs
(sequential at block granularity: a block's output feeds the next block and nothing else). The price
is that B's layers before the tap still run on the images (their result is discarded); they build
no autograd graph (frozen weights, inputs without grad), so backward costs only B's back.
"""
from __future__ import annotations

from typing import Tuple

from torch import Tensor, nn

LOGITS = "logits"


class _Stop(Exception):
    """Raised by a hook once the tap is read: the rest of the forward pass is skipped."""


def stitchable_taps(model: nn.Module) -> list[str]:
    """Taps a stitch can cut at: the declared taps without ``logits``, or every named submodule."""
    taps = getattr(model, "taps", None)
    if taps:
        return [t.name for t in taps if t.name != LOGITS]
    return [name for name, _ in model.named_modules() if name]


def tap_module(model: nn.Module, tap: str) -> nn.Module:
    """The module whose output is the tap ``tap``; ValueError listing the valid taps otherwise."""
    choices = stitchable_taps(model)
    if tap not in choices:
        raise ValueError(f"cannot stitch {type(model).__name__} at tap {tap!r}; stitchable taps: {choices}")
    taps = getattr(model, "taps", None)
    path = next(t.module for t in taps if t.name == tap) if taps else tap
    return dict(model.named_modules())[path]


def tap_output(model: nn.Module, x: Tensor, tap: str) -> Tensor:
    """The tap's output for images x (b, 3, h, w): (b, c, h', w') or (b, d), unflattened.

    The forward pass stops at the tap. Gradients flow if the caller enables them.
    """
    module = tap_module(model, tap)
    out = []

    def hook(_module, _inputs, output):
        out.append(output)
        raise _Stop

    handle = module.register_forward_hook(hook)
    try:
        model(x)
    except _Stop:
        pass
    finally:
        handle.remove()
    if not out:
        raise RuntimeError(f"tap {tap!r} of {type(model).__name__} was not reached by its forward pass")
    return out[0]


def run_from(model: nn.Module, x: Tensor, tap: str, replacement: Tensor) -> Tensor:
    """Logits of ``model`` on x (b, 3, h, w) with the tap's output replaced by ``replacement``.

    ``replacement`` must have the tap's own shape, (b, c, h', w') or (b, d); a mismatch raises
    ValueError. Gradients flow from the logits into ``replacement``.
    """
    module = tap_module(model, tap)

    def hook(_module, _inputs, output):
        if output.shape != replacement.shape:
            raise ValueError(f"tap {tap!r} outputs {tuple(output.shape)}, the stitching layer gives "
                             f"{tuple(replacement.shape)}")
        return replacement

    handle = module.register_forward_hook(hook)
    try:
        return model(x)
    finally:
        handle.remove()


def tap_shape(model: nn.Module, x: Tensor, tap: str) -> Tuple[int, ...]:
    """The tap's per-image shape, (c, h, w) or (d,), read on a batch x."""
    return tuple(tap_output(model, x, tap).shape[1:])
