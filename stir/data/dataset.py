"""The in-memory data set every source decodes into: uint8 images and int64 labels on the CPU."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


class DataNotFoundError(FileNotFoundError):
    """The images are not on disk and cannot be fetched: the message says where we looked and what to set."""


class DataSourceError(ValueError):
    """A data source is there but cannot be read (a damaged archive, an image that does not decode):
    the message names the file and the fix."""


@dataclass(frozen=True, eq=False)  # eq=False: comparing tensors with == is elementwise, not a bool
class Dataset:
    """A whole image-classification data set held in memory.

    Attributes:
        train_images: (N, 3, H, W) uint8, CHW like torchvision tensors.
        train_labels: (N,) int64 in [0, len(classes)).
        test_images: (M, 3, H, W) uint8.
        test_labels: (M,) int64.
        classes: class names; label i is ``classes[i]``.
    """

    train_images: Tensor
    train_labels: Tensor
    test_images: Tensor
    test_labels: Tensor
    classes: tuple[str, ...]

    def __post_init__(self) -> None:
        # Fail here, at the one place every source passes through, rather than deep inside training.
        if not isinstance(self.classes, tuple):  # frozen: the caller passes tuple(names), never coerced here
            raise TypeError(f"classes must be a tuple of class names, got a {type(self.classes).__name__}: pass "
                            "tuple(classes)")
        for split in ("train", "test"):
            images, labels = getattr(self, f"{split}_images"), getattr(self, f"{split}_labels")
            if images.dtype != torch.uint8 or images.dim() != 4 or images.shape[1] != 3:
                raise ValueError(f"{split}_images must be uint8 (N, 3, H, W), got {images.dtype} {tuple(images.shape)}")
            if labels.dtype != torch.int64 or labels.shape != images.shape[:1]:
                raise ValueError(
                    f"{split}_labels must be int64 ({images.shape[0]},), got {labels.dtype} {tuple(labels.shape)}"
                )
            if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= len(self.classes)):
                raise ValueError(f"{split}_labels outside [0, {len(self.classes)}) for classes {self.classes}")
        if self.train_images.shape[1:] != self.test_images.shape[1:]:
            raise ValueError(
                f"train images {tuple(self.train_images.shape[1:])} and test images "
                f"{tuple(self.test_images.shape[1:])} differ in shape"
            )

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(3, H, W) of one image."""
        return tuple(self.train_images.shape[1:])  # type: ignore[return-value]
