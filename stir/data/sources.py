"""Readers that turn a data source on disk into a :class:`~stir.data.dataset.Dataset` of uint8 tensors.

Two kinds of source:

* CIFAR-10 / CIFAR-100 in the official python-pickle layout under ``root`` (what torchvision
  downloads and extracts). torchvision is used only to download; the pickles are read here, because
  torchvision insists on the official md5 sums and so cannot read small test files in the same layout.
* An image-folder tree ``train/<class>/*``, ``test/<class>/*`` (classes sorted by name give labels
  0..C-1), either a directory or a tar / tar.gz of one, read member by member without unpacking.
"""
from __future__ import annotations

import io
import logging
import os
import tarfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Sequence, Union

import numpy as np
import torch
from PIL import Image
from tqdm.auto import tqdm

from stir.data.dataset import DataNotFoundError, DataSourceError, Dataset
from stir.untrusted import UnsafeFileError, load_cifar_pickle

log = logging.getLogger(__name__)

PathLike = Union[str, os.PathLike]

CIFAR10_CLASSES = (
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
)  # fmt: skip
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".ppm", ".tif", ".tiff", ".webp"})
SPLITS = ("train", "test")


@dataclass(frozen=True)
class CifarSpec:
    """Where one CIFAR variant's python pickles live under ``root`` and which keys they use."""

    name: str
    torchvision_class: str  # attribute of torchvision.datasets that downloads it
    folder: str  # extracted by torchvision into root/folder
    train_files: tuple[str, ...]
    test_files: tuple[str, ...]
    meta_file: str
    label_key: bytes  # key of the label list in each batch dict
    names_key: bytes  # key of the class-name list in the meta dict
    num_classes: int
    title: str


CIFAR_SPECS: dict[str, CifarSpec] = {
    "cifar10": CifarSpec(
        name="cifar10", torchvision_class="CIFAR10", folder="cifar-10-batches-py",
        train_files=tuple(f"data_batch_{i}" for i in range(1, 6)), test_files=("test_batch",),
        meta_file="batches.meta", label_key=b"labels", names_key=b"label_names", num_classes=10,
        title="CIFAR-10",
    ),
    "cifar100": CifarSpec(
        name="cifar100", torchvision_class="CIFAR100", folder="cifar-100-python",
        train_files=("train",), test_files=("test",), meta_file="meta", label_key=b"fine_labels",
        names_key=b"fine_label_names", num_classes=100, title="CIFAR-100",
    ),
}  # fmt: skip


def cifar_spec(name: str) -> CifarSpec:
    """The spec of a data set name; a ValueError listing the known names otherwise."""
    try:
        return CIFAR_SPECS[name]
    except KeyError:
        raise ValueError(f"unknown data set data.name={name!r}; choose one of: {', '.join(CIFAR_SPECS)}") from None


# --------------------------------------------------------------------------------------------------
# CIFAR python pickles
# --------------------------------------------------------------------------------------------------


def cifar_files(name: str, root: PathLike) -> list[Path]:
    """Every file the reader needs (batches then meta), whether or not it exists."""
    spec = cifar_spec(name)
    folder = Path(root) / spec.folder
    return [folder / f for f in (*spec.train_files, *spec.test_files, spec.meta_file)]


def _missing_message(spec: CifarSpec, root: Path, missing: Sequence[Path], reason: str) -> str:
    return (
        f"{spec.title} not found: {reason}; missing {', '.join(str(p) for p in missing[:3])}"
        f"{' ...' if len(missing) > 3 else ''}. Pass data.source=PATH to a local image folder or "
        f"tar(.gz) of one (train/<class>/*, test/<class>/*), or data.download=true to let torchvision "
        f"download into data.root={str(root)!r}."
    )


