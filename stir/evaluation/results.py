"""Result types of the STIR evaluation: plain dataclasses that round-trip through JSON and flatten to rows.

Nanda et al., ICML 2022, "Measuring Representational Robustness of Neural Networks Through Shared
Invariances". Notation: m1 = reference, m2 = target, X = n images in [0, 1], X'_j the IRIs of draw j.

* ``Stat``              mean and std over the k draws, and the per-draw values.
* ``DirectionResult``   everything about "target given reference": STIR (eq. 6), STIR_adv (eq. 7),
                        prediction agreement on the reference's IRIs, controversial-stimulus
                        difficulty, IRI quality. The unit of work and of storage.
* ``SimilarityResult``  the plain similarity S_r(m1(X), m2(X)); stored separately (no direction).
* ``PairResult``        two directions and the plain similarity of one (m1, m2, tap1, tap2).
* ``LayerwiseResult``   one ``PairResult`` per corresponding tap pair, and least-squares slopes of
                        STIR over relative depth.

Conventions: a quantity that was not computed (e.g. adversarial ones when ``iri="arbitrary"``) is
None and absent from ``to_row()``; a quantity that was computed but is undefined on the data (e.g.
a constant representation) is NaN, with a human-readable reason in ``notes``. ``to_dict()`` /
``from_dict()`` round-trip through ``json`` (NaN is written as the ``NaN`` literal Python reads back).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Dict, List, Optional, Sequence

# The two directions of a pair, and their slugs in field and row names.
DIRECTIONS = ("m2|m1", "m1|m2")
SLUGS = {"m2|m1": "m2_given_m1", "m1|m2": "m1_given_m2"}
IRI_KINDS = ("arbitrary", "adversarial", "both")


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
        return cls(float(d["mean"]), float(d["std"]), [float(v) for v in d["values"]])


def _stat_or_none(d: Optional[Dict[str, Any]]) -> Optional[Stat]:
    return None if d is None else Stat.from_dict(d)


def _put_stat(row: Dict[str, Any], name: str, stat: Optional[Stat]) -> None:
    if stat is not None:
        row[name] = stat.mean
        row[f"{name}_std"] = stat.std


def _put_quality(row: Dict[str, Any], quality: Dict[str, Dict[str, float]], suffix: str) -> None:
    # {"arbitrary": {"median_residual": .., ...}, ...} -> row["arbitrary_median_residual<suffix>"]
    for kind in ("arbitrary", "adversarial"):
        for metric, value in quality.get(kind, {}).items():
            row[f"{kind}_{metric}{suffix}"] = value


@dataclass
class DirectionResult:
    """One direction, "target given reference" (m_tgt | m_ref), over k seed draws.

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
        quality: {"arbitrary" | "adversarial": {"median_residual", "fraction_iri", "fraction_iri_std",
            "median_target_distance", "evaluations", "cached_draws"}}; residuals and target
            distances pooled over the n * k inversions; "median_target_distance" is the engine's
            m2_distance ||tgt(x') - tgt(x)|| / ||tgt(x)||.
        convergence: {"arbitrary" | "adversarial": {"steps", "stir", "stir_std", "median_residual",
            "fraction_iri"}}: the STIR (STIR_adv) value at each recorded step of the inversion budget,
            measured at the best iterates so far (mean and std over draws), with their residuals.
        notes: reasons for every NaN.  settings: what produced the numbers (key-relevant settings).
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
    quality: Dict[str, Dict[str, float]] = field(default_factory=dict)
    convergence: Dict[str, Dict[str, List[float]]] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)
    settings: Dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "DirectionResult":
        stats = {"stir", "stir_adv", "agreement", "difficulty", "difficulty_fraction"}
        kwargs = {f.name: d[f.name] for f in fields(cls)}  # KeyError on a missing field: not ours
        kwargs.update({name: _stat_or_none(d[name]) for name in stats})
        return cls(**kwargs)

    def to_row(self) -> Dict[str, Any]:
        """Flat scalars for CSV / Markdown; not-computed quantities are absent."""
        row: Dict[str, Any] = {
            name: getattr(self, name)
            for name in ("ref", "target", "ref_id", "target_id", "tap_ref", "tap_target", "measure", "n", "k", "iri")
        }
        for name in ("stir", "stir_adv", "agreement", "difficulty", "difficulty_fraction"):
            _put_stat(row, name, getattr(self, name))
        _put_quality(row, self.quality, "")
        row.update(_settings_row(self.settings))
        row["notes"] = "; ".join(self.notes)
        return row


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


def _settings_row(settings: Dict[str, Any]) -> Dict[str, Any]:
    inversion = settings.get("inversion", {})
    row = {"seed": settings.get("seed")}
    row.update({f"inversion_{name}": inversion.get(name) for name in ("mode", "steps", "tolerance", "precision")})
    return {k: v for k, v in row.items() if v is not None}


