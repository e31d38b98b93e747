"""A model's identity by what it computes: its outputs on a fixed probe batch, checked on every use.

The static identity (``stir.models.identity``: weights, buffers, the code of its classes) cannot see
everything a forward reads: a module global of a helper module (``ACT = "tanh"``), a non-persistent
buffer set from an environment variable, bytecode without source, hooks and monkeypatches, a batch
that couples its images. What the model computes can: ``fingerprint`` reads it at its taps on a
fixed probe batch (``probe_batch``: two images of seeded uniform noise and two of seeded smooth
blocks, the shape of the images measured), in eval mode without gradient, TF32 off; each tap's
(4, ...) output becomes a small sketch (per image, ``_CHUNKS`` chunk means of the flattened output
and of the output times seeded random signs: the exact values for outputs of up to ``_CHUNKS``
entries, such as logits).

``Fingerprints`` keeps, per static identity and probe (image shape and taps), the fingerprints seen
so far: its *variants*. The first is the one the stored results were measured with; a model whose
probe matches variant j within ``TOLERANCE`` (relative L2 per tap: float rounding across threads
and devices passes, a changed activation does not) has identity variant j: variant 0 keeps the static
identity (existing store keys unchanged), variant j > 0 is ``variant_identity(static, probe, j)``. A
model that matches none is a new variant, said in one line: its results are measured again, never
served from another variant's entries. The shipped models' fingerprints are committed beside their
results (``zoo/fingerprints``, pinned by ``zoo/MANIFEST.sha256``) and are read before the local ones.

``check_batch_independent`` refuses a model whose output for an image depends on the other images
of its batch (batch-coupled: STIR batches its inversions and readings, so its number would depend
on ``execution.batch_size``): the probe batch read at once and one image at a time must agree.
"""
from __future__ import annotations

import hashlib
import logging
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from stir.models.probe import check_deterministic
from stir.models.taps import LOGITS, collect, split_reduction, tap_point

log = logging.getLogger(__name__)

PROBE_N = 4  # images in the probe batch
TOLERANCE = 1e-3  # relative L2 difference per tap below which two fingerprints are the same behaviour
_CHUNKS = 128
_SEED = 54

Fingerprint = Dict[str, Tensor]  # {tap: (PROBE_N, 2 * chunks) float64 sketch}


class BatchCoupledError(ValueError):
    """A model whose outputs for an image depend on the other images of its batch."""


def probe_batch(shape: Sequence[int], device: torch.device, dtype: torch.dtype = torch.float32) -> Tensor:
    """(PROBE_N, *shape) images in [0, 1]: two of seeded uniform noise, two of seeded smooth blocks
    (4x4 blocks upsampled: closer to the statistics of real images); the global RNG untouched."""
    g = torch.Generator().manual_seed(_SEED)
    c, h, w = shape
    noise = torch.rand(2, c, h, w, generator=g)
    blocks = torch.nn.functional.interpolate(torch.rand(2, c, 4, 4, generator=g), size=(h, w), mode="bilinear",
                                             align_corners=False)
    return torch.cat([noise, blocks]).to(device=device, dtype=dtype)