def ensure_cifar(name: str, root: PathLike, download: bool) -> Path:
    """Make sure the pickles are under ``root``, downloading them with torchvision if allowed.

    Returns the folder holding them. Raises :class:`DataNotFoundError` when they are missing and
    ``download`` is false, or the download fails (e.g. no network).
    """
    spec = cifar_spec(name)
    root = Path(root).resolve()
    missing = [p for p in cifar_files(name, root) if not p.is_file()]
    if not missing:
        return root / spec.folder
    if not download:
        raise DataNotFoundError(_missing_message(spec, root, missing, "data.download=false"))
    import torchvision  # lazily: only needed to download

    log.info("downloading %s into %s with torchvision", spec.title, root)
    try:
        # One archive holds both splits; torchvision verifies its md5 and extracts it.
        getattr(torchvision.datasets, spec.torchvision_class)(str(root), train=True, download=True)
    except Exception as err:  # URLError, timeouts, md5 mismatch ...: report it with the ways out
        raise DataNotFoundError(
            _missing_message(spec, root, missing, f"the download failed ({type(err).__name__}: {err})")
        ) from err
    still = [p for p in cifar_files(name, root) if not p.is_file()]
    if still:
        raise DataNotFoundError(_missing_message(spec, root, still, "torchvision's download did not produce it"))
    return root / spec.folder


def _unpickle(path: Path) -> dict:
    try:
        # Restricted (stir.untrusted): plain data and numpy arrays only, never a global that runs code.
        # encoding="bytes": the official files were pickled by Python 2, so their str keys and
        # names come back as bytes (b"data", b"labels", ...), and so do those the tests write.
        obj = load_cifar_pickle(path)
    except UnsafeFileError:  # a file that asks to run code: refused in one line, nothing run
        raise
    except Exception as err:
        raise ValueError(f"cannot read CIFAR pickle {path} ({type(err).__name__}: {err}); delete it and "
                         "download again") from err
    if not isinstance(obj, dict):
        raise ValueError(f"CIFAR pickle {path} holds a {type(obj).__name__}, not a dict")
    return obj


def _read_batches(paths: Sequence[Path], label_key: bytes) -> tuple[torch.Tensor, torch.Tensor]:
    """Concatenate batch files into (N, 3, 32, 32) uint8 images and (N,) int64 labels."""
    images, labels = [], []
    for path in paths:
        entry = _unpickle(path)
        if b"data" not in entry or label_key not in entry:
            raise ValueError(f"CIFAR pickle {path} lacks key b'data' or {label_key!r}; keys: {sorted(entry)}")
        data = np.asarray(entry[b"data"], dtype=np.uint8)
        if data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
            raise ValueError(f"CIFAR pickle {path}: data has shape {data.shape}, expected (N, 3072)")
        # Each row is 1024 red, 1024 green, 1024 blue values, each plane row-major 32x32: CHW.
        images.append(data.reshape(-1, 3, 32, 32))
        labels.append(np.asarray(entry[label_key], dtype=np.int64).reshape(-1))
        if labels[-1].shape[0] != images[-1].shape[0]:
            raise ValueError(f"CIFAR pickle {path}: {images[-1].shape[0]} images but {labels[-1].shape[0]} labels")
    return torch.from_numpy(np.concatenate(images)), torch.from_numpy(np.concatenate(labels))


def read_cifar_python(name: str, root: PathLike) -> Dataset:
    """Read CIFAR-10 / CIFAR-100 from the official python layout under ``root``.

    ``root/cifar-10-batches-py/{data_batch_1..5, test_batch, batches.meta}`` or
    ``root/cifar-100-python/{train, test, meta}`` (fine labels). No md5 check, so files written by
    :mod:`stir.data.synthetic` read the same way as the real ones.
    """
    spec = cifar_spec(name)
    root = Path(root)
    missing = [p for p in cifar_files(name, root) if not p.is_file()]
    if missing:
        raise DataNotFoundError(_missing_message(spec, root.resolve(), missing, "files absent"))
    folder = root / spec.folder
    start = time.perf_counter()
    train_x, train_y = _read_batches([folder / f for f in spec.train_files], spec.label_key)
    test_x, test_y = _read_batches([folder / f for f in spec.test_files], spec.label_key)
    meta = _unpickle(folder / spec.meta_file)
    if spec.names_key not in meta:
        raise ValueError(f"CIFAR meta file {folder / spec.meta_file} lacks key {spec.names_key!r}")
    classes = tuple(n.decode("utf-8") if isinstance(n, bytes) else str(n) for n in meta[spec.names_key])
    data = Dataset(train_x, train_y, test_x, test_y, classes)
    log.info("read %s from %s: %d train + %d test images, %d classes (%.2f s)", spec.title, folder,
             len(train_y), len(test_y), len(classes), time.perf_counter() - start)
    return data