@dataclass
class PairResult:
    """STIR both ways, STIR_adv both ways, plain similarity, agreement, difficulty of one model pair.

    m1 = ``ref``, m2 = ``target``. Field ``x_m2_given_m1`` is the direction "m2 given m1" (IRIs of
    m1, measured on m2): ``stir_m2_given_m1`` = STIR(m2|m1) (eq. 6), ``stir_adv_m2_given_m1`` =
    STIR_adv(m2|m1) (eq. 7), ``difficulty_m2_given_m1`` from the controversial stimuli with m1
    matched and m2 pushed away, ``agreement_on_m1_iris`` on m1's arbitrary IRIs. ``similarity`` =
    S_r(m1(X), m2(X)). ``quality`` = {"m2|m1" | "m1|m2": DirectionResult.quality}, ``convergence``
    likewise (``DirectionResult.convergence``). Stats not
    computed (other iri kind, or a direction not requested) are None.
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
    similarity: float
    stir_m2_given_m1: Optional[Stat] = None
    stir_m1_given_m2: Optional[Stat] = None
    stir_adv_m2_given_m1: Optional[Stat] = None
    stir_adv_m1_given_m2: Optional[Stat] = None
    agreement_on_m1_iris: Optional[Stat] = None
    agreement_on_m2_iris: Optional[Stat] = None
    difficulty_m2_given_m1: Optional[Stat] = None
    difficulty_m1_given_m2: Optional[Stat] = None
    difficulty_fraction_m2_given_m1: Optional[Stat] = None
    difficulty_fraction_m1_given_m2: Optional[Stat] = None
    quality: Dict[str, Dict[str, Dict[str, float]]] = field(default_factory=dict)
    convergence: Dict[str, Dict[str, Dict[str, List[float]]]] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)
    settings: Dict[str, Any] = field(default_factory=dict)

    _STATS = (
        "stir_m2_given_m1", "stir_m1_given_m2", "stir_adv_m2_given_m1", "stir_adv_m1_given_m2",
        "agreement_on_m1_iris", "agreement_on_m2_iris", "difficulty_m2_given_m1", "difficulty_m1_given_m2",
        "difficulty_fraction_m2_given_m1", "difficulty_fraction_m1_given_m2",
    )

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "PairResult":
        kwargs = {f.name: d[f.name] for f in fields(cls)}
        kwargs.update({name: _stat_or_none(d[name]) for name in cls._STATS})
        kwargs["similarity"] = float(kwargs["similarity"])
        return cls(**kwargs)

    def to_row(self) -> Dict[str, Any]:
        """Flat scalars: identity columns, ``similarity``, every computed stat as ``name`` and
        ``name_std``, IRI quality as ``<kind>_<metric>_<direction>`` (e.g.
        ``arbitrary_fraction_iri_m2_given_m1``), ``seed``, ``inversion_*`` and ``notes`` ("; "-joined)."""
        row: Dict[str, Any] = {
            name: getattr(self, name)
            for name in ("ref", "target", "ref_id", "target_id", "tap_ref", "tap_target", "measure", "n", "k", "iri")
        }
        row["similarity"] = self.similarity
        for name in self._STATS:
            _put_stat(row, name, getattr(self, name))
        for direction, quality in self.quality.items():
            _put_quality(row, quality, f"_{SLUGS[direction]}")
        row.update(_settings_row(self.settings))
        row["notes"] = "; ".join(self.notes)
        return row


@dataclass
class LayerwiseResult:
    """One ``PairResult`` per corresponding tap pair, and STIR's least-squares trend over depth.

    ``depths[i]`` is the relative depth (0 = first tap, 1 = last) of ``rows[i]``. ``slope_*`` and
    ``intercepts`` fit STIR (arbitrary IRIs; mean over draws) = slope * depth + intercept per
    direction (``stir.evaluation.layers.fit_slope``); None when that STIR was not computed, NaN
    (reason in ``notes``) when fewer than two finite points exist. ``fits`` holds the same fit for
    every computed STIR / STIR_adv row key: {"stir_adv_m2_given_m1": {"slope", "intercept"}, ...}.
    """

    rows: List[PairResult]
    depths: List[float]
    slope_m2_given_m1: Optional[float] = None
    slope_m1_given_m2: Optional[float] = None
    intercepts: Dict[str, float] = field(default_factory=dict)
    fits: Dict[str, Dict[str, float]] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "LayerwiseResult":
        kwargs = {f.name: d[f.name] for f in fields(cls)}
        kwargs["rows"] = [PairResult.from_dict(r) for r in d["rows"]]
        return cls(**kwargs)

    def to_rows(self) -> List[Dict[str, Any]]:
        """``PairResult.to_row()`` per tap pair, with its ``depth``."""
        return [{**row.to_row(), "depth": depth} for row, depth in zip(self.rows, self.depths)]
