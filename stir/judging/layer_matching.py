"""The layer-matching sanity test of similarity measures (Kornblith et al., ICML 2019, sec. 6.1, table 2).

Networks of one architecture and recipe that differ only in their seed should have corresponding
layers that a good similarity measure recognises: for an ordered pair (a, b) and every layer i of
a, the layer j of b rated most similar to it should be j = i. With a grid G (L, L) of
G[i, j] = S(a_i(X), b_j(X)) (for a distance: argmin instead of argmax),

    j*(i)    = argmax_j G[i, j]
    accuracy = mean over ordered pairs and layers i of [j*(i) == i]

Asymmetric measures (PWCCA, linear regression) are symmetrised as S(x, y) + S(y, x), as in the
paper. A cell where the measure is undefined (e.g. CCA with d >= n) is NaN; a layer whose own
cell G[i, i] is NaN cannot be matched and is left out of the accuracy (``undefined`` counts them);
otherwise argmax runs over the finite cells.

STIR enters as three grids built from ``evaluate_direction`` by the caller:
    STIR(m2|m1)[i, j] = STIR(b at j | a at i)   IRIs of a's layer i, measured at b's layer j
    STIR(m1|m2)[i, j] = STIR(a at i | b at j)   IRIs of b's layer j, measured at a's layer i
    STIR(mean)        = their mean
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from torch import Tensor

from stir import similarity


# Measures with a non-default option, by name, next to the registered ones (the paper's RBF CKA
# bandwidth is 0.8 of the median distance; the registry's default is 1.0).
VARIANTS: Dict[str, Tuple[str, Dict[str, Any]]] = {"rbf_cka_0.8": ("rbf_cka", {"threshold": 0.8})}


def measure_names() -> List[str]:
    """The all-measures default of ``layer_matching`` and ``grounding``: the registry's judging
    measures (``stir.similarity.names(kind="judging")``) and ``VARIANTS``."""
    return similarity.names(kind="judging") + sorted(VARIANTS)


def resolve(measure: str):
    """(fn, symmetric, distance) of a registered measure, a similarity-repository id or a ``VARIANTS``
    name; ``stir.similarity``'s ValueError (with the close matches) for anything else."""
    base, options = VARIANTS.get(measure, (measure, {}))
    info = similarity.info(base)  # an id resolves too; unknown: UnknownMeasureError naming the close matches
    return similarity.get(base, **options), info.symmetric, info.distance


# Measures flagged ``assignment`` (the G_ReLU Procrustes measures, the permutation metric) solve a
# (d1 x d2) linear assignment (Hungarian, O(d^3) on the CPU): minutes per cell at d = 8192 (a width-8
# ResNet's 32x32 maps). Above this width they are skipped (NaN).
MAX_ASSIGNMENT_DIM = 2048


def skip_reason(measure: str, x: Tensor, y: Tensor) -> Optional[str]:
    """Why ``measure`` is not computed on (x, y) here (too costly), or None."""
    d = max(x.flatten(1).shape[1], y.flatten(1).shape[1])
    if similarity.info(VARIANTS.get(measure, (measure,))[0]).assignment and d > MAX_ASSIGNMENT_DIM:
        return f"{measure}: skipped at d={d} > {MAX_ASSIGNMENT_DIM} (an O(d^3) linear assignment per pair)"
    return None


def measure_value(measure: str, x: Tensor, y: Tensor) -> float:
    """S(x, y) as a float (symmetrised S(x, y) + S(y, x) for an asymmetric measure); NaN where undefined
    or skipped as too costly (``skip_reason``)."""
    fn, symmetric, _ = resolve(measure)
    if skip_reason(measure, x, y) is not None:
        return math.nan
    try:
        value = float(fn(x, y))
        if not symmetric:
            value += float(fn(y, x))
    except ValueError:  # d >= n for CCA, constant representation, ...: undefined on this data
        return math.nan
    return value if math.isfinite(value) else math.nan


def similarity_grid(reps_a: Sequence[Tensor], reps_b: Sequence[Tensor], measure: str) -> np.ndarray:
    """G[i, j] = S(reps_a[i], reps_b[j]) for representations (n, d_i) of the same n images: (L_a, L_b).

    Through ``stir.similarity.pairwise`` (each representation centred and decomposed once) over
    reps_a + reps_b; an asymmetric measure is symmetrised as M + M^T. Cells a measure cannot take
    (undefined: NaN) and, for assignment measures above ``MAX_ASSIGNMENT_DIM``, skipped cells are NaN.
    """
    _, symmetric, _ = resolve(measure)  # unknown name: ValueError with the close matches
    reps = [r for r in (*reps_a, *reps_b)]
    base, options = VARIANTS.get(measure, (measure, {}))
    if any(skip_reason(measure, x, y) for x in reps_a for y in reps_b):  # too costly somewhere: cell by cell
        grid = np.full((len(reps_a), len(reps_b)), math.nan)
        for i, x in enumerate(reps_a):
            for j, y in enumerate(reps_b):
                grid[i, j] = measure_value(measure, x, y)
        return grid
    full = similarity.pairwise(base, reps, errors="nan", **options)  # (La + Lb, La + Lb)
    if not symmetric:
        full = full + full.T  # S(x, y) + S(y, x), as the paper symmetrises
    grid = full[: len(reps_a), len(reps_a):].cpu().numpy()
    return np.where(np.isfinite(grid), grid, math.nan)