def load_cifar(name: str, root: PathLike, download: bool) -> Dataset:
    """Download if needed and allowed, then read: the torchvision route of ``load_dataset``."""
    ensure_cifar(name, root, download)
    return read_cifar_python(name, root)


# --------------------------------------------------------------------------------------------------
# Image folders and tar archives of them
# --------------------------------------------------------------------------------------------------

# One image file found in a source: (split, class name, file name, payload). The payload is a path
# (folder) or the file's bytes (tar), whatever `_decode` can open.
_Entry = tuple[str, str, str, Union[Path, bytes]]


def _is_image_name(name: str) -> bool:
    return not name.startswith(".") and PurePosixPath(name).suffix.lower() in IMAGE_SUFFIXES


def _scan_folder(root: Path) -> list[_Entry]:
    entries: list[_Entry] = []
    for split in SPLITS:
        split_dir = root / split
        if not split_dir.is_dir():
            continue
        for class_dir in sorted(p for p in split_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            for file in class_dir.iterdir():
                if file.is_file() and _is_image_name(file.name):
                    entries.append((split, class_dir.name, file.name, file))
    return entries


def _scan_tar(path: Path) -> list[_Entry]:
    """Read every image member of the archive into memory (compressed sizes: ~20 MB for CIFAR-10).

    Members are visited in archive order, so a gzip stream is read once front to back. The tree may
    sit under one leading folder (``cifar10/train/...``); anything else (READMEs, ``__MACOSX``) is
    skipped.
    """
    entries: list[_Entry] = []
    prefixes: set[str] = set()
    try:
        with tarfile.open(path, mode="r:*") as tar:
            for member in tqdm(tar, desc=f"reading {path.name}", unit=" files", disable=None, mininterval=1.0):
                if not member.isfile():
                    continue
                parts = PurePosixPath(member.name).parts
                if parts and parts[0] in (".", "/"):
                    parts = parts[1:]
                if len(parts) < 3 or parts[-3] not in SPLITS or not _is_image_name(parts[-1]):
                    continue
                if any(p.startswith(".") or p == "__MACOSX" for p in parts[:-1]):
                    continue
                prefixes.add("/".join(parts[:-3]))
                f = tar.extractfile(member)
                assert f is not None  # a regular file always has contents
                entries.append((parts[-3], parts[-2], parts[-1], f.read()))
    except (tarfile.TarError, EOFError, zlib.error, OSError) as err:  # truncated, not gzip, unreadable
        raise DataSourceError(
            f"data.source={str(path)!r}: the archive cannot be read past its first {len(entries)} images "
            f"({type(err).__name__}: {err}); it is truncated or damaged: copy it again from its original, or "
            "re-create it (tar czf NAME.tar.gz train test)") from err
    if len(prefixes) > 1:
        raise ValueError(f"{path} holds several image trees ({', '.join(sorted(prefixes))}); expected one "
                         "train/<class>/*, test/<class>/* tree")
    return entries


def _decode(payload: Union[Path, bytes]) -> np.ndarray:
    """One image file -> (H, W, 3) uint8 RGB (grey, palette and RGBA images are converted)."""
    with Image.open(payload if isinstance(payload, Path) else io.BytesIO(payload)) as im:
        # convert() copies even an RGB image; skipping it saves ~40% of the decode time of a JPEG.
        return np.asarray(im if im.mode == "RGB" else im.convert("RGB"))


def _decode_entry(entry: _Entry, source: Path) -> np.ndarray:
    """``_decode`` of one scanned image; an image that does not decode is named, with the fix."""
    split, cls, name, payload = entry
    try:
        return _decode(payload)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:  # PIL's ways of failing
        raise DataSourceError(
            f"data.source={str(source)!r}: image {split}/{cls}/{name} does not decode ({type(err).__name__}: {err}); "
            "replace it with a good copy or delete it") from err


def _assemble(entries: list[_Entry], source: Path) -> Dataset:
    """Sort, label and decode scanned entries into a Dataset.

    Order is (class, file name) within each split, whatever order the files were found in, so the
    same tree always gives the same tensors.
    """
    layout = "train/<class>/<image>, test/<class>/<image>"
    by_split = {s: sorted((e for e in entries if e[0] == s), key=lambda e: (e[1], e[2])) for s in SPLITS}
    for split in SPLITS:
        if not by_split[split]:
            raise ValueError(f"no {split} images in {source}; expected the layout {layout} "
                             f"(image suffixes: {', '.join(sorted(IMAGE_SUFFIXES))})")
    classes = tuple(sorted({e[1] for e in by_split["train"]}))
    extra = sorted({e[1] for e in by_split["test"]} - set(classes))
    if extra:
        raise ValueError(f"{source}: test classes {extra} have no training images (train classes: {classes})")
    label_of = {c: i for i, c in enumerate(classes)}

    ordered = by_split["train"] + by_split["test"]
    log.info("decoding %d images (%d classes) from %s", len(ordered), len(classes), source)
    start = time.perf_counter()
    first = _decode_entry(ordered[0], source)
    pixels = np.empty((len(ordered), *first.shape), dtype=np.uint8)  # (N, H, W, 3)
    for i, entry in enumerate(tqdm(ordered, desc=f"decoding {source.name}", unit=" img", disable=None, mininterval=1.0)):
        split, cls, name, _ = entry
        image = first if i == 0 else _decode_entry(entry, source)
        if image.shape != first.shape:
            raise ValueError(f"{source}: {split}/{cls}/{name} is {image.shape[1]}x{image.shape[0]}, but "
                             f"{ordered[0][0]}/{ordered[0][1]}/{ordered[0][2]} is {first.shape[1]}x{first.shape[0]}")
        pixels[i] = image
    images = torch.from_numpy(pixels).permute(0, 3, 1, 2).contiguous()  # (N, 3, H, W): models expect CHW
    labels = torch.tensor([label_of[e[1]] for e in ordered], dtype=torch.int64)
    n_train = len(by_split["train"])
    log.info("decoded %d images from %s in %.1f s", len(ordered), source, time.perf_counter() - start)
    return Dataset(images[:n_train].clone(), labels[:n_train].clone(), images[n_train:].clone(),
                   labels[n_train:].clone(), classes)  # clone: each split owns its storage (compact saves)


def source_kind(source: PathLike) -> str:
    """'folder' or 'tar'; DataNotFoundError if the path is absent, ValueError if it is neither."""
    path = Path(source)
    if path.is_dir():
        return "folder"
    if path.is_file():
        if tarfile.is_tarfile(path):
            return "tar"
        raise ValueError(f"data.source={str(source)!r} is a file but not a tar archive; give an image folder "
                         "(train/<class>/*, test/<class>/*) or a .tar / .tar.gz of one")
    raise DataNotFoundError(
        f"data.source={str(source)!r} does not exist (resolved: {path.resolve()}). Pass data.source=PATH to a "
        "local image folder or tar(.gz) of one, or leave data.source unset to use torchvision's CIFAR files "
        "under data.root (with data.download=true to fetch them)."
    )


def read_image_source(source: PathLike) -> Dataset:
    """Decode an image folder or a tar / tar.gz of one (no cache; see ``stir.data.cache``)."""
    path = Path(source)
    scan: Callable[[Path], list[_Entry]] = _scan_folder if source_kind(path) == "folder" else _scan_tar
    return _assemble(scan(path), path)
