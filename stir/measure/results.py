"""Result types of STIR measurements: plain dataclasses that round-trip through JSON.

Nanda et al., ICML 2022, "Measuring Representational Robustness of Neural Networks Through Shared
Invariances". Notation: m1 = reference, m2 = target, X = n images in [0, 1], X'_j the IRIs of draw j.

* ``Stat``              mean and std over the k draws, and the per-draw values.
* ``DirectionResult``   everything about "target given reference": STIR (eq. 6), STIR_adv (eq. 7),
                        prediction agreement on the reference's IRIs, controversial-stimulus
                        difficulty, IRI quality. The unit of work and of storage.
* ``SimilarityResult``  the plain similarity S_r(m1(X), m2(X)); stored separately (no direction).
* ``PairResult``        the plain similarity and one ``DirectionResult`` per direction of one pair.
* ``LayerwiseResult``   one ``PairResult`` per corresponding tap pair, and least-squares slopes of
                        STIR over relative depth.

Every STIR and STIR_adv value carries its ``Calibration`` (``stir.measure.calibration``): floor,
ceiling, normalised value and interval. Rows for tables and summary keys for W&B are derived from
these types by the reporting side (``stir.experiments.rows``); nothing is parsed back from strings.

Conventions: a quantity that was not computed (e.g. adversarial ones when ``iri="arbitrary"``) is
None; a quantity that was computed but is undefined on the data (e.g.
a constant representation) is NaN, with a human-readable reason in ``notes``. ``to_dict()`` /
``from_dict()`` round-trip through ``json`` (NaN is written as the ``NaN`` literal Python reads back).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Dict, List, Optional, Sequence, Tuple

from stir.measure import text
from stir.measure.calibration import Calibration

# The two directions of a pair ("m2|m1": IRIs of m1, measured on m2), and their slugs in row names.
DIRECTIONS = ("m2|m1", "m1|m2")
SLUGS = {"m2|m1": "m2_given_m1", "m1|m2": "m1_given_m2"}


@dataclass
class Stat:
    """Mean and standard deviation over k draws, and the k per-draw values.

    ``std`` is the population standard deviation (ddof = 0; 0 for one draw), as numpy's default.
    A NaN draw makes ``mean`` and ``std`` NaN: an undefined draw is never averaged away silently
    (its reason is in the owning result's ``notes``).
    """

    mean: float
    std: float
    values: List[float]

    @classmethod
    def from_values(cls, values: Sequence[float]) -> "Stat":
        values = [float(v) for v in values]
        if not values:
            raise ValueError("a Stat needs at least one value")
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        return cls(mean, std, values)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Stat":
        """The stored Stat, checked: a mean that is not the mean of its values (an edited entry) is refused."""
        stat = cls(float(d["mean"]), float(d["std"]), [float(v) for v in d["values"]])
        if stat.values and all(map(math.isfinite, stat.values)):
            mean = sum(stat.values) / len(stat.values)
            if not abs(stat.mean - mean) <= 1e-9 * max(1.0, abs(mean)):
                raise ValueError(f"mean {stat.mean!r} is not the mean {mean!r} of its values")
        return stat

    def __str__(self) -> str:
        """'0.512 ± 0.010 over 2 draws' (``repr`` keeps every field)."""
        return f"{text.over_draws(self)} over {len(self.values)} draw{'s' if len(self.values) != 1 else ''}"


def _stat_or_none(d: Optional[Dict[str, Any]]) -> Optional[Stat]:
    return None if d is None else Stat.from_dict(d)


@dataclass
class DirectionResult:
    """One direction, "target given reference" (target | ref), over k seed draws.

    Attributes:
        ref, target: display names.  ref_id, target_id: identities (default: ``model_fingerprint``).
        tap_ref, tap_target: where each model is read.  measure: the similarity S_r.
        n: images.  k: seed draws.  iri: "arbitrary" | "adversarial" | "both".
        stir: STIR(tgt|ref) = 1/k sum_j S_r(tgt(X), tgt(X'_j)), X'_j arbitrary IRIs of ref (eq. 6).
        stir_adv: the same with adversarial IRIs (ref matched, tgt pushed away) (eq. 7).
        agreement: fraction of images with argmax ref(X'_j) == argmax tgt(X'_j), X'_j arbitrary IRIs.
        difficulty: Delta, the mean over the images that became controversial of the smallest
            ||x_c - x||_2 that made them so, walking from x (paper appendix C, eq. 8;
            ``stir.inversion.controversial``); NaN in a draw where none did.
        difficulty_fraction: the fraction of images that became controversial within the budget.
        difficulty_censored: difficulty as a censored measurement over the k draws' images pooled,
            in two readings ("walk": how far the walk went, censored at its budget; "perturbation":
            ||x_c - x||, censored at the largest displacement reached;
            ``stir.inversion.controversial.ControversialResult.censored``), each with the Kaplan-Meier
            ``median`` (a lower bound when ``median_censored``), ``restricted_mean`` (a lower bound of
            the mean), ``fraction``, ``max_distance``; empty when not computed.
        quality: {"arbitrary" | "adversarial": {"median_residual", "fraction_iri", "fraction_iri_std",
            "median_target_distance", "evaluations", "cached_draws"}}; residuals and target
            distances pooled over the n * k inversions; "median_target_distance" is the engine's
            m2_distance ||tgt(x') - tgt(x)|| / ||tgt(x)||.
        convergence: {"arbitrary" | "adversarial": {"steps", "stir", "stir_std", "median_residual",
            "fraction_iri"}}: the STIR (STIR_adv) value at each recorded step of the inversion budget,
            measured at the best iterates so far (mean and std over draws), with their residuals.
        calibration: {"stir" | "stir_adv": Calibration}: floor, ceiling, normalised value, interval.
        debiased: {"stir" | "stir_adv": Stat}: with linear CKA as S_r, the same values with debiased
            linear CKA (Murphy et al. 2024; chance level about 0 at every n) on the same pairs; empty otherwise.
        notes: reasons for every NaN, and what a reader must know about the values.
        settings: what produced the numbers (the estimator, resolved).
    """

    ref: str
    target: str
    ref_id: str
    target_id: str
    tap_ref: str
    tap_target: str
    measure: str
    n: int
    k: int
    iri: str
    stir: Optional[Stat] = None
    stir_adv: Optional[Stat] = None
    agreement: Optional[Stat] = None
    difficulty: Optional[Stat] = None
    difficulty_fraction: Optional[Stat] = None
    difficulty_censored: Dict[str, Dict[str, float]] = field(default_factory=dict)
    quality: Dict[str, Dict[str, float]] = field(default_factory=dict)
    convergence: Dict[str, Dict[str, List[float]]] = field(default_factory=dict)
    calibration: Dict[str, Calibration] = field(default_factory=dict)
    debiased: Dict[str, Stat] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)
    settings: Dict[str, Any] = field(default_factory=dict)

    STATS = ("stir", "stir_adv", "agreement", "difficulty", "difficulty_fraction")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "DirectionResult":
        kwargs = {f.name: d[f.name] for f in fields(cls)}  # KeyError on a missing field: not ours
        kwargs.update({name: _stat_or_none(d[name]) for name in cls.STATS})
        kwargs["calibration"] = {name: Calibration.from_dict(c) for name, c in d["calibration"].items()}
        kwargs["debiased"] = {name: Stat.from_dict(v) for name, v in d["debiased"].items()}
        for name in ("n", "k"):
            if isinstance(kwargs[name], bool) or not isinstance(kwargs[name], int):
                raise ValueError(f"{name} is {kwargs[name]!r}, not an integer")
        for name, cal in kwargs["calibration"].items():  # the calibrated value is the Stat's mean
            stat = kwargs.get(name)
            if isinstance(stat, Stat) and math.isfinite(stat.mean) and math.isfinite(cal.value) \
                    and not abs(stat.mean - cal.value) <= 1e-9 * max(1.0, abs(cal.value)):
                raise ValueError(f"calibration.{name}.value {cal.value!r} is not {name}.mean {stat.mean!r}")
        return cls(**kwargs)


@dataclass
class SimilarityResult:
    """The plain similarity S_r(m1(X), m2(X)) at (tap1, tap2), over all n images, eval mode."""

    ref: str
    target: str
    ref_id: str
    target_id: str
    tap_ref: str
    tap_target: str
    measure: str
    n: int
    value: float
    notes: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "SimilarityResult":
        kwargs = {f.name: d[f.name] for f in fields(cls)}
        kwargs["value"] = float(kwargs["value"])
        return cls(**kwargs)


@dataclass
class PairResult:
    """One pair m1 = ``ref``, m2 = ``target``: the plain similarity and one result per direction.

    ``directions["m2|m1"]`` is STIR(m2|m1) and the rest of that direction (IRIs of m1, measured on
    m2), ``directions["m1|m2"]`` the other; a direction not requested is absent.
    """

    similarity: SimilarityResult
    directions: Dict[str, DirectionResult] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        return self.similarity.ref

    @property
    def target(self) -> str:
        return self.similarity.target

    @property
    def measure(self) -> str:
        return self.similarity.measure

    def get(self, direction: str) -> Optional[DirectionResult]:
        return self.directions.get(direction)

    def stat(self, direction: str, name: str) -> Optional[Stat]:
        """A statistic ("stir", "stir_adv", ...) of one direction; None when not computed."""
        d = self.directions.get(direction)
        return None if d is None else getattr(d, name)

    def __str__(self) -> str:
        """STIR both ways with interval, floor and normalised value, STIR_adv, the plain similarity
        (``stir.measure.text.pair_text``; ``repr`` keeps every field)."""
        return text.pair_text(self)

    def notes(self) -> List[Tuple[str, str]]:
        """Every note as (source, text): "similarity", "m2|m1" or "m1|m2"."""
        return [("similarity", n) for n in self.similarity.notes] + [
            (label, n) for label, d in self.directions.items() for n in d.notes]


@dataclass
class LayerwiseResult:
    """One ``PairResult`` per corresponding tap pair, and STIR's least-squares trend over depth.

    ``depths[i]`` is the relative depth (0 = first tap, 1 = last) of ``rows[i]``. ``fits[direction]
    [reading]`` = {"slope", "intercept"} fits the reading = slope * depth + intercept, for the raw
    values ("stir", "stir_adv"; mean over draws) and the calibrated ones a depth claim rests on
    ("stir_normalised": against each tap's own floor and ceiling; "stir_debiased": debiased linear
    CKA, chance level 0; ``stir.measure.layers.READINGS``) (``stir.measure.layers.fit_slope``); NaN (reason in ``notes``) when
    fewer than two finite points exist; absent when that stat was not computed.
    """

    rows: List[PairResult]
    depths: List[float]
    fits: Dict[str, Dict[str, Dict[str, float]]] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)

    def slope(self, direction: str, stat: str = "stir") -> Optional[float]:
        return self.fits.get(direction, {}).get(stat, {}).get("slope")
