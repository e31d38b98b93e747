"""A model's identity by what it computes: its outputs and input gradients on a probe, checked on every use.

The static identity (``stir.models.identity``: weights, buffers, the code of its classes) cannot see
everything a forward or a backward reads: a module global of a helper module (``ACT = "tanh"``), a
non-persistent buffer set from an environment variable, bytecode without source, a hook's closure,
a custom autograd backward, a batch that couples its images. What the model computes can. The probe
(``probe_images``) is the fixed synthetic batch (``probe_batch``: two images of seeded uniform noise
and two of seeded smooth blocks) followed by the first ``RUN_IMAGES`` images of the run's own X (a
model that computes honestly only on unnatural images is read on natural ones too). It is read in
eval mode, TF32 off:

* at the run's batch size, at once (``fingerprint_vjp``: the set tiled up to the run's batch, at most
  ``PROBE_CAP`` rows), with a seeded vector-Jacobian product (a fixed seeded cotangent at each tap,
  backpropagated to the input): what an inversion descends on, hooks and custom backwards included;
* one image at a time, for ``SINGLES`` of its images (a synthetic one and the run's two): a model
  whose output for an image depends on its row or on the other images of its batch (a row of the
  batch read differs from its image read alone, or from the same image's other rows) is refused
  (``BatchCoupledError``: STIR batches its inversions and readings, so its number would depend on
  ``execution.batch_size``).

The fingerprint is the first m rows of the batch read (the cotangents are seeded per image and tiled
with it, so it does not depend on the batch size). A module probed before in this process is read
once more, at the batch only (``stir.measure.call.same_as_seen``). Cost: ``bench/bench_probe.py``.

Each tap's (m, ...) output (and the (m, c, h, w) input gradient, ``VJP``) becomes a small sketch
(per image, ``_CHUNKS`` chunk means of the flattened output and of the output times seeded random
signs: the exact values for outputs of up to ``_CHUNKS`` entries, such as logits).

``Fingerprints`` keeps, per static identity and probe key, the fingerprints seen so far: its
*variants*. Two keys per model: the synthetic images' forward sketch (``probe_key``: image shape and
taps) and the whole probe with its input gradient (``run_probe_key``: that key and the digest of the
run's images). The shipped ``zoo/fingerprints`` hold both, the second for the X of the shipped presets
(``python -m stir.zoo.ship_results`` ships a store's): a shipped model is checked on the run's images
before its shipped results are served, not trusted on first use. The first variant
of a key is the behaviour the stored results were measured with; a model whose sketch matches
variant j within ``TOLERANCE`` (relative L2 per tap: float rounding across threads and devices
passes, a changed activation does not) is variant j there. A model that is variant 0 at both keys
keeps its static identity (store keys unchanged); any other is ``variant_identity``: its results
are measured again, never served from another variant's entries. The shipped models' fingerprints
are read before the local ones (``zoo/fingerprints``, pinned by ``zoo/MANIFEST.sha256``).

A local fingerprint folder is part of the results beside it: it lists the identities it holds
(``INDEX``). A folder of results whose fingerprints are missing, unlisted or damaged is not a fresh
start: ``UncheckedResults`` refuses it in one line naming the folder.
"""
from __future__ import annotations

import hashlib
import logging
import weakref
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import torch
from torch import Tensor, nn

from stir.models.modes import frozen
from stir.models.probe import check_deterministic
from stir.models.taps import LOGITS, collect, read_taps, split_reduction, tap_point

log = logging.getLogger(__name__)

