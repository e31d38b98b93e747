"""One stitching measurement: build A[:tap_a] -> S -> B[tap_b:], fit S, report accuracy.

Model stitching (Lenc & Vedaldi 2015; Bansal, Nakkiran & Barak 2021; Csiszarik et al. 2021) asks a
functional question beside STIR's representational one: can B's back use A's representation
through a simple map? For a stitching layer of kind ``kind`` (``stir.stitching.layers``) trained on
the training images with stitching seed ``seed``:

    acc_stitched = accuracy of B[tap_b:](S(A[:tap_a](x))) on the test images
    gap          = acc_b - acc_stitched          (acc_b: B's own accuracy on the same test images)

It is directional (A's front, B's back). Godfrey et al. (NeurIPS 2022, section 5) report that
stitching two CIFAR-10 ResNet20s through a G_ReLU-restricted layer (a permutation times a positive
scaling) loses at most about 10% accuracy, close to a full linear layer.

The seed chooses which ``settings.train_images`` of the training pool S is fitted on (all of them
when None) and the batch order. ``stitch`` is a pure measurement; what identifies its result in a
results store (A, B, taps, kind, seed, settings, data) is ``stitch_parts``.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from stir.data import sample_indices
from stir.models import frozen
from stir.models.identity import tensor_digest
from stir.models.depth import depth_taps
from stir.models.taps import LOGITS, read_taps
from stir.stitching.fit import INITS, Stitched, accuracy, as_images, channel_stats, initialise, train_layer
from stir.stitching.layers import KINDS, GReLUStitch, build_layer

log = logging.getLogger(__name__)

STORE_KIND = "stitching"
# Part of every store key: bump when what a stored stitching result means changes (initialisation,
# training loop, accuracy), so that old entries are recomputed rather than reused.
ALGORITHM_VERSION = 1


@dataclass(frozen=True)
class StitchSettings:
    """How S is fitted. Every field is part of the store key."""

    epochs: int = 1  # passes over the training images
    batch_size: int = 128
    lr: float = 1e-2  # Adam
    train_images: Optional[int] = None  # images of the training pool per seed (None: all)
    init: str = "match"  # match | identity (see stir.stitching.fit)

    def check(self) -> None:
        if self.init not in INITS:
            raise ValueError(f"unknown stitching init {self.init!r}; choose one of {list(INITS)}")
        if self.epochs < 0 or self.batch_size < 1 or self.lr <= 0:
            raise ValueError(f"stitching settings need epochs >= 0, batch_size >= 1, lr > 0: {self}")


@dataclass
class StitchResult:
    """One stitching seed. Accuracies are fractions of the test images."""

    kind: str
    tap_a: str
    tap_b: str
    seed: int
    acc_stitched: float
    acc_init: float  # before training S (identity: the same as acc_stitched)
    acc_b: float
    gap: float  # acc_b - acc_stitched
    losses: List[float] = field(default_factory=list)  # mean training loss per epoch
    perm: Optional[List[int]] = None  # g_relu: B's channel j reads A's channel perm[j]
    scales: Optional[List[float]] = None  # g_relu: the positive scales D after training
    n_train: int = 0
    n_test: int = 0
    seconds: float = 0.0
    a: str = "A"
    b: str = "B"

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "StitchResult":
        names = {f.name for f in dataclasses.fields(cls)}
        missing = {"kind", "tap_a", "tap_b", "seed", "acc_stitched", "acc_b", "gap"} - set(d)
        if missing:
            raise ValueError(f"stitching result lacks {sorted(missing)}")
        return cls(**{k: v for k, v in d.items() if k in names})


def stitch_parts(ids: Tuple[str, str], taps: Tuple[str, str], kind: str, seed: int, settings: StitchSettings,
                 data: Dict[str, Any]) -> Dict[str, Any]:
    """What identifies one stitching result in a results store: the algorithm version, both models'
    identities and taps, the layer kind, the seed, the settings and the data digests."""
    return dict(algorithm=ALGORITHM_VERSION, ids=list(ids), taps=list(taps), layer=kind, seed=seed,
                settings=asdict(settings), data=data)


def data_identity(train: Tuple[Tensor, Tensor], test: Tuple[Tensor, Tensor]) -> Dict[str, Any]:
    """Digests of the training pool and the test images with their labels (device-independent)."""
    return {name: {"images": tensor_digest(x), "labels": tensor_digest(y), "n": int(x.shape[0])}
            for name, (x, y) in (("train", train), ("test", test))}


def stitch(
    a: nn.Module,
    b: nn.Module,
    tap_a: str,
    tap_b: str,
    kind: str,
    train: Tuple[Tensor, Tensor],
    test: Tuple[Tensor, Tensor],
    *,
    seed: int = 0,
    settings: StitchSettings = StitchSettings(),
    acc_b: Optional[float] = None,
    names: Tuple[str, str] = ("A", "B"),
    eval_batch_size: int = 500,
    progress: bool = False,
) -> StitchResult:
    """Stitch A[:tap_a] -> S -> B[tap_b:] with a layer of ``kind``, fit S on ``train``, test on ``test``.

    Args:
        a, b: networks taking images in [0, 1] (b, 3, h, w) to logits, on the images' device.
        tap_a, tap_b: corresponding taps (``stir.models.depth.layer_pairs`` pairs them by depth); any
            tap form ``stir.models.taps`` reads, cut with ``run_from`` (module outputs and inputs).
        kind: ``identity`` | ``linear`` | ``g_relu`` | ``orthogonal`` (``stir.stitching.layers``).
        train, test: (images (n, 3, h, w) uint8 or float in [0, 1], labels (n,) int64).
        seed: the stitching seed (subset of ``train`` when ``settings.train_images`` is set, batch order).
        acc_b: B's accuracy on ``test`` when already known (else measured).
        progress: report the fit (``stir.progress``: batches done, the running loss, the ETA).
    Returns:
        a ``StitchResult``; A and B come back with their weights, buffers and flags unchanged. To keep
        results, wrap the call in a results store (``ResultStore.cached`` keyed by ``stitch_parts``).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown stitching layer {kind!r}; choose one of {list(KINDS)}")
    for model, tap in ((a, tap_a), (b, tap_b)):
        if tap == LOGITS:  # the output: nothing of B follows it, and A's front would be all of A
            raise ValueError(f"cannot stitch {type(model).__name__} at {tap!r}; stitchable taps: {depth_taps(model)}")
    settings.check()
    started = time.perf_counter()
    images, labels = train
    if settings.train_images is not None and settings.train_images < images.shape[0]:
        idx = sample_indices(settings.train_images, images.shape[0], seed).to(images.device)
        images, labels = images[idx], labels[idx]
    with frozen(a, b), torch.no_grad():
        probe = as_images(images[:2])
        za, zb = read_taps(a, probe, [tap_a])[tap_a], read_taps(b, probe, [tap_b])[tap_b]
    try:  # S lives on the images' device, in the dtype of A's representation
        layer = build_layer(kind, tuple(za.shape[1:]), tuple(zb.shape[1:]), device=za.device, dtype=za.dtype)
    except ValueError as err:
        raise ValueError(f"{names[0]}[{tap_a}] -> {names[1]}[{tap_b}]: {err}") from None
    stats = None
    if settings.init == "match" and kind not in ("identity",):
        stats = channel_stats(a, b, tap_a, tap_b, images, eval_batch_size)
    initialise(layer, stats, settings.init)
    net = Stitched(a, tap_a, layer, b, tap_b)
    test_x, test_y = test
    if acc_b is None:
        acc_b = accuracy(b, test_x, test_y, eval_batch_size)
    acc_init = accuracy(net, test_x, test_y, eval_batch_size, a, b)
    losses = train_layer(net, images, labels, epochs=settings.epochs, batch_size=settings.batch_size,
                         lr=settings.lr, seed=seed, progress=progress,
                         desc=f"stitching {names[0]}[{tap_a}] -> {kind} -> {names[1]}[{tap_b}], seed {seed}")
    acc = accuracy(net, test_x, test_y, eval_batch_size, a, b) if losses else acc_init
    result = StitchResult(
        kind=kind, tap_a=tap_a, tap_b=tap_b, seed=seed, acc_stitched=acc, acc_init=acc_init, acc_b=acc_b,
        gap=acc_b - acc, losses=losses, n_train=int(images.shape[0]), n_test=int(test_x.shape[0]),
        seconds=time.perf_counter() - started, a=names[0], b=names[1],
        perm=layer.perm.tolist() if isinstance(layer, GReLUStitch) else None,
        scales=layer.log_scale.detach().exp().tolist() if isinstance(layer, GReLUStitch) else None,
    )
    log.info("stitch %s[%s] -> %s -> %s[%s] seed %d: accuracy %.4f (init %.4f), %s alone %.4f, gap %.4f (%.1f s)",
             names[0], tap_a, kind, names[1], tap_b, seed, acc, acc_init, names[1], acc_b, result.gap, result.seconds)
    return result


def stitch_seeds(
    a: nn.Module, b: nn.Module, tap_a: str, tap_b: str, kind: str, train, test, *, seeds: Sequence[int],
    **kwargs: Any,
) -> List[StitchResult]:
    """``stitch`` once per stitching seed (identity, which fits nothing, once: its seed is irrelevant)."""
    return [stitch(a, b, tap_a, tap_b, kind, train, test, seed=s, **kwargs) for s in seeds_of(kind, seeds)]


def seeds_of(kind: str, seeds: Sequence[int]) -> List[int]:
    """The stitching seeds a layer kind is fitted with: identity (nothing to fit) once."""
    return list(seeds)[:1] if kind == "identity" else list(seeds)
