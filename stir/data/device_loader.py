"""The device-resident training data path: the uint8 split on the device, batches cut and augmented there.

A GPU trains a small CIFAR network faster than a DataLoader can hand it batches (airbench keeps the
data on the GPU for that reason). ``DeviceBatches`` holds the whole uint8 training split (45,000 x
3 x 32 x 32 = 138 MB) on the training device and, per epoch, yields its batches in the order of
``EpochShuffle(n, seed)`` (the DataLoader path's order: the same images in the same batches),
augmented on the device with ``stir.data.Augment`` from a generator of that device seeded by
``(seed, epoch)``. The augmentation distribution is the DataLoader path's (the same function; only
the random draws differ: that path draws in the training step from the global RNG), and every epoch
is a function of ``(seed, epoch)`` alone, so a run resumed at an epoch boundary continues exactly.
No worker processes, no pinned host copies.

Lightning sees a sized iterable with a ``sampler`` that has ``set_epoch`` (it calls it before each
epoch). Single device only: under DDP every rank would see every batch.
"""
from __future__ import annotations

from typing import Iterator, Optional, Tuple

import torch
from torch import Tensor

from stir.data.augment import Augment

AUGMENT_STREAM = 0x5EED_A06  # separates the augmentation generator's seed from the shuffle's


class DeviceBatches:
    """Batches ``(images (b, 3, h, w) uint8, labels (b,) int64)`` of a split held on ``device``.

    Args:
        images, labels: the split, (n, 3, h, w) uint8 and (n,) int64, on any device (copied to ``device`` once).
        batch_size: images per batch; the last batch of an epoch may be smaller.
        sampler: an ``EpochShuffle`` (``set_epoch``, ``epoch``, ``permutation()``): each epoch's order.
        augment: applied to every batch on the device; None yields the images as stored.
        seed: seeds the augmentation generator with ``(seed, epoch)``.
    """

    def __init__(self, images: Tensor, labels: Tensor, batch_size: int, sampler, device: torch.device | str,
                 augment: Optional[Augment], seed: int) -> None:
        self.device = torch.device(device)
        self.images = images.to(self.device)  # (n, 3, h, w) uint8, resident
        self.labels = labels.to(self.device)  # (n,) int64
        self.batch_size, self.sampler, self.augment, self.seed = batch_size, sampler, augment, int(seed)

    def __len__(self) -> int:
        return -(-len(self.labels) // self.batch_size)

    def generator(self, epoch: int) -> torch.Generator:
        """The augmentation generator of ``epoch``: on the data's device, seeded by (seed, epoch)."""
        return torch.Generator(device=self.device).manual_seed((self.seed * 1_000_003 + epoch) ^ AUGMENT_STREAM)

    def __iter__(self) -> Iterator[Tuple[Tensor, Tensor]]:
        order = self.sampler.permutation().to(self.device)  # (n,) this epoch's order
        g = self.generator(self.sampler.epoch) if self.augment is not None else None
        for idx in order.split(self.batch_size):  # (b,) each
            images = self.images[idx]  # (b, 3, h, w) uint8, gathered on the device
            yield (self.augment(images, g) if self.augment is not None else images), self.labels[idx]
