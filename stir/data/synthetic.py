"""Tiny data sets for tests, written in the layouts the real sources use.

* :func:`write_cifar10_python`, :func:`write_cifar100_python`: the official python-pickle layout
  (``cifar-10-batches-py/``, ``cifar-100-python/``), pickled the way the Python 2 originals were:
  dict keys and names are byte strings (``b"data"``, ``b"labels"``, ...) that load as ``bytes``
  with ``encoding="bytes"`` and as ``str`` with torchvision's ``encoding="latin1"``.
* :func:`write_image_folder`: ``train/<class>/NNNN.png``, ``test/<class>/NNNN.png``.
* :func:`write_image_tar`: the same tree inside a ``.tar`` / ``.tar.gz`` (compression from the suffix).

Each writer returns the :class:`Dataset` a reader should get back (PNG is lossless), in read-back
order. Images are uniform noise: fine for I/O and pipeline tests, useless for learning.
"""
from __future__ import annotations

import io
import os
import pickle
import struct
import tarfile
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np
import torch
from PIL import Image

from stir.atomic import write_bytes
from stir.data.dataset import Dataset
from stir.data.sources import CIFAR10_CLASSES, CIFAR_SPECS

PathLike = Union[str, os.PathLike]


def make_dataset(
    num_classes: int = 10, n_train: int = 50, n_test: int = 20, image_size: int = 32, seed: int = 0,
    classes: Optional[Sequence[str]] = None,
) -> Dataset:
    """Random uint8 noise images with labels ``i % num_classes`` in shuffled order (every class present
    when n >= num_classes). Classes default to CIFAR-10's names for 10, else ``class000``, ``class001``, ..."""
    if classes is None:
        classes = CIFAR10_CLASSES if num_classes == 10 else tuple(f"class{i:03d}" for i in range(num_classes))
    if len(classes) != num_classes:
        raise ValueError(f"{len(classes)} class names for num_classes={num_classes}")
    g = torch.Generator().manual_seed(seed)

    def split(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        images = torch.randint(0, 256, (n, 3, image_size, image_size), generator=g, dtype=torch.uint8)
        labels = (torch.arange(n) % num_classes)[torch.randperm(n, generator=g)]  # (n,) int64
        return images, labels

    return Dataset(*split(n_train), *split(n_test), classes=tuple(classes))


# --------------------------------------------------------------------------------------------------
# CIFAR python layout
# --------------------------------------------------------------------------------------------------


class _Py2Pickler(pickle._Pickler):  # the pure-Python pickler: its dispatch table can be extended
    """Protocol-2 pickler that writes ``bytes`` as Python 2 ``str`` (BINSTRING opcodes), like the
    originals: Python 3's own pickler would write them so that they always load as bytes, and
    torchvision's ``encoding="latin1"`` reader would then miss its str keys."""

    dispatch = dict(pickle._Pickler.dispatch)

    def _save_py2_str(self, obj: bytes) -> None:
        n = len(obj)
        if n < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([n]) + obj)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", n) + obj)
        self.memoize(obj)

    dispatch[bytes] = _save_py2_str


def _dump(obj: dict, path: Path) -> None:
    buffer = io.BytesIO()
    _Py2Pickler(buffer, protocol=2).dump(obj)
    write_bytes(path, buffer.getvalue())


def _rows(images: torch.Tensor) -> np.ndarray:
    """(N, 3, 32, 32) uint8 -> (N, 3072): 1024 red, 1024 green, 1024 blue values, each plane row-major."""
    if images.shape[1:] != (3, 32, 32):
        raise ValueError(f"the CIFAR python layout holds 3x32x32 images, got {tuple(images.shape[1:])}")
    return np.ascontiguousarray(images.numpy().reshape(len(images), 3 * 32 * 32))


def _names(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}_{i:05d}.png".encode() for i in range(n)]


def write_cifar10_python(
    root: PathLike, data: Optional[Dataset] = None, *, n_train: int = 50, n_test: int = 20, seed: int = 0
) -> Dataset:
    """Write ``root/cifar-10-batches-py/{data_batch_1..5, test_batch, batches.meta}``.

    The training images are spread over the five batches in order. Returns what was written.
    """
    data = data if data is not None else make_dataset(10, n_train, n_test, seed=seed)
    folder = Path(root) / CIFAR_SPECS["cifar10"].folder
    folder.mkdir(parents=True, exist_ok=True)
    train_x, train_y = _rows(data.train_images), data.train_labels.tolist()
    bounds = np.linspace(0, len(train_y), 6).astype(int)  # five nearly equal batches
    for i in range(5):
        lo, hi = bounds[i], bounds[i + 1]
        _dump({b"batch_label": f"training batch {i + 1} of 5".encode(), b"labels": train_y[lo:hi],
               b"data": train_x[lo:hi], b"filenames": _names(f"train{i + 1}", hi - lo)}, folder / f"data_batch_{i + 1}")
    _dump({b"batch_label": b"testing batch 1 of 1", b"labels": data.test_labels.tolist(),
           b"data": _rows(data.test_images), b"filenames": _names("test", len(data.test_labels))}, folder / "test_batch")
    _dump({b"num_cases_per_batch": int(bounds[1]), b"label_names": [c.encode() for c in data.classes],
           b"num_vis": 3 * 32 * 32}, folder / "batches.meta")
    return data