PROBE_N = 4  # synthetic images in the probe batch
RUN_IMAGES = 2  # images of the run's own X added to it
PROBE_CAP = 8  # the largest batch the probe is read at: the run's, bounded (its cost: 16 rows were 5.6% of a served pair, bench_probe)
SINGLES = (0, PROBE_N, PROBE_N + 1)  # the probe's images read one at a time: a synthetic one, the run's two
VJP = "vjp"  # the fingerprint's entry for the input gradient of the seeded vector-Jacobian product
INDEX = "INDEX"  # <fingerprints>/INDEX: the static identities the folder holds fingerprints of, one a line
TOLERANCE = 1e-3  # relative L2 difference per tap below which two fingerprints are the same behaviour
# ... and for the input gradient (VJP): a float rounding of another CPU flips a ReLU near 0 for a probe
# image now and then, which moves the gradient, not the outputs. Measured on the paper preset's shipped
# models (fingerprints written on an AMD EPYC, AVX2; read on an Intel Xeon, AVX-512, 2026-12-08): forward
# taps differ by at most 5e-7, the VJP by at most 2.7e-3 (8 of 492 reads above 1e-3, which made those
# models "variants" and the shipped paper report unservable there). 2e-2 is 7x that and 100x below a
# sign flip (2.0), the backward changes the probe is for; an Adam descent does not see a gradient's scale.
VJP_TOLERANCE = 2e-2
_CHUNKS = 128
_SEED = 54

Fingerprint = Dict[str, Tensor]  # {tap or VJP: (images, 2 * chunks) float64 sketch}


class BatchCoupledError(ValueError):
    """A model whose outputs for an image depend on the other images of its batch."""


class UncheckedResults(ValueError):
    """A folder holds results but the fingerprints of the models that made them are missing or damaged."""


def probe_batch(shape: Sequence[int], device: torch.device, dtype: torch.dtype = torch.float32) -> Tensor:
    """(PROBE_N, *shape) images in [0, 1]: two of seeded uniform noise, two of seeded smooth blocks
    (4x4 blocks upsampled: closer to the statistics of real images); the global RNG untouched."""
    g = torch.Generator().manual_seed(_SEED)
    c, h, w = shape
    noise = torch.rand(2, c, h, w, generator=g)
    blocks = torch.nn.functional.interpolate(torch.rand(2, c, 4, 4, generator=g), size=(h, w), mode="bilinear",
                                             align_corners=False)
    return torch.cat([noise, blocks]).to(device=device, dtype=dtype)


def probe_images(images: Tensor) -> Tensor:
    """(PROBE_N + RUN_IMAGES, c, h, w): the synthetic probe batch, then the first images of the run's X
    ``images`` (n, c, h, w) (fewer when n is smaller), on their device and dtype."""
    synthetic = probe_batch(images.shape[1:], images.device, images.dtype)
    return torch.cat([synthetic, images[:RUN_IMAGES].detach()])


def probe_batch_size(batch: Optional[int]) -> int:
    """The largest batch the probe is read at: the run's (``batch``), at most ``PROBE_CAP``."""
    return max(1, min(batch or PROBE_N + RUN_IMAGES, PROBE_CAP))


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


@lru_cache(maxsize=None)
def _signs(d: int) -> Tensor:
    return torch.randint(0, 2, (d,), generator=torch.Generator().manual_seed(_SEED + d), dtype=torch.float64) * 2 - 1


