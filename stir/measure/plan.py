"""What a STIR measurement is asked for (``Estimator``), the checked inputs of one call (``Plan``),
and what identifies its results in the store (``direction_parts``, ``similarity_parts``).

An ``Estimator`` is every setting that can change a reported number: the similarity S_r, the k seed
draws, which IRIs (arbitrary, adversarial or both), the inversion (``stir.inversion.InversionConfig``),
the controversial-stimulus walk, the IRI floor under which a draw is refused, and the calibration
of every STIR value. How the work runs (batch sizes, cache, progress) is ``ExecutionConfig``: in no key.

A direction's store key holds both models' identities and taps, the images' digest, n and the
estimator: the inversion part is ``InversionConfig.key_settings`` per IRI kind, the same description
the inversion cache keys x' by, plus the settings that only judge x' (``tolerance``,
``min_fraction_iri``) and, for adversarial results, the difficulty walk.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from stir import similarity
from stir.inversion import ControversialConfig, ExecutionConfig, InversionConfig
from stir.inversion.config import resolved_budgets
from stir.inversion.objectives import resolve_forward
from stir.measure.calibration import CalibrationConfig
from stir.models.identity import tensor_digest

DIRECTION, SIMILARITY = "direction", "similarity"  # the store's kinds of STIR results
DEFAULT_TAP = "penultimate"  # where a measurement reads the models unless told otherwise
IRI_KINDS = ("arbitrary", "adversarial", "both")

Images = Union[Tensor, Sequence[Tensor]]  # X fixed for every draw, or one X per draw (k tensors)


@dataclass(frozen=True)
class Estimator:
    """Everything that changes a STIR number (Nanda et al., ICML 2022, eq. 6 and 7).

    ``measure`` S_r (``stir.similarity``), ``k`` seed draws (seeds ``inversion.seed + j``), ``iri``
    arbitrary | adversarial | both, ``inversion`` how IRIs are made (default: the published
    procedure), ``difficulty`` the controversial-stimulus walk, ``min_fraction_iri`` the fraction of
    IRIs below which a draw gives NaN (0: never), ``min_fraction_adversarial`` the fraction of
    adversarial X' at the IRI bound below which STIR_adv of the constrained objective is not measured
    (NaN with the count), ``calibration`` the floor, ceiling and interval
    every STIR value carries (``stir.measure.calibration``).
    """

    measure: str = "linear_cka"
    k: int = 5
    iri: str = "both"
    inversion: InversionConfig = field(default_factory=InversionConfig)
    difficulty: ControversialConfig = field(default_factory=ControversialConfig)
    min_fraction_iri: float = 0.0
    min_fraction_adversarial: float = 0.5
    calibration: CalibrationConfig = field(default_factory=CalibrationConfig)

    def __post_init__(self) -> None:
        check_estimator(self)

    @classmethod
    def of(cls, settings: Any) -> "Estimator":
        """The estimator that ``settings`` describe: any record with a field of each of this class's names
        (``python evaluate.py``'s ``EvaluateConfig``, whose keys are named after them), each carried as it
        is: the inversion and walk settings whole, resolved or not as they were given."""
        return cls(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(cls)})

    def resolved(self) -> "Estimator":
        """This estimator with every budget filled in (``stir.inversion.config.resolved_budgets``): the
        inversion's steps, and the walk's following them when unset, so that the store key, the record
        and the walk all see the steps actually walked; itself when nothing was unset (``python
        evaluate.py``'s estimator, resolved where its config is read)."""
        return resolved_budgets(self)

    @property
    def arbitrary(self) -> bool:
        return self.iri in ("arbitrary", "both")

    @property
    def adversarial(self) -> bool:
        return self.iri in ("adversarial", "both")

    @property
    def kinds(self) -> List[str]:
        """The IRI kinds this estimator makes: ["arbitrary"], ["adversarial"] or both."""
        return [kind for kind, on in (("arbitrary", self.arbitrary), ("adversarial", self.adversarial)) if on]


def check_iri(iri: str, key: str = "iri") -> None:
    """``iri`` is one of ``IRI_KINDS``; else a ValueError that names ``key`` (where the value was given)."""
    if iri not in IRI_KINDS:
        raise ValueError(f"{key} must be one of {list(IRI_KINDS)}, got {iri!r}")


MAX_K = 1000  # seed draws: each one inverts all n images again


def check_estimator(estimator: Any) -> None:
    """The one check of an estimator's own settings: a ValueError naming the key (the keys of
    ``python evaluate.py`` have the same names, so its ``EvaluateConfig`` is checked by this as it is,
    before the one ``Estimator`` of a run is built; its config reports the error as a one-line
    ``ConfigError``). The inversion, walk and calibration check themselves (their ``__post_init__``)."""
    try:
        similarity.get(estimator.measure)  # a registered name or a similarity-repository id
    except ValueError as err:
        raise ValueError(f"measure={estimator.measure!r}: {err}") from None
    check_iri(estimator.iri)
    k = estimator.k
    if int(k) != k or k < 1:
        raise ValueError(f"k (seed draws) must be a positive integer, got {k!r}")
    if k > MAX_K:
        raise ValueError(f"k={k} seed draws is beyond {MAX_K}: each draw is a full inversion of the n images "
                         "(the paper's k is 5; the interval over images, not more draws, is the precision); lower it")
    for key in ("min_fraction_iri", "min_fraction_adversarial"):
        value = getattr(estimator, key)
        if not 0 <= value <= 1:
            raise ValueError(f"{key} must be in [0, 1], got {value}")


@dataclass(frozen=True)
class Plan:
    """The checked inputs of one call: images, the estimator, how it runs, resolved precision."""

    images: Tensor  # (n, c, h, w) in [0, 1]: X (of draw 0 when resampled), the plain similarity's images
    draw_images: Tuple[Tensor, ...]  # X of each draw j: k times ``images``, or the k resampled sets
    digest: str  # sha256 of the images' dtype, shape and bytes (every draw's when resampled)
    estimator: Estimator
    run: ExecutionConfig
    precision: str  # the models' precision in the inversion, "auto" resolved on the images' device
    resampled: bool

    @property
    def n(self) -> int:
        return self.images.shape[0]

    @property
    def cfg(self) -> InversionConfig:
        return self.estimator.inversion

    @property
    def measure(self) -> str:
        return self.estimator.measure

    @property
    def k(self) -> int:
        return self.estimator.k

    @property
    def iri(self) -> str:
        return self.estimator.iri

    @property
    def batch_size(self) -> int:
        """Images per no-gradient measurement pass."""
        return self.run.eval_batch_size

    @property
    def inversion(self) -> Dict[str, Dict[str, Any]]:
        """{IRI kind: ``InversionConfig.key_settings``} of the kinds this plan makes."""
        return {kind: self.cfg.key_settings(kind == "adversarial", self.precision) for kind in self.estimator.kinds}

    @property
    def settings(self) -> Dict[str, Any]:
        """What produced the numbers, stored beside them (the estimator, resolved)."""
        cfg = self.cfg
        inversion = {**dataclasses.asdict(cfg), "precision": self.precision,
                     "fake_relu": cfg.fake_relu_key, "record_steps": list(cfg.snapshot_steps), "betas": list(cfg.betas)}
        settings = {"inversion": inversion, "seed": cfg.seed, "seeds": [cfg.seed + j for j in range(self.k)],
                    "measure": self.measure, "resample_images": self.resampled,
                    "min_fraction_iri": self.estimator.min_fraction_iri,
                    "min_fraction_adversarial": self.estimator.min_fraction_adversarial,
                    "calibration": dataclasses.asdict(self.estimator.calibration)}
        if self.estimator.adversarial:
            settings["difficulty"] = dataclasses.asdict(self.estimator.difficulty)
        return settings


def check_images(images: Tensor) -> None:
    """X must be a non-empty floating (n, c, h, w) batch in [0, 1] (models normalise internally)."""
    if not isinstance(images, Tensor) or images.dim() != 4 or images.shape[0] == 0:
        raise ValueError(f"images must be a non-empty (n, c, h, w) tensor, got {getattr(images, 'shape', type(images))}")
    if not images.dtype.is_floating_point:
        raise ValueError(f"images must be floating point in [0, 1], got dtype {images.dtype}")
    lo, hi = images.min().item(), images.max().item()
    if lo < 0 or hi > 1:
        raise ValueError(f"images must lie in [0, 1] (models normalise internally), got range [{lo:.3g}, {hi:.3g}]")


def make_plan(images: Images, estimator: Optional[Estimator] = None, run: Optional[ExecutionConfig] = None) -> Plan:
    """Check the images (X, or k sets of one shape for resampled draws) and resolve the settings (an
    estimator's unset budgets: ``resolved_budgets``; the models' precision on the images' device)."""
    estimator = resolved_budgets(estimator or Estimator())  # itself when resolved already (python evaluate.py's)
    resampled = not isinstance(images, Tensor)
    sets = [x.detach() for x in images] if resampled else [images]
    for x in sets:
        check_images(x)
    if resampled and (len(sets) != estimator.k or len({tuple(x.shape) for x in sets}) != 1):
        raise ValueError(f"resampled images must be k={estimator.k} tensors of one shape, got {[tuple(x.shape) for x in sets]}")
    run = run or ExecutionConfig()
    precision = resolve_forward(estimator.inversion.model_precision, run.channels_last, sets[0].device).precision
    digest = tensor_digest(torch.stack(sets)) if resampled else tensor_digest(sets[0])
    draws = tuple(sets) if resampled else (sets[0],) * estimator.k
    return Plan(sets[0], draws, digest, estimator, run, precision, resampled)


def direction_parts(plan: Plan, ids: Tuple[str, str], taps: Tuple[str, str]) -> Dict[str, Any]:
    """Store key parts of the direction (target ids[1] at taps[1]) given (reference ids[0] at taps[0])."""
    est = plan.estimator
    parts = dict(ref=[ids[0], taps[0]], target=[ids[1], taps[1]], images=plan.digest, n=plan.n,
                 measure=plan.measure, k=plan.k, iri=plan.iri, inversion=plan.inversion,
                 judging={"tolerance": plan.cfg.tolerance, "min_fraction_iri": est.min_fraction_iri},
                 calibration=dataclasses.asdict(est.calibration))
    if est.adversarial:
        parts["difficulty"] = dataclasses.asdict(est.difficulty)
        parts["judging"]["min_fraction_adversarial"] = est.min_fraction_adversarial
    return parts


def similarity_parts(plan: Plan, ids: Tuple[str, str], taps: Tuple[str, str]) -> Dict[str, Any]:
    """Store key parts of S_r(m1(X), m2(X)); for a symmetric measure the order of the models is ignored."""
    models = [[ids[0], taps[0]], [ids[1], taps[1]]]
    if similarity.is_symmetric(plan.measure):
        models = sorted(models)
    return dict(models=models, images=plan.digest, n=plan.n, measure=plan.measure)
