"""Table 3's Delta: the mean perturbation eq. 8's controversial stimuli need, with an interval over images.

Nanda et al., ICML 2022, appendix C: Delta(target|ref) = mean_i ||x_i - x_c,i||_2 where x_c solves eq. 8
with ``ref`` as the model that keeps x_c like x (eq. 8's m1) and ``target`` as the one pushed away
(eq. 8's m2): the column "a|b" of Table 3 is Delta(a|b), b the reference, as in STIR(a|b)
(``stir.inversion.stimuli``). One result per direction and start, stored under its own kind
(``DELTA``) and keyed by both models' identities and taps, the images' digest, n and every setting of
the solver (``StimulusConfig.key``) and of the interval.

The interval is a percentile bootstrap of the mean over the n images (resampled with replacement:
a mean, unlike CKA, is not inflated by duplicated rows). It holds the image sample's variance only,
not the training seeds' nor the start's (the paper's +- is over 5 runs).
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor, nn

from stir.inversion.stimuli import StimulusConfig, controversial_stimuli
from stir.measure.plan import DEFAULT_TAP, check_images
from stir.models.identity import content_identity, tensor_digest
from stir.store import ResultStore

log = logging.getLogger(__name__)

DELTA = "controversial_delta"  # the store's kind of these results
RESAMPLES = 1000  # bootstrap resamples of the images behind each interval


@dataclass
class DeltaResult:
    """Delta(target|ref) of one start, with its per-image record (lists of n floats)."""

    ref: str  # display names
    target: str
    start: str
    n: int
    delta: float  # mean ||x - x_c||_2 over the n images
    low: float  # percentile bootstrap interval of the mean at ``confidence``
    high: float
    confidence: float
    median: float
    distance: List[float]  # ||x_i - x_c,i||_2
    start_distance: List[float]  # ||x_i - x_0,i||_2 (x_0 as the models see it)
    r1: List[float]  # ||ref(x_c) - ref(x)|| / ||ref(x)||: how well the reference still sees x
    r2: List[float]  # ||target(x_c) - target(x)|| / ||target(x)||: how far the target was pushed
    along: Dict[str, float] = field(default_factory=dict)  # {step t: Delta of the best iterate among x_0..x_t}
    settings: Dict[str, Any] = field(default_factory=dict)  # StimulusConfig.key(), taps, interval
    seconds: float = math.nan  # wall time of the solve where it was computed

    def to_dict(self) -> Dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "DeltaResult":
        out = cls(**d)
        if len(out.distance) != out.n or len(out.r1) != out.n or len(out.r2) != out.n:
            raise ValueError(f"a Delta of n={out.n} holds {len(out.distance)} distances")
        return out


def bootstrap_mean(values: Tensor, resamples: int = RESAMPLES, confidence: float = 0.95,
                   seed: int = 0) -> Tuple[float, float, float]:
    """(mean, low, high): the mean of (n,) ``values`` and its percentile bootstrap interval."""
    v = values.detach().double().cpu()
    mean = float(v.mean())
    if v.numel() < 2 or resamples < 1:
        return mean, math.nan, math.nan
    g = torch.Generator().manual_seed(seed)
    rows = torch.randint(0, v.numel(), (resamples, v.numel()), generator=g)  # (B, n)
    means = v[rows].mean(dim=1)
    alpha = (1 - confidence) / 2
    low, high = torch.quantile(means, torch.tensor([alpha, 1 - alpha], dtype=torch.float64))
    return mean, float(low), float(high)


def delta_parts(ids: Tuple[str, str], taps: Tuple[str, str], images: Tensor, cfg: StimulusConfig,
                confidence: float, resamples: int) -> Dict[str, Any]:
    """Store key parts of Delta(ids[1] | ids[0]) at taps (reference first)."""
    return dict(ref=[ids[0], taps[0]], target=[ids[1], taps[1]], images=tensor_digest(images), n=int(images.shape[0]),
                stimulus=cfg.key(), precision="32", interval={"confidence": confidence, "resamples": resamples})


def evaluate_delta(ref: nn.Module, target: nn.Module, images: Tensor, tap_ref: str = DEFAULT_TAP,
                   tap_target: Optional[str] = None, cfg: Optional[StimulusConfig] = None, *,
                   names: Tuple[str, str] = ("ref", "target"), ids: Optional[Tuple[str, str]] = None,
                   store: Optional[ResultStore] = None, record: Optional[Dict[str, Any]] = None,
                   confidence: float = 0.95, resamples: int = RESAMPLES) -> DeltaResult:
    """Delta(target|ref) on images (n, c, h, w) in [0, 1]: eq. 8 solved with ``ref`` kept and ``target``
    pushed (``stir.inversion.stimuli``), then the mean ||x - x_c||_2 with its interval over images.

    With a ``store`` the result is looked up first and stored once computed (kind ``DELTA``); a
    read-only store raises ``stir.store.NotStored`` for a missing one (nothing is measured).
    """
    cfg = cfg or StimulusConfig()
    check_images(images)
    taps = (tap_ref, tap_target or tap_ref)
    ids = tuple(ids) if ids is not None else (content_identity(ref), content_identity(target))

    def compute() -> DeltaResult:
        log.info("Delta(%s|%s): eq. 8 from the %s, %d images x %d steps of %g", names[1], names[0], cfg.start,
                 images.shape[0], cfg.steps, cfg.step_size)
        t0 = time.perf_counter()
        s = controversial_stimuli(ref, target, images, taps[0], taps[1], cfg)
        mean, low, high = bootstrap_mean(s.distance, resamples, confidence)
        as_list = lambda t: [float(v) for v in t.detach().cpu()]  # noqa: E731
        return DeltaResult(names[0], names[1], cfg.start, int(images.shape[0]), mean, low, high, confidence,
                           float(s.distance.median()), as_list(s.distance), as_list(s.start_distance), as_list(s.r1),
                           as_list(s.r2), along={str(t): float(v.mean()) for t, v in s.along.items()},
                           settings={**cfg.key(), "taps": list(taps), "resamples": resamples},
                           seconds=time.perf_counter() - t0)

    if store is None:
        return compute()
    return store.cached(DELTA, delta_parts(ids, taps, images, cfg, confidence, resamples), compute,
                        DeltaResult.from_dict, record)
