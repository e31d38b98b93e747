"""What identifies a measurement: the checked settings of one call (``Plan``) and the store keys.

A direction's key holds both models' identities and taps, the images' digest, n, k, the IRI kind,
the measure, every InversionConfig field that can change a reported number (``steps`` and
``precision`` resolved, FakeReLU resolved) and, for adversarial results, the difficulty settings.
``lookup`` / ``save`` read and write the ``ResultStore`` by kind and key; ``computed`` computes a
missing result under the key's lock, so two processes never compute the same one twice.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn

from stir import similarity
from stir.evaluation.results import IRI_KINDS
from stir.evaluation.store import ResultStore
from stir.inversion import InversionConfig, model_fingerprint
from stir.inversion.cache import tensor_digest
from stir.inversion.config import RUN_ONLY_SETTINGS, ControversialConfig
from stir.inversion.objectives import resolve_forward

DIRECTION, SIMILARITY = "direction", "similarity"  # the store's kinds
DEFAULT_TAP = "penultimate"  # where a measurement reads the models unless told otherwise


Images = Union[Tensor, Sequence[Tensor]]  # X fixed for every draw, or one X per draw (k tensors)


@dataclass(frozen=True)
class Plan:
    """The checked, resolved settings shared by every measurement of one call.

    ``inversion`` holds the InversionConfig fields that can change a result (``steps`` and
    ``precision`` resolved; ``seed`` = the base seed), the part of the settings in every key.
    """

    images: Tensor  # (n, c, h, w) in [0, 1]: X (of draw 0 when resampled), the plain similarity's images
    draw_images: Tuple[Tensor, ...]  # X of each draw j: k times ``images``, or the k resampled sets
    digest: str  # sha256 of the images' dtype, shape and bytes (every draw's when resampled)
    measure: str
    k: int
    iri: str
    cfg: InversionConfig
    inversion: Dict[str, Any]
    difficulty_cfg: ControversialConfig
    resampled: bool

    @property
    def n(self) -> int:
        return self.images.shape[0]

    @property
    def batch_size(self) -> int:
        return self.cfg.eval_batch_size

    @property
    def arbitrary(self) -> bool:
        return self.iri in ("arbitrary", "both")

    @property
    def adversarial(self) -> bool:
        return self.iri in ("adversarial", "both")

    @property
    def difficulty(self) -> Dict[str, Any]:
        return dataclasses.asdict(self.difficulty_cfg)

    @property
    def settings(self) -> Dict[str, Any]:
        settings = {"inversion": self.inversion, "seed": self.cfg.seed,
                    "seeds": [self.cfg.seed + j for j in range(self.k)], "measure": self.measure,
                    "resample_images": self.resampled}
        if self.adversarial:
            settings["difficulty"] = self.difficulty
        return settings


def make_plan(
    images: Images, measure: str = "linear_cka", k: int = 5, iri: str = "both",
    inversion: Optional[InversionConfig] = None, difficulty: Optional[ControversialConfig] = None,
) -> Plan:
    """Validate the arguments and resolve the settings (what ``evaluate_*`` do first)."""
    return plan_for(images, measure, k, iri, inversion, difficulty)


def direction_key(plan: Plan, ids: Tuple[str, str], taps: Tuple[str, str]) -> str:
    """Store key of the direction (target ids[1] at taps[1]) given (reference ids[0] at taps[0])."""
    extra = {"difficulty": plan.difficulty} if plan.adversarial else {}
    return ResultStore.key(
        kind=DIRECTION, ref=[ids[0], taps[0]], target=[ids[1], taps[1]], images=plan.digest, n=plan.n,
        measure=plan.measure, k=plan.k, iri=plan.iri, inversion=plan.inversion, **extra,
    )


def similarity_key(plan: Plan, ids: Tuple[str, str], taps: Tuple[str, str]) -> str:
    """Store key of S_r(m1(X), m2(X)); for a symmetric measure the order of the models is ignored."""
    models = [[ids[0], taps[0]], [ids[1], taps[1]]]
    if similarity.is_symmetric(plan.measure):
        models = sorted(models)
    return ResultStore.key(kind=SIMILARITY, models=models, images=plan.digest, n=plan.n, measure=plan.measure)


def _check_images(images: Tensor) -> None:
    if not isinstance(images, Tensor) or images.dim() != 4 or images.shape[0] == 0:
        raise ValueError(f"images must be a non-empty (n, c, h, w) tensor, got {getattr(images, 'shape', type(images))}")
    if not images.dtype.is_floating_point:
        raise ValueError(f"images must be floating point in [0, 1], got dtype {images.dtype}")
    lo, hi = images.min().item(), images.max().item()
    if lo < 0 or hi > 1:
        raise ValueError(f"images must lie in [0, 1] (models normalise internally), got range [{lo:.3g}, {hi:.3g}]")


def plan_for(images: Images, measure: str, k: int, iri: str, inversion: Optional[InversionConfig],
          difficulty: Optional[ControversialConfig] = None) -> Plan:
    resampled = not isinstance(images, Tensor)
    sets = [x.detach() for x in images] if resampled else [images]
    for x in sets:
        _check_images(x)
    if resampled and (len(sets) != k or len({tuple(x.shape) for x in sets}) != 1):
        raise ValueError(f"resampled images must be k={k} tensors of one shape, got {[tuple(x.shape) for x in sets]}")
    similarity.get(measure)  # unknown name: ValueError listing the valid ones
    if iri not in IRI_KINDS:
        raise ValueError(f"iri must be one of {IRI_KINDS}, got {iri!r}")
    if int(k) != k or k < 1:
        raise ValueError(f"k (seed draws) must be a positive integer, got {k!r}")
    cfg = inversion or InversionConfig()
    settings = {f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name not in RUN_ONLY_SETTINGS}
    precision = resolve_forward(cfg.model_precision, cfg.channels_last, sets[0].device).precision  # "auto" resolved
    settings.update(steps=cfg.num_steps, precision=precision, betas=list(cfg.betas),
                    fake_relu=cfg.use_fake_relu, record_steps=list(cfg.snapshot_steps))
    if iri == "arbitrary":
        del settings["adversarial_weight"], settings["adversarial_objective"]  # read by adversarial IRIs only
    digest = tensor_digest(torch.stack(sets)) if resampled else tensor_digest(sets[0])
    draws = tuple(sets) if resampled else (sets[0],) * int(k)
    return Plan(sets[0], draws, digest, measure, int(k), iri, cfg, settings, difficulty or ControversialConfig(), resampled)


def identities(ids: Optional[Sequence[str]], m1: nn.Module, m2: nn.Module) -> Tuple[str, str]:
    """The two models' identities in store keys: ``ids`` when given, else their content hashes."""
    return tuple(ids) if ids is not None else (model_fingerprint(m1), model_fingerprint(m2))


def lookup(store: Optional[ResultStore], kind: str, key: str, parse: Callable[[Dict[str, Any]], Any]):
    if store is None:
        return None
    entry = store.get(kind, key, validate=parse)
    return None if entry is None else parse(entry["result"])


def save(store: Optional[ResultStore], kind: str, key: str, result, record: Optional[Dict[str, Any]]) -> None:
    if store is not None:
        store.put(kind, key, result.to_dict(), record)


def computed(store: Optional[ResultStore], kind: str, key: str, parse: Callable[[Dict[str, Any]], Any],
             record: Optional[Dict[str, Any]], compute: Callable[[], Any]):
    """``compute()`` saved under ``key``, unless another process stored it meanwhile.

    Under the store's lock of ``key``: a second process needing the same result waits for the
    first, then reads its entry instead of computing it again.
    """
    if store is None:
        return compute()
    with store.lock(kind, key):
        entry = store.get(kind, key, validate=parse, recheck=True)
        result = None if entry is None else parse(entry["result"])
        if result is None:
            result = compute()
            save(store, kind, key, result, record)
    return result
