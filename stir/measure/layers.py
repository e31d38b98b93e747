"""STIR layer by layer: every pair of corresponding taps (``stir.models.depth``) and STIR's trend over depth.

Nanda et al., ICML 2022, study how shared invariance changes with depth (section 5). Taps are paired
by relative depth (``stir.models.depth.layer_pairs``); the trend is the least-squares line
STIR = slope * depth + intercept over the paired taps (``fit_slope``).
"""
from __future__ import annotations

import logging
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from torch import Tensor, nn

from stir.inversion import ExecutionConfig
from stir.measure.pair import evaluate_pair
from stir.measure.plan import Estimator
from stir.measure.results import DIRECTIONS, LayerwiseResult, PairResult
from stir.models.depth import TapSpec, layer_pairs
from stir.models.identity import content_identity
from stir.store import ResultStore

log = logging.getLogger(__name__)


def fit_slope(depths: Sequence[float], values: Sequence[float]) -> Tuple[float, float]:
    """Least-squares (slope, intercept) of values = slope * depth + intercept.

    Points with a NaN value (or depth) are dropped; fewer than two points, or all at one depth,
    give (NaN, NaN) (``slope_reason`` says why).
    """
    if slope_reason(depths, values) is not None:
        return math.nan, math.nan
    x, y = _finite_points(depths, values)
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept)


def slope_reason(depths: Sequence[float], values: Sequence[float]) -> Optional[str]:
    """Why ``fit_slope`` is NaN on these points, or None when it is defined."""
    x, _ = _finite_points(depths, values)
    if len(x) < 2:
        return f"{len(x)} finite point(s) of {len(list(values))}; a slope needs at least 2"
    if np.ptp(x) == 0:
        return "every point is at the same depth"
    return None


def _finite_points(depths: Sequence[float], values: Sequence[float]) -> Tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(depths, dtype=float), np.asarray(values, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"depths and values differ in length: {x.shape} vs {y.shape}")
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def evaluate_layers(
    m1: nn.Module,
    m2: nn.Module,
    images: Tensor,
    estimator: Optional[Estimator] = None,
    *,
    taps: TapSpec = None,
    reduce: str = "flatten",
    count: Optional[int] = None,
    run: Optional[ExecutionConfig] = None,
    names: Tuple[str, str] = ("m1", "m2"),
    ids: Optional[Tuple[str, str]] = None,
    store: Optional[ResultStore] = None,
    directions: Sequence[str] = DIRECTIONS,
    record: Optional[Dict[str, Any]] = None,
) -> LayerwiseResult:
    """``evaluate_pair`` at every tap pair of ``layer_pairs(m1, m2, taps, reduce, count)`` and STIR's
    trend over depth.

    ``fits[direction][reading]`` fits every reading of ``READINGS`` (raw STIR and STIR_adv, mean over
    draws; their normalised and debiased values) against relative depth (``fit_slope``). Each tap pair is stored per direction (``store``), so an interrupted sweep
    resumes where it stopped. ``reduce`` says how spatial maps become vectors (``layer_pairs``).
    """
    ids = tuple(ids) if ids is not None else (content_identity(m1), content_identity(m2))  # hashed once
    pairs = layer_pairs(m1, m2, taps, reduce, count)
    rows: List[PairResult] = []
    for tap1, tap2, depth in pairs:
        log.info("layer-wise STIR: %s vs %s at depth %.2f", tap1, tap2, depth)
        rows.append(evaluate_pair(m1, m2, images, tap1, tap2, estimator, run=run, names=names, ids=ids, store=store,
                                  directions=directions, record=record))
    depths = [depth for _, _, depth in pairs]
    fits: Dict[str, Dict[str, Dict[str, float]]] = {}
    notes: List[str] = []
    for direction in directions:
        for stat, values in _readings(rows, direction).items():
            slope, intercept = fit_slope(depths, values)
            fits.setdefault(direction, {})[stat] = {"slope": slope, "intercept": intercept}
            reason = slope_reason(depths, values)
            if reason is not None:
                notes.append(f"slope of {stat} {direction}: undefined ({reason})")
    return LayerwiseResult(rows=rows, depths=depths, fits=fits, notes=notes)


# The readings a slope is fitted to: raw values, and the calibrated ones a depth claim should rest on
# (the floor changes with depth: 0.08-0.70 across the taps of one ResNet20 at n = 100, so a raw slope
# measures the floor as much as shared invariance).
READINGS = ("stir", "stir_normalised", "stir_debiased", "stir_adv", "stir_adv_normalised", "stir_adv_debiased")


def _readings(rows: Sequence[PairResult], direction: str) -> Dict[str, List[float]]:
    """{reading: value per tap pair} of one direction for every reading in ``READINGS`` computed on
    every row (NaN where a row's value is undefined)."""
    out: Dict[str, List[float]] = {}
    for stat in ("stir", "stir_adv"):
        stats = [row.stat(direction, stat) for row in rows]
        if any(s is None for s in stats):
            continue  # not computed (iri kind)
        out[stat] = [s.mean for s in stats]
        cals = [row.get(direction).calibration.get(stat) for row in rows]
        if any(c is not None for c in cals):
            out[f"{stat}_normalised"] = [c.normalised if c is not None else math.nan for c in cals]
        debiased = [row.get(direction).debiased.get(stat) for row in rows]
        if all(d is not None for d in debiased):
            out[f"{stat}_debiased"] = [d.mean for d in debiased]
    return out