def write_cifar100_python(
    root: PathLike, data: Optional[Dataset] = None, *, n_train: int = 200, n_test: int = 100, seed: int = 0
) -> Dataset:
    """Write ``root/cifar-100-python/{train, test, meta}`` with fine and coarse labels (coarse = fine // 5).

    Returns what was written (labels are the fine labels).
    """
    data = data if data is not None else make_dataset(100, n_train, n_test, seed=seed)
    if data.num_classes != 100:
        raise ValueError(f"CIFAR-100 has 100 fine classes, got {data.num_classes}")
    folder = Path(root) / CIFAR_SPECS["cifar100"].folder
    folder.mkdir(parents=True, exist_ok=True)
    for split, images, labels in (("train", data.train_images, data.train_labels),
                                  ("test", data.test_images, data.test_labels)):
        fine = labels.tolist()
        _dump({b"filenames": _names(split, len(fine)), b"batch_label": f"{split}ing batch 1 of 1".encode(),
               b"fine_labels": fine, b"coarse_labels": [y // 5 for y in fine], b"data": _rows(images)}, folder / split)
    _dump({b"fine_label_names": [c.encode() for c in data.classes],
           b"coarse_label_names": [f"superclass{i:02d}".encode() for i in range(20)]}, folder / "meta")
    return data


# --------------------------------------------------------------------------------------------------
# Image folders and tars of them
# --------------------------------------------------------------------------------------------------


def _sorted_by_class(data: Dataset) -> Dataset:
    """Reorder each split by label (stable): the order a reader gets back files named NNNN per class."""
    ti, si = torch.argsort(data.train_labels, stable=True), torch.argsort(data.test_labels, stable=True)
    return Dataset(data.train_images[ti], data.train_labels[ti], data.test_images[si], data.test_labels[si],
                   data.classes)


def _encoded_files(data: Dataset, fmt: str):
    """Yield (relative path 'split/class/NNNN.fmt', encoded bytes) for every image."""
    for split in ("train", "test"):
        images, labels = getattr(data, f"{split}_images"), getattr(data, f"{split}_labels")
        counts: dict[int, int] = {}
        for image, label in zip(images, labels.tolist()):
            k = counts[label] = counts.get(label, -1) + 1
            buf = io.BytesIO()
            Image.fromarray(image.permute(1, 2, 0).numpy()).save(buf, format="JPEG" if fmt in ("jpg", "jpeg") else fmt.upper())
            yield f"{split}/{data.classes[label]}/{k:04d}.{fmt}", buf.getvalue()


def write_image_folder(
    root: PathLike, data: Optional[Dataset] = None, *, num_classes: int = 10, n_train: int = 50, n_test: int = 20,
    seed: int = 0, fmt: str = "png",
) -> Dataset:
    """Write ``root/{train,test}/<class>/NNNN.<fmt>``; returns the data in read-back order (by class).

    Only lossless formats (png, bmp) read back exactly; jpg is lossy.
    """
    data = _sorted_by_class(data if data is not None else make_dataset(num_classes, n_train, n_test, seed=seed))
    for rel, blob in _encoded_files(data, fmt):
        write_bytes(Path(root) / rel, blob)  # makes the folders
    return data


def write_image_tar(
    path: PathLike, data: Optional[Dataset] = None, *, num_classes: int = 10, n_train: int = 50, n_test: int = 20,
    seed: int = 0, fmt: str = "png", prefix: str = "",
) -> Dataset:
    """Write the image-folder tree into a tar archive at ``path`` (optionally under folder ``prefix``).

    Compression follows the suffix: ``.tar.gz`` / ``.tgz`` gzip, ``.tar.bz2``, ``.tar.xz``, else none.
    Returns the data in read-back order (by class).
    """
    data = _sorted_by_class(data if data is not None else make_dataset(num_classes, n_train, n_test, seed=seed))
    name = str(path)
    mode = ("w:gz" if name.endswith((".gz", ".tgz")) else "w:bz2" if name.endswith(".bz2")
            else "w:xz" if name.endswith(".xz") else "w")
    base = prefix.strip("/") + "/" if prefix.strip("/") else ""
    buffer = io.BytesIO()
    # Built in memory, then written whole; ``name`` only names the archive (gzip's header), opens nothing.
    with tarfile.open(name=str(path), mode=mode, fileobj=buffer) as tar:
        dirs: set[str] = set()
        for rel, blob in _encoded_files(data, fmt):
            parent = (base + rel).rsplit("/", 1)[0]
            parts = parent.split("/")
            for i in range(1, len(parts) + 1):  # directory entries first, as `tar czf` writes them
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
            info = tarfile.TarInfo(base + rel)
            info.size, info.mode = len(blob), 0o644
            tar.addfile(info, io.BytesIO(blob))
    write_bytes(path, buffer.getvalue())
    return data
