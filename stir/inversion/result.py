"""What an inversion returns: ``InversionResult`` (the IRIs of n images, their residuals, what they
cost), built by ``make_result``, and the row arithmetic the engine's chunking needs
(``concat_results``: consecutive chunks -> one result; ``slice_result``: rows of a result, as if
inverted alone). Plain tensors in, plain tensors out: no model, no optimisation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

import torch
from torch import Tensor


@dataclass(eq=False)  # eq=False: tensors do not compare to a bool
class InversionResult:
    """IRIs of n images and what they cost; one type for every mode and kind.

    Attributes:
        x_prime: (n, c, h, w) the IRIs, in [0, 1], on the images' device.
        residual: (n,) ||m1(x') - m1(x)||_2 / ||m1(x)||_2, measured in full precision.
        m2_distance: (n,) ||m2(x') - m2(x)||_2 / ||m2(x)||_2 when a second model was given, else None.
        l2_to_original: (n,) ||x' - x||_2 in pixel space.
        steps: (n,) int64 gradient steps each image took (fewer than ``steps`` when it stopped early).
        evaluations: model evaluations spent by the optimisation (one per image and iterate).
        is_iri: (n,) bool, residual <= tolerance.
        fraction_iri: mean of ``is_iri``.
        tolerance: the relaxed-IRI delta that ``is_iri`` used.
        history: (T + 1, n) the objective of every evaluated iterate (r1 for arbitrary IRIs with
            ``normalize_residual``), in the optimisation's precision; NaN after an image stopped.
        elapsed: (T + 1,) wall-clock seconds from the start of the optimisation until iterate t was
            evaluated, summed over batches (for a cached result: the run that computed it).
        snapshots: step t -> (n, c, h, w) the best iterates among steps 0..t, in [0, 1], for every t
            of ``cfg.snapshot_steps`` (the last is ``x_prime`` itself).
        snapshot_residual: step t -> (n,) r1 of ``snapshots[t]``, measured in full precision.
        from_cache: whether x' was read from the cache.
    """

    x_prime: Tensor
    residual: Tensor
    m2_distance: Optional[Tensor]
    l2_to_original: Tensor
    steps: Tensor
    evaluations: int
    is_iri: Tensor
    fraction_iri: float
    tolerance: float
    history: Tensor
    elapsed: Tensor
    snapshots: Dict[int, Tensor]
    snapshot_residual: Dict[int, Tensor]
    from_cache: bool = False


def make_result(x_prime, residual, m2_distance, images, steps, evaluations, history, elapsed, tolerance,
                snapshots, snapshot_residual) -> InversionResult:
    """One optimisation's result: ``is_iri``, ``fraction_iri`` and ``l2_to_original`` derived from x', x and r1."""
    is_iri = residual <= tolerance
    return InversionResult(
        x_prime=x_prime,
        residual=residual,
        m2_distance=m2_distance,
        l2_to_original=(x_prime - images).flatten(1).norm(dim=1),
        steps=steps,
        evaluations=int(evaluations),
        is_iri=is_iri,
        fraction_iri=is_iri.float().mean().item(),
        tolerance=tolerance,
        history=history,
        elapsed=elapsed,
        snapshots=snapshots,
        snapshot_residual=snapshot_residual,
    )


def concat_results(parts: List[InversionResult], tolerance: float) -> InversionResult:
    """One result from results of consecutive chunks of a batch (rows in order)."""
    m2 = None if parts[0].m2_distance is None else torch.cat([p.m2_distance for p in parts])
    residual = torch.cat([p.residual for p in parts])
    is_iri = residual <= tolerance
    return InversionResult(
        x_prime=torch.cat([p.x_prime for p in parts]),
        residual=residual,
        m2_distance=m2,
        l2_to_original=torch.cat([p.l2_to_original for p in parts]),
        steps=torch.cat([p.steps for p in parts]),
        evaluations=sum(p.evaluations for p in parts),
        is_iri=is_iri,
        fraction_iri=is_iri.float().mean().item(),
        tolerance=tolerance,
        history=torch.cat([p.history for p in parts], dim=1),
        elapsed=torch.stack([p.elapsed for p in parts]).sum(0),
        snapshots={t: torch.cat([p.snapshots[t] for p in parts]) for t in parts[0].snapshots},
        snapshot_residual={t: torch.cat([p.snapshot_residual[t] for p in parts]) for t in parts[0].snapshot_residual},
        from_cache=all(p.from_cache for p in parts),
    )


def slice_result(result: InversionResult, start: int, stop: int) -> InversionResult:
    """Rows start..stop-1 of a result, as if they had been inverted alone.

    ``evaluations`` counts the rows' own (steps + 1 per image, what the loop evaluated for them);
    ``elapsed`` is the rows' share of the run's time, in proportion to their number.
    """
    rows = slice(start, stop)
    residual = result.residual[rows]
    is_iri = residual <= result.tolerance
    steps = result.steps[rows]
    return InversionResult(
        x_prime=result.x_prime[rows],
        residual=residual,
        m2_distance=None if result.m2_distance is None else result.m2_distance[rows],
        l2_to_original=result.l2_to_original[rows],
        steps=steps,
        evaluations=int((steps + 1).sum()),
        is_iri=is_iri,
        fraction_iri=is_iri.float().mean().item(),
        tolerance=result.tolerance,
        history=result.history[:, rows],
        elapsed=result.elapsed * ((stop - start) / result.residual.shape[0]),
        snapshots={t: x[rows] for t, x in result.snapshots.items()},
        snapshot_residual={t: r[rows] for t, r in result.snapshot_residual.items()},
        from_cache=result.from_cache,
    )