@contextmanager
def _exact() -> Iterator[None]:
    """TF32 off within: a fingerprint is compared across devices at float32 precision."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def probe_taps(model: nn.Module, taps: Sequence[str]) -> List[str]:
    """The taps a fingerprint reads: the logits and each tap of ``taps`` the model has (reduction
    suffixes dropped: the unreduced output is sketched), in a canonical order."""
    out = {LOGITS}
    for tap in taps:
        name = split_reduction(tap)[0]
        try:
            tap_point(model, name)
        except ValueError:
            continue
        out.add(name)
    return sorted(out)


def _signs(d: int) -> Tensor:
    return torch.randint(0, 2, (d,), generator=torch.Generator().manual_seed(_SEED + d), dtype=torch.float64) * 2 - 1


def sketch(output: Tensor) -> Tensor:
    """(n, ...) -> (n, 2 * min(d, _CHUNKS)) float64: chunk means of each flattened row, and of the row
    times seeded random signs (a change that keeps the chunk means rarely keeps both)."""
    flat = output.detach().reshape(output.shape[0], -1).to("cpu", torch.float64)
    d = flat.shape[1]
    signed = flat * _signs(d)
    parts = [torch.stack([c.mean(1) for c in torch.tensor_split(t, min(d, _CHUNKS), dim=1)], 1) for t in (flat, signed)]
    return torch.cat(parts, 1)


def fingerprint(model: nn.Module, images: Tensor, taps: Sequence[str], batch_size: int) -> Fingerprint:
    """{tap: sketch} of ``model`` at ``taps`` on ``images``, read ``batch_size`` images at a time
    (``collect``: eval mode, no gradient, every mode restored), TF32 off."""
    with _exact():
        read = collect(model, images, list(taps), batch_size, reduce=False)
    return {tap: sketch(value) for tap, value in read.items()}


def difference(a: Fingerprint, b: Fingerprint) -> Optional[str]:
    """None when ``a`` and ``b`` are the same behaviour (every tap within ``TOLERANCE``), else where
    and by how much they differ ("logits differ by 0.31 (relative L2)")."""
    if sorted(a) != sorted(b):
        return f"taps {sorted(a)} against {sorted(b)}"
    for tap in sorted(a):
        x, y = a[tap], b[tap]
        if x.shape != y.shape:
            return f"{tap} has shape {tuple(x.shape)}, not {tuple(y.shape)}"
        if not (torch.isfinite(x).all() and torch.isfinite(y).all()):
            if torch.equal(torch.nan_to_num(x, 1.0, 2.0, 3.0), torch.nan_to_num(y, 1.0, 2.0, 3.0)):
                continue
            return f"{tap} is not finite in one of them"
        scale = max(float(y.norm()), float(x.norm()), 1e-12)
        rel = float((x - y).norm()) / scale
        if rel > TOLERANCE:
            return f"{tap} differs by {rel:.3g} (relative L2)"
    return None


def check_batch_independent(model: nn.Module, name: str, images: Tensor, taps: Sequence[str],
                            batched: Optional[Fingerprint] = None) -> Fingerprint:
    """The fingerprint of the batch read at once, after checking that a second read gives the same
    (``UnmeasurableModel``: not deterministic) and one image at a time too (``BatchCoupledError``
    naming the model and the tap otherwise). The global random state is restored after."""
    with torch.random.fork_rng(devices=[images.device] if images.device.type == "cuda" else []):
        batched = batched if batched is not None else fingerprint(model, images, taps, images.shape[0])
        single = fingerprint(model, images, taps, 1)
        why = difference(single, batched)
        if why is not None:  # random, or coupled? a second read of the batch tells
            again = fingerprint(model, images, taps, images.shape[0])
            for tap in batched:
                check_deterministic(batched[tap], again[tap], name, images.shape[0])
    if why is not None:
        raise BatchCoupledError(
            f"model {name!r} computes another output for an image when it is read with other images ({why}, one "
            f"image at a time against a batch of {images.shape[0]}): a batch-coupled model (batch statistics, a "
            "forced dropout, a cross-image operation) has no STIR independent of execution.batch_size; put it in "
            "eval mode or remove the coupling")
    return batched


def variant_identity(static: str, probe: str, j: int) -> str:
    """The identity of behaviour variant ``j`` > 0 of a model whose static identity is ``static``."""
    return hashlib.sha256(f"stir-behaviour-variant-v1\n{static}\n{probe}\n{j}".encode()).hexdigest()


def probe_key(images: Tensor, taps: Sequence[str]) -> str:
    """What a fingerprint was read on: the image shape and the taps ("3x32x32|logits,penultimate")."""
    return f"{'x'.join(str(s) for s in images.shape[1:])}|{','.join(taps)}"


# Modules whose behaviour is a variant j > 0 of their static identity, for the inversion cache's key
# (``effective_identity``): module -> (its content identity when probed, the variant's tag). Weak: the
# entry goes with the module.
_VARIANTS: "weakref.WeakKeyDictionary[nn.Module, Tuple[str, str]]" = weakref.WeakKeyDictionary()


def remember_variant(model: nn.Module, content: Optional[str], tag: Optional[str]) -> None:
    """Record that ``model`` (content identity ``content``) computes variant ``tag`` (None: variant 0)."""
    if tag is None:
        _VARIANTS.pop(model, None)
    else:
        _VARIANTS[model] = (content, tag)


def effective_identity(model: nn.Module) -> str:
    """``content_identity(model)``, or for a module last probed as a variant j > 0 of it (and not
    changed since), that variant's identity: what keys the inversion cache."""
    from stir.models.identity import content_identity

    static = content_identity(model)
    known = _VARIANTS.get(model)
    if known is None or known[0] != static:
        return static
    return hashlib.sha256(f"{static}\n{known[1]}".encode()).hexdigest()


class Fingerprints:
    """The behaviour variants of each static identity: ``<folder>/<identity>.pt`` files (one dict
    {probe key: [fingerprint, ...]} each, read without code: ``stir.untrusted.load_plain``), after the
    read-only ``shipped`` folder's (the committed fingerprints of the shipped models)."""

    def __init__(self, folder: Optional[Path], shipped: Optional[Path] = None):
        self.folder = Path(folder) if folder is not None else None
        self.shipped = Path(shipped) if shipped is not None else None

    @property
    def key(self) -> str:
        """Which folders these are (a module probed against one store is probed again against another)."""
        return f"{self.folder}|{self.shipped}"

    def _read(self, folder: Optional[Path], static: str) -> Dict[str, List[Fingerprint]]:
        from stir.untrusted import load_plain

        path = folder / f"{static}.pt" if folder is not None else None
        if path is None or not path.is_file():
            return {}
        try:
            data = load_plain(path)
            if not isinstance(data, dict):
                raise ValueError("not a dict")
            return data
        except Exception as err:  # noqa: BLE001 - a damaged file: its variants are measured again
            log.warning("fingerprint file %s is unusable (%s: %s); ignoring it", path, type(err).__name__, err)
            return {}

    def variant(self, static: str, probe: str, found: Fingerprint) -> Tuple[int, Optional[str]]:
        """(j, why it is new or None): the variant of ``static`` whose fingerprint at ``probe`` matches
        ``found``, a new one (appended, under a file lock) when none does; j = 0 for the first ever."""
        shipped = self._read(self.shipped, static).get(probe, [])
        for j, known in enumerate(shipped):
            if difference(found, known) is None:
                return j, None
        if self.folder is None:
            return (0, None) if not shipped else (len(shipped), difference(found, shipped[0]))
        from filelock import FileLock

        from stir.atomic import torch_save

        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{static}.pt"
        with FileLock(str(path) + ".lock"):
            local = self._read(self.folder, static)
            variants = local.get(probe, [])
            for j, known in enumerate(variants):
                if difference(found, known) is None:
                    return len(shipped) + j, None
            first = (shipped or variants or [None])[0]
            why = difference(found, first) if first is not None else None
            local[probe] = [*variants, found]
            torch_save(local, path)
        return len(shipped) + len(variants), why
