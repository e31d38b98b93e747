"""Put models in eval mode with frozen parameters, and restore every flag exactly afterwards.

Attacks and inversions must measure a model as it is used (eval mode: batch-norm running
statistics, never batch statistics) and must not leave it changed. The published STIR code called
``train()`` after each inversion, silently switching reference models to batch statistics; here
every module's ``training`` flag and every parameter's ``requires_grad`` is put back as it was.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from torch import nn


@contextmanager
def frozen(*models: nn.Module) -> Iterator[None]:
    """Within the block: every module in eval mode, no parameter requires grad (no weight grads)."""
    modes = [(m, m.training) for model in models for m in model.modules()]
    grads = [(p, p.requires_grad) for model in models for p in model.parameters()]
    try:
        for model in models:
            model.eval()
            for p in model.parameters():
                p.requires_grad_(False)
        yield
    finally:
        for m, training in modes:
            m.training = training
        for p, requires_grad in grads:
            p.requires_grad_(requires_grad)
