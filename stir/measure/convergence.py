"""IRI quality and STIR along the inversion budget (the convergence record of every STIR value).

Per draw, ``summary`` keeps what quality needs from an inversion (residuals, target distances,
cost, the residual at each snapshot step); ``quality`` pools the k draws; ``curve`` measures
S_r(m2(X), m2(X'_t)) at the best iterates so far at each snapshot step t; ``convergence_record``
gives, per step, STIR (mean and std over draws), the median residual and the fraction of IRIs.
``refuse_failed`` turns a draw whose X' are not IRIs into NaN with the reason.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch
from torch import Tensor, nn

from stir.measure.observe import observe
from stir.measure.plan import Plan
from stir.measure.results import Stat
from stir.inversion import InversionConfig, InversionResult


def refuse_failed(value: float, run: InversionResult, plan: Plan, label: str, notes: List[str]) -> float:
    """NaN (with the reason) when the draw's X' are not IRIs: non-finite residuals, or too few IRIs."""
    if not bool(torch.isfinite(run.residual).all()):
        notes.append(f"{label}: NaN because the reference's residuals are not finite (the model outputs NaN/Inf)")
        return math.nan
    if run.fraction_iri < plan.estimator.min_fraction_iri:
        notes.append(f"{label}: NaN because only {run.fraction_iri:.0%} of X' are IRIs, below "
                     f"min_fraction_iri={plan.estimator.min_fraction_iri:g}")
        return math.nan
    return value


def curve(target: nn.Module, tap_target: str, target_rep: Tensor, run: InversionResult,
           fn: Callable[[Tensor, Tensor], Tensor], plan: Plan, final: float) -> Dict[int, float]:
    """S_r(tgt(X), tgt(X'_t)) at every snapshot step t of one draw.

    The last snapshot is x' itself, whose value the draw has already measured: ``final``.
    """
    last = max(run.snapshots)
    curve = {last: final}
    for t, x in run.snapshots.items():
        if t != last:
            rep = observe(target, x, tap_target, plan.batch_size)[0]
            try:
                curve[t] = float(fn(target_rep, rep))
            except ValueError:  # undefined at this step (e.g. constant): the final value's note says why
                curve[t] = math.nan
    return curve


def convergence_record(curves: List[Dict[int, float]], runs: List[Dict[str, Any]], cfg: InversionConfig) -> Dict[str, List[float]]:
    """STIR (mean, std over draws), median residual and fraction of IRIs at every snapshot step."""
    steps = sorted(curves[0])
    record: Dict[str, List[float]] = {"steps": [float(t) for t in steps], "stir": [], "stir_std": [],
                                      "median_residual": [], "fraction_iri": []}
    for t in steps:
        stat = Stat.from_values([c[t] for c in curves])
        residual = torch.cat([r["snapshot_residual"][t] for r in runs])  # (n * k,)
        record["stir"].append(stat.mean)
        record["stir_std"].append(stat.std)
        record["median_residual"].append(residual.quantile(0.5).item())
        record["fraction_iri"].append((residual <= cfg.tolerance).double().mean().item())
    return record


def summary(run: InversionResult) -> Dict[str, Any]:
    """What IRI quality needs from one draw: residual (n,), target distance (n,) or None, cost."""
    m2 = run.m2_distance
    return {"residual": run.residual.detach().double().cpu(), "fraction_iri": run.fraction_iri,
            "evaluations": run.evaluations, "target_distance": None if m2 is None else m2.detach().double().cpu(),
            "snapshot_residual": {t: r.detach().double().cpu() for t, r in run.snapshot_residual.items()}}


def natural_null(reference: Tensor) -> Tensor:
    """(n,) the IRI criterion of Feather et al. (model metamers, Nature Neuroscience 2023) for each x:
    min over the other natural images x_b of ||m1(x_b) - m1(x)|| / ||m1(x)||, the relative residual
    of the nearest other natural image at the same tap. An x' whose residual is below it is closer to
    x, as m1 sees it, than any natural image of the sample: it passes the null. ``reference`` is m1(X)
    (n, d); inf for n = 1 (no other image: every x' passes)."""
    z = reference.detach().double()
    dist = torch.cdist(z, z)  # (n, n)
    dist.fill_diagonal_(math.inf)
    return dist.min(dim=0).values / z.norm(dim=1).clamp_min(1e-12)


def pool_quality(runs: List[Dict[str, Any]], null: Optional[Sequence[Tensor]] = None) -> Dict[str, float]:
    """IRI quality over k draws (``summary`` each): medians pooled over the n * k inversions,
    the fraction within tolerance per draw (mean, std), model evaluations spent; with ``null`` (one
    ``natural_null`` (n,) per draw) the fraction of X' that pass it and their median residual as a
    fraction of it (below 1: closer than the nearest natural image)."""
    fractions = Stat.from_values([r["fraction_iri"] for r in runs])
    quality = {
        "median_residual": torch.cat([r["residual"] for r in runs]).quantile(0.5).item(),  # over (n * k,)
        "fraction_iri": fractions.mean,
        "fraction_iri_std": fractions.std,
        "evaluations": float(sum(r["evaluations"] for r in runs)),
    }
    if null is not None:
        passed = [float((r["residual"] < b.cpu()).double().mean()) for r, b in zip(runs, null)]
        quality["fraction_iri_null"] = sum(passed) / len(passed)
        ratio = torch.cat([r["residual"] / b.cpu() for r, b in zip(runs, null)])
        quality["median_residual_null_ratio"] = ratio.quantile(0.5).item()
    if all(r["target_distance"] is not None for r in runs):
        quality["median_target_distance"] = torch.cat([r["target_distance"] for r in runs]).quantile(0.5).item()
    return quality