@lru_cache(maxsize=None)
def _chunks(d: int) -> Tuple[Tensor, Tensor]:
    """(d,) chunk of each entry and (k,) chunk lengths: ``torch.tensor_split``'s k = min(d, _CHUNKS) chunks."""
    k = min(d, _CHUNKS)
    lengths = torch.tensor([d // k + 1] * (d % k) + [d // k] * (k - d % k), dtype=torch.float64)
    return torch.repeat_interleave(torch.arange(k), lengths.long()), lengths


def sketch(output: Tensor) -> Tensor:
    """(n, ...) -> (n, 2 * min(d, _CHUNKS)) float64: chunk means of each flattened row, and of the row
    times seeded random signs (a change that keeps the chunk means rarely keeps both)."""
    flat = output.detach().reshape(output.shape[0], -1).to("cpu", torch.float64)
    n, d = flat.shape
    chunk, lengths = _chunks(d)
    both = torch.cat([flat, flat * _signs(d)])  # (2n, d)
    sums = torch.zeros(2 * n, lengths.shape[0], dtype=torch.float64).index_add_(1, chunk, both)
    means = sums / lengths
    return torch.cat([means[:n], means[n:]], 1)


def fingerprint(model: nn.Module, images: Tensor, taps: Sequence[str], batch_size: int) -> Fingerprint:
    """{tap: sketch} of ``model`` at ``taps`` on ``images``, read ``batch_size`` images at a time
    (``collect``: eval mode, no gradient, every mode restored), TF32 off."""
    with _exact():
        read = collect(model, images, list(taps), batch_size, reduce=False)
    return {tap: sketch(value) for tap, value in read.items()}


def difference(a: Fingerprint, b: Fingerprint) -> Optional[str]:
    """None when ``a`` and ``b`` are the same behaviour (every tap within ``TOLERANCE``, the input gradient
    within ``VJP_TOLERANCE``), else where and by how much they differ ("logits differ by 0.31 (relative L2)")."""
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
        if rel > (VJP_TOLERANCE if tap == VJP else TOLERANCE):
            return f"{tap} differs by {rel:.3g} (relative L2)"
    return None


def _cotangent(value: Tensor, i: int, m: int) -> Tensor:
    """A fixed seeded cotangent for the i-th tap read of (b, ...) ``value``: one per image of the m
    probe images, tiled to the b rows (the same for every run, device and batch size)."""
    g = torch.Generator().manual_seed(_SEED + 1 + i)
    return tiled(torch.randn((m, *value.shape[1:]), generator=g, dtype=torch.float32), value.shape[0]).to(value)


def fingerprint_vjp(model: nn.Module, images: Tensor, taps: Sequence[str], rows: Optional[int] = None) -> Fingerprint:
    """The sketches of the m ``images`` tiled to ``rows`` (default m), read at once, and ``VJP``: the
    sketch of the input gradient of sum_t <tap t's output, its seeded cotangent> (one backward; eval
    mode, weights frozen, TF32 off), each (rows, 2 * chunks). A backward hook, its closure or a custom
    autograd backward changes the ``VJP``; a forward probe cannot see them."""
    m = images.shape[0]
    with _exact(), frozen(model), torch.enable_grad():
        x = tiled(images.detach(), rows or m).clone().requires_grad_(True)
        read = read_taps(model, x, list(taps))
        total = sum((value * _cotangent(value, i, m)).sum() for i, (_, value) in enumerate(sorted(read.items())))
        grad = None
        if isinstance(total, Tensor) and total.requires_grad:  # a forward that cuts autograd: the gradient probe says so
            (grad,) = torch.autograd.grad(total, x, allow_unused=True)
    out = {tap: sketch(value) for tap, value in read.items()}
    out[VJP] = sketch(grad if grad is not None else torch.zeros_like(x))
    return out


def forward_part(found: Fingerprint, rows: Optional[int] = None) -> Fingerprint:
    """The forward sketches of ``found`` (no ``VJP``), of its first ``rows`` images when given."""
    return {tap: value[:rows] if rows is not None else value for tap, value in found.items() if tap != VJP}


def tiled(images: Tensor, rows: int) -> Tensor:
    """``images`` (m, ...) repeated to ``rows`` rows (image i at rows i, i + m, ...)."""
    return images.repeat(-(-rows // images.shape[0]), *[1] * (images.dim() - 1))[:rows]


def first(read: Fingerprint, m: int) -> Fingerprint:
    """The fingerprint of the m probe images from a read of them tiled: its first m rows."""
    return {tap: value[:m] for tap, value in read.items()}


def coupling(read: Fingerprint, alone: Fingerprint, singles: Sequence[int], m: int) -> Optional[str]:
    """None when the batch ``read`` (rows, ...) of the m probe images tiled is what they compute alone:
    its rows of the ``singles`` images equal their reads one at a time (``alone``), and every row
    (input gradient included) the same image's first row; else where it differs."""
    rows = next(iter(read.values())).shape[0]
    at = [r for r in range(rows) if r % m in singles]
    which = [singles.index(r % m) for r in at]
    why = difference({tap: value[which] for tap, value in alone.items()}, {tap: read[tap][at] for tap in alone})
    return why or difference({tap: tiled(value[:m], rows) for tap, value in read.items()}, read)


def _own_rng(images: Tensor):
    """A context in which the probe's reads leave the global random state (CPU, and the images' GPU) as it was."""
    return torch.random.fork_rng(devices=[images.device] if images.device.type == "cuda" else [])


def coupled(name: str, where: str) -> BatchCoupledError:
    """The refusal of a batch-coupled model ``name``; ``where``: which reads differ, and by how much."""
    return BatchCoupledError(
        f"model {name!r} computes another output for an image when it is read with other images ({where}): a "
        "batch-coupled model (batch statistics, a forced dropout, a cross-image operation, a row-dependent forward) "
        "has no STIR independent of execution.batch_size; put it in eval mode or remove the coupling")


def probe_behaviour(model: nn.Module, name: str, images: Tensor, taps: Sequence[str], batch: int) -> Fingerprint:
    """The fingerprint of the probe ``images`` (m, c, h, w), read at once tiled to ``batch`` rows (at
    least m) with its input gradient (``fingerprint_vjp``), after checking that it is what the
    ``SINGLES`` images compute one at a time (``coupling``): ``BatchCoupledError`` naming the model,
    the tap and the batch otherwise, or ``UnmeasurableModel`` when a second read differs too (not
    deterministic). The global random state is restored after."""
    m = images.shape[0]
    rows = max(batch, m)
    singles = [i for i in SINGLES if i < m]
    with _own_rng(images):
        read = fingerprint_vjp(model, images, taps, rows)
        why = coupling(read, fingerprint(model, images[singles], taps, 1), singles, m)
        if why is not None:
            second = fingerprint(model, tiled(images, rows), taps, rows)  # random, or coupled? a second read tells
            for tap in second:
                check_deterministic(read[tap], second[tap], name, rows)
            raise coupled(name, f"{why}, one image at a time against a batch of {rows}")
    return first(read, m)


def check_batch(model: nn.Module, name: str, images: Tensor, tap: str, rows: int) -> None:
    """Before a measurement: the probe ``images`` (m, c, h, w) tiled to ``rows`` and read at once, forward
    only, give what they give read at their own batch of m; ``BatchCoupledError`` naming the batch
    otherwise. The fingerprint's read is capped at ``PROBE_CAP`` rows (its cost is paid on every served
    pair); a measurement reads at the run's full batch, where one more forward of that batch costs
    nothing beside its inversion's thousands, so a model coupled only above the cap is caught here."""
    m = images.shape[0]
    with _own_rng(images):
        own = fingerprint(model, images, [tap], m)
        whole = fingerprint(model, tiled(images, rows), [tap], rows)
    why = difference({t: tiled(value, rows) for t, value in own.items()}, whole)
    if why is not None:
        raise coupled(name, f"{why}, the probe read at once in a batch of {rows}, the run's, against its own {m}")


def variant_identity(static: str, probe: str, j: object) -> str:
    """The identity of behaviour variant ``j`` > 0 of a model whose static identity is ``static``."""
    return hashlib.sha256(f"stir-behaviour-variant-v1\n{static}\n{probe}\n{j}".encode()).hexdigest()


def variant_identities(static: str, held: Dict[str, List[Fingerprint]]) -> Set[str]:
    """Every identity a model of static identity ``static`` can have been keyed by, given its fingerprints
    ``held`` ({probe key: variants}, the shipped ones first): ``static``, each variant j > 0 of a key (as
    stores before issue 67 keyed them) and each pair j0.j1 of a run's key and its synthetic key."""
    out = {static} | {variant_identity(static, key, j) for key, variants in held.items() for j in range(1, len(variants))}
    for key, variants in held.items():
        if "|run:" in key:
            synthetic = max(1, len(held.get(key.split("|run:")[0], [])))
            out |= {variant_identity(static, key, f"{j0}.{j1}") for j0 in range(synthetic) for j1 in range(len(variants))}
    return out


def probe_key(images: Tensor, taps: Sequence[str]) -> str:
    """What a fingerprint was read on: the image shape and the taps ("3x32x32|logits,penultimate")."""
    return f"{'x'.join(str(s) for s in images.shape[1:])}|{','.join(taps)}"


def run_probe_key(images: Tensor, taps: Sequence[str]) -> str:
    """The key of the whole probe on the run's X ``images``: ``probe_key``, the run images' digest
    (sha256 of their float32 bytes) and ``vjp`` ("3x32x32|logits|run:1f0c...|vjp")."""
    run = images[:RUN_IMAGES].detach().to("cpu", torch.float32).contiguous()
    digest = hashlib.sha256(f"{tuple(run.shape)}".encode() + run.numpy().tobytes()).hexdigest()[:24]
    return f"{probe_key(images, taps)}|run:{digest}|{VJP}"


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
    {probe key: [fingerprint, ...]} each, read without code: ``stir.untrusted.load_plain``) and the
    folder's ``INDEX`` of them, after the read-only ``shipped`` folder's (the committed fingerprints of
    the shipped models). ``holds_results()`` says whether the folder's owner (a results store, an
    inversion cache) holds results: then a missing, unlisted or damaged fingerprint is refused."""

    def __init__(self, folder: Optional[Path], shipped: Optional[Path] = None,
                 holds_results: Optional[Callable[[], bool]] = None):
        self.folder = Path(folder) if folder is not None else None
        self.shipped = Path(shipped) if shipped is not None else None
        self.holds_results = holds_results or (lambda: False)

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
        except Exception as err:  # noqa: BLE001 - said in one line: shipped ones are pinned, local ones refused
            if folder == self.shipped:
                log.warning("fingerprint file %s is unusable (%s: %s); ignoring it", path, type(err).__name__, err)
                return {}
            self._refuse(f"its fingerprint file {path.name} is damaged ({type(err).__name__}: {err})")

    def _refuse(self, what: str) -> None:
        root = self.folder.parent
        raise UncheckedResults(
            f"{root} holds results but {what}: what the models that made them computed cannot be checked, so none "
            f"is served to a model; restore {self.folder} as it was, or move {root} aside to measure again")

    def _indexed(self) -> List[str]:
        path = self.folder / INDEX
        return path.read_text().split() if path.is_file() else []

    def _check_local(self, static: str) -> None:
        """``UncheckedResults`` when the folder's owner holds results and ``static``'s fingerprints may
        have been lost: no ``INDEX`` (the folder deleted; with fingerprint files, written before it was
        kept: ``python -m stir.store reindex`` lists them), or ``static`` listed there and its file
        missing. A damaged file is refused when read."""
        if (self.folder / INDEX).is_file():
            if (self.folder / f"{static}.pt").is_file() or static not in self._indexed() or not self.holds_results():
                return
            self._refuse(f"the fingerprints of model identity {static[:12]}..., listed in {self.folder.name}/"
                         f"{INDEX}, are missing")
        if not self.holds_results():
            return
        if any(self.folder.glob("*.pt")):
            root = self.folder.parent
            raise UncheckedResults(
                f"{root} holds results but its {self.folder.name}/{INDEX} is missing (a store written before it was "
                f"kept): list its fingerprint files with python -m stir.store reindex {root} (it checks that each "
                f"file is intact and that every model of the results has one), then run again")
        self._refuse(f"its fingerprint folder {self.folder.name}/ (or its {INDEX}) is missing")

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

        from stir.atomic import torch_save, write_text

        path = self.folder / f"{static}.pt"
        with FileLock(str(self.folder) + ".lock"):  # beside the folder: its deletion is seen under the lock
            self._check_local(static)
            self.folder.mkdir(parents=True, exist_ok=True)
            local = self._read(self.folder, static)
            variants = local.get(probe, [])
            for j, known in enumerate(variants):
                if difference(found, known) is None:
                    return len(shipped) + j, None
            first = (shipped or variants or [None])[0]
            why = difference(found, first) if first is not None else None
            local[probe] = [*variants, found]
            torch_save(local, path)  # the file first, then its line: a crash between leaves it unlisted, not lost
            listed = self._indexed()
            if static not in listed or not (self.folder / INDEX).is_file():
                write_text(self.folder / INDEX, "".join(f"{s}\n" for s in sorted({*listed, static})))
        return len(shipped) + len(variants), why
