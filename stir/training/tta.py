"""Test-time augmentation: clean logits averaged over mirrored (and shifted) copies of each image.

    f_TTA(x) = mean_{t in T} f(t(x)),   T = {id, flip}  or  {id, flip} x {no shift, 1-pixel shifts}

(airbench's evaluation: flip, and translations by one pixel with reflect padding). An evaluation
option for the clean accuracy a training run reports beside the plain one, never applied to robust
accuracy, to the saved network, or to any representation STIR reads: STIR's measurements are of the
network's function f, not of f_TTA.
"""
from __future__ import annotations

from typing import Callable, List

import torch
import torch.nn.functional as F
from torch import Tensor

from stir.config.validate import TTA_MODES  # ("none", "flip", "flip_translate")


def shift(x: Tensor, dy: int, dx: int) -> Tensor:
    """(b, c, h, w) moved by (dy, dx) pixels (|dy|, |dx| <= 1), the uncovered border reflected."""
    h, w = x.shape[-2:]
    padded = F.pad(x, (1, 1, 1, 1), mode="reflect")  # (b, c, h + 2, w + 2)
    return padded[..., 1 - dy:1 - dy + h, 1 - dx:1 - dx + w]


def views(x: Tensor, mode: str) -> List[Tensor]:
    """The copies of ``x`` (b, c, h, w) whose logits ``tta_logits`` averages."""
    if mode not in TTA_MODES:
        raise ValueError(f"test_time_augmentation={mode!r}; choose one of {list(TTA_MODES)}")
    if mode == "none":
        return [x]
    out = [x, x.flip(-1)]
    if mode == "flip_translate":
        out += [shift(v, dy, dx) for v in (x, x.flip(-1)) for dy, dx in ((-1, -1), (1, 1))]
    return out


def tta_logits(f: Callable[[Tensor], Tensor], x: Tensor, mode: str) -> Tensor:
    """mean over ``views(x, mode)`` of f(view): (b, C); ``mode="none"`` is f(x) itself."""
    return torch.stack([f(v) for v in views(x, mode)]).mean(dim=0)