def best_matches(grid: np.ndarray, distance: bool = False) -> np.ndarray:
    """j*(i) for every row i (most similar finite cell; argmin for a distance), -1 for an all-NaN row."""
    grid = np.asarray(grid, dtype=float)
    out = np.full(grid.shape[0], -1)
    for i, row in enumerate(grid):
        finite = np.isfinite(row)
        if finite.any():
            scores = np.where(finite, -row if distance else row, -np.inf)
            out[i] = int(np.argmax(scores))
    return out


def matched(grid: np.ndarray, distance: bool = False) -> np.ndarray:
    """Per layer i: 1.0 when j*(i) == i, 0.0 when not, NaN when G[i, i] is undefined."""
    grid = np.asarray(grid, dtype=float)
    if grid.shape[0] != grid.shape[1]:
        raise ValueError(f"layer matching needs the same layers in both networks, got a {grid.shape} grid")
    best = best_matches(grid, distance)
    return np.array([math.nan if not math.isfinite(grid[i, i]) else float(best[i] == i) for i in range(len(grid))])


@dataclass
class LayerMatchingResult:
    """One measure's layer matching over ordered pairs of seed models."""

    measure: str
    taps: List[str]
    pairs: List[Tuple[str, str]]
    grids: List[List[List[float]]]  # one (L, L) grid per ordered pair, rows = layers of the first model
    distance: bool = False
    notes: List[str] = field(default_factory=list)

    @property
    def hits(self) -> np.ndarray:
        """(pairs, L): 1 matched, 0 not, NaN undefined."""
        return np.array([matched(np.array(g), self.distance) for g in self.grids]).reshape(len(self.grids), -1)

    @property
    def accuracy(self) -> float:
        """Fraction of (pair, layer) with j*(i) == i, over the defined ones; NaN if none is defined."""
        h = self.hits
        return float(np.nanmean(h)) if np.isfinite(h).any() else math.nan

    @property
    def undefined(self) -> int:
        return int(np.isnan(self.hits).sum())

    @property
    def per_layer(self) -> List[float]:
        h = self.hits
        return [float(np.nanmean(c)) if np.isfinite(c).any() else math.nan for c in h.T]

    @property
    def mean_grid(self) -> np.ndarray:
        """The grid averaged over ordered pairs (NaN where any pair is NaN): the heatmap."""
        return np.mean(np.array(self.grids, dtype=float), axis=0)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "LayerMatchingResult":
        return cls(d["measure"], list(d["taps"]), [tuple(p) for p in d["pairs"]], d["grids"], d["distance"], list(d["notes"]))


def check_seed_models(models: Sequence[str]) -> List[str]:
    models = list(dict.fromkeys(models))
    if len(models) < 2:
        raise ValueError(f"layer matching needs at least two seed models of one architecture and recipe, got {models}")
    return models


def check_measures(measures: Sequence[str]) -> List[str]:
    """The measures to run ("all" or [] = every registered one); an unknown name lists the choices."""
    if measures in ("all", None) or list(measures) == []:
        return measure_names()
    if isinstance(measures, str):
        measures = [measures]
    for m in measures:
        resolve(m)
    return list(measures)


def layer_matching(
    reps: Mapping[str, Sequence[Tensor]], taps: Sequence[str], measures: Sequence[str] = "all",
) -> Dict[str, LayerMatchingResult]:
    """Layer matching of every measure over every ordered pair of ``reps``: {model: [(n, d) per tap]}."""
    models = check_seed_models(list(reps))
    measures = check_measures(measures)
    pairs = [(a, b) for a in models for b in models if a != b]
    out = {}
    for measure in measures:
        # S(a_i, b_j) of a symmetric (or symmetrised) measure is S(b_j, a_i): the grid of (b, a) is the
        # transpose of the grid of (a, b), computed once.
        done: Dict[Tuple[str, str], np.ndarray] = {}
        for a, b in pairs:
            done[(a, b)] = done[(b, a)].T if (b, a) in done else similarity_grid(reps[a], reps[b], measure)
        grids = [done[p].tolist() for p in pairs]
        notes = sorted({r for a, b in pairs for x in reps[a] for y in reps[b] if (r := skip_reason(measure, x, y))})
        out[measure] = LayerMatchingResult(measure, list(taps), pairs, grids, resolve(measure)[2], notes[:1])
    return out


# The paper's table 2 (ten 10-layer CIFAR-10 CNNs differing in initialisation, logits excluded),
# beside the registry name that computes the same quantity: CCA rho-bar = cca, R^2_CCA = cca_squared,
# SVCCA rho-bar = svcca, RBF CKA with bandwidth 0.8 = rbf_cka_0.8.
KORNBLITH_TABLE2: Dict[str, float] = {
    "cca": 0.014, "cca_squared": 0.106, "svcca": 0.099, "pwcca": 0.111, "linear_regression": 0.454,
    "linear_cka": 0.993, "rbf_cka_0.8": 0.993,
}
