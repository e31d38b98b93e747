"""Unflattened feature maps at named taps, read with forward hooks.

``stir.models.representation`` flattens every map to (n, d); equivariance needs the map's
spatial layout, (n, c, h', w'), to transform it. Tap names are those of ``stir.models.tap_names``
("logits" = the model's output).
"""
from __future__ import annotations

from typing import Dict, Sequence

import torch
from torch import Tensor, nn

from stir.models import frozen, tap_names

LOGITS = "logits"


def _module_path(model: nn.Module, tap: str):
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


def feature_maps(model: nn.Module, x: Tensor, taps: Sequence[str], batch_size: int = 250) -> Dict[str, Tensor]:
    """{tap: output of the tap's module for x}: (n, c, h', w') for spatial taps, (n, d) for vectors.

    Runs under no_grad with the model frozen in eval mode (every mode restored), in chunks.
    """
    paths = {tap: _module_path(model, tap) for tap in taps}
    modules = dict(model.named_modules())
    chunks: Dict[str, list] = {tap: [] for tap in taps}
    handles = []

    def hook_for(tap: str):
        def hook(_module, _inputs, output):
            chunks[tap].append(output.detach())
        return hook

    with frozen(model), torch.no_grad():
        try:
            for tap, path in paths.items():
                if path is not None:
                    handles.append(modules[path].register_forward_hook(hook_for(tap)))
            for s in range(0, x.shape[0], batch_size):
                logits = model(x[s:s + batch_size])
                for tap, path in paths.items():
                    if path is None:
                        chunks[tap].append(logits.detach())
        finally:
            for h in handles:
                h.remove()
    return {tap: torch.cat(chunks[tap]) for tap in taps}
