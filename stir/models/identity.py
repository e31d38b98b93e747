"""One content hash for every model, loaded or on disk: what names a model in every key.

``content_identity(module)`` is the sha256 of the module's state dict (names in sorted order, each
with its dtype, shape and raw bytes): the same weights and buffers give the same identity in any
process, on any device, from any import path, whichever file or source they came from. It keys the
results store, the inversion cache and every provenance record. The class is not in it: what a
network computes beyond its state dict is fixed by its architecture, which for registered networks
is fixed by the state dict's names and shapes, and for wrapped networks of other sources by the
named-tap definitions their wrapper keeps as a buffer (``stir.models.sources.base.SourcedModel``).

``state_dict_identity(state)`` is the same hash of a state dict read from a file, so a weights
file and the module it loads into have one identity. ``tensor_digest(t)`` hashes one tensor (an
image set) the same way.
"""
from __future__ import annotations

import hashlib
from typing import Mapping

import torch
from torch import Tensor, nn

_PREFIX = b"stir-model-v1\n"


def state_dict_identity(state: Mapping[str, Tensor]) -> str:
    """sha256 hex of a state dict: sorted names, dtypes, shapes and bytes."""
    h = hashlib.sha256(_PREFIX)
    for name, value in sorted(state.items()):
        t = value.detach().cpu().contiguous().reshape(-1)  # 0-d tensors (num_batches_tracked) too
        h.update(f"{name}\n{t.dtype}\n{tuple(value.shape)}\n".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def content_identity(model: nn.Module) -> str:
    """sha256 hex identifying ``model`` by its state dict (``state_dict_identity``)."""
    return state_dict_identity(model.state_dict())


def tensor_digest(t: Tensor) -> str:
    """sha256 hex of a tensor's dtype, shape and bytes (device-independent)."""
    t = t.detach().cpu().contiguous()
    h = hashlib.sha256(f"{t.dtype}|{tuple(t.shape)}|".encode())
    h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())  # raw bytes of any dtype (bf16 too)
    return h.hexdigest()
