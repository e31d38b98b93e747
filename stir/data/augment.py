"""Batched, on-device augmentation (random crop with zero or reflect padding + horizontal flip) and uint8 -> float.

Everything here is a pure function of a whole batch: no per-image Python loop, no host round trip,
so it runs where the batch already is (the LightningModule's ``training_step`` or the device-resident
loader). Equivalent, image by image, to torchvision's ``RandomCrop(32, padding=4)`` (``padding_mode``
"constant" or "reflect") followed by ``RandomHorizontalFlip()``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor


def sample_crop_flip(
    batch: int, padding: int, device: torch.device | str, generator: Optional[torch.Generator] = None,
    flip: bool = True,
) -> tuple[Tensor, Tensor, Tensor]:
    """Random parameters for ``batch`` images: (top (b,), left (b,)) in [0, 2*padding], flip (b,) bool.

    Drawn in this order from ``generator`` (on the generator's own device, then moved to ``device``)
    or, when None, from the global RNG of ``device``.
    """
    gen_device = generator.device if generator is not None else torch.device(device)
    top = torch.randint(0, 2 * padding + 1, (batch,), generator=generator, device=gen_device)
    left = torch.randint(0, 2 * padding + 1, (batch,), generator=generator, device=gen_device)
    if flip:
        flips = torch.randint(0, 2, (batch,), generator=generator, device=gen_device).bool()
    else:
        flips = torch.zeros(batch, dtype=torch.bool, device=gen_device)
    return top.to(device), left.to(device), flips.to(device)


PAD_MODES = {"zeros": "constant", "reflect": "reflect"}  # our names -> F.pad's


def crop_flip(x: Tensor, top: Tensor, left: Tensor, flip: Tensor, padding: int, padding_mode: str = "zeros") -> Tensor:
    """Pad each image by ``padding`` (zeros, or its mirror image without repeating the border pixel:
    ``reflect``), cut the (h, w) window at (top, left), mirror it where ``flip``.

    Args:
        x: (b, c, h, w), any dtype.
        top, left: (b,) int64 window offsets into the padded image, in [0, 2 * padding].
        flip: (b,) bool.
        padding_mode: "zeros" | "reflect".

    Returns:
        (b, c, h, w), same dtype and device as ``x``.
    """
    b, c, h, w = x.shape
    padded = F.pad(x, (padding,) * 4, mode=PAD_MODES[padding_mode]) if padding else x  # (b, c, h+2p, w+2p)
    rows = top[:, None] + torch.arange(h, device=x.device)  # (b, h)
    cols = left[:, None] + torch.arange(w, device=x.device)  # (b, w)
    # A flipped crop reads the same window right to left: flip the column indices, not the pixels.
    cols = torch.where(flip[:, None], cols.flip(1), cols)  # (b, w)
    # One gather for the whole batch: index shapes broadcast to (b, c, h, w).
    return padded[
        torch.arange(b, device=x.device)[:, None, None, None],
        torch.arange(c, device=x.device)[None, :, None, None],
        rows[:, None, :, None],
        cols[:, None, None, :],
    ]


def augment_batch(
    x: Tensor, generator: Optional[torch.Generator] = None, *, padding: int = 4, flip: bool = True,
    padding_mode: str = "zeros",
) -> Tensor:
    """Random crop (``padding`` pixels each side, zeros or reflected) and random horizontal flip of a batch.

    Args:
        x: (b, 3, h, w) uint8 or float images, on any device.
        generator: optional torch.Generator for reproducible draws (may live on another device).
        padding: crop padding; 0 disables cropping.
        flip: whether to flip each image with probability 1/2.
        padding_mode: "zeros" (the CIFAR standard) | "reflect" (airbench's translate).

    Returns:
        (b, 3, h, w) tensor of ``x``'s dtype and device (a new tensor; ``x`` is not modified).
    """
    if x.dim() != 4:
        raise ValueError(f"augment_batch expects (b, c, h, w), got shape {tuple(x.shape)}")
    if padding_mode not in PAD_MODES:
        raise ValueError(f"padding_mode={padding_mode!r}; choose one of {sorted(PAD_MODES)}")
    top, left, flips = sample_crop_flip(x.shape[0], padding, x.device, generator, flip)
    return crop_flip(x, top, left, flips, padding, padding_mode)


@dataclass(frozen=True)
class Augment:
    """The training augmentation of a recipe (``DataConfig``'s crop_padding, padding_mode, flip)."""

    padding: int = 4
    flip: bool = True
    padding_mode: str = "zeros"

    def __call__(self, x: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        """(b, 3, h, w) -> (b, 3, h, w): a random crop and flip of every image (``augment_batch``)."""
        return augment_batch(x, generator, padding=self.padding, flip=self.flip, padding_mode=self.padding_mode)

    @classmethod
    def of(cls, cfg) -> Optional["Augment"]:
        """The augmentation ``cfg`` (a DataConfig) asks for; None when ``cfg.augment`` is off."""
        return cls(cfg.crop_padding, cfg.flip, cfg.padding_mode) if cfg.augment else None


def to_float(x: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """uint8 images in [0, 255] -> ``dtype`` in [0, 1] (the models' input; they normalise inside).

    Floating inputs are taken to be in [0, 1] already and only cast.
    """
    if x.dtype == torch.uint8:
        return x.to(dtype).div_(255.0)
    if x.is_floating_point():
        return x.to(dtype)
    raise TypeError(f"to_float expects uint8 or floating images, got {x.dtype}")
