"""The one optimisation loop behind every attack and inversion in stir (PGD-l2 and TRADES' attack in
``stir.attacks``, arbitrary and adversarial IRIs and the controversial walk in ``stir.inversion``).

    x_0 = geometry.init(origin)
    for t in range(steps):
        g_t = d objective(x_t) / d x_t          (per example; no weight gradients)
        x_{t+1} = geometry.step(x_t, g_t)       (descend, then project)

The objective is an explicit argument: ``objective(x, index) -> (b,)`` returns one loss per
example to MINIMISE (an attack passes the negated loss it wants to raise); ``index`` holds the rows
of the full batch that ``x`` contains, so an objective can pick per-example targets. Optionally the
loop keeps each example's best iterate and stops examples that meet ``stop`` (they are dropped
from later forward passes, which is where early stopping saves work).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional, Sequence

import torch
from torch import Tensor

from stir.descent.geometry import Geometry

Objective = Callable[[Tensor, Tensor], Tensor]  # (x (b, ...), index (b,)) -> loss (b,)
StopRule = Callable[[Tensor, Tensor], Tensor]  # (loss (b,), index (b,)) -> done mask (b,)


@dataclass
class DescentResult:
    """What one run of the loop returns; every field is per example of the batch (B rows)."""

    x: Tensor  # (B, ...) the best iterate when keep_best, else the last one
    loss: Tensor  # (B,) objective at x
    steps: Tensor  # (B,) gradient steps taken (fewer than `steps` for examples stopped early)
    evaluations: int  # per-example objective evaluations spent, summed over the batch
    history: Tensor  # (T + 1, B) objective of each evaluated iterate, NaN once an example stopped
    snapshots: Dict[int, Tensor]  # step t -> (B, ...) the best iterates among x_0..x_t (keep_best)


def _check_arguments(steps: int, keep_best: bool, snapshots: Sequence[int], final_evaluation: bool) -> None:
    if not final_evaluation and keep_best:
        raise ValueError("keep_best compares every iterate, the last one included: it needs final_evaluation=True")
    if snapshots and not keep_best:
        raise ValueError("snapshots are copies of the best iterates so far: they need keep_best=True")
    if any(t < 0 or t > steps for t in snapshots):
        raise ValueError(f"snapshot steps must lie in [0, {steps}], got {list(snapshots)}")


def _record(best_x: Tensor, best_loss: Tensor, xa: Tensor, loss: Tensor, active: Tensor, keep_best: bool) -> None:
    """Update, in place, the kept iterate (B, ...) and its loss (B,) of the ``active`` rows from this
    iterate ``xa`` (b_active, ...) and its ``loss`` (b_active,): the best so far, or the last one."""
    if keep_best:
        better = loss < best_loss[active]  # strict: the earliest of equal iterates stays, as published
        rows = active[better]
        best_loss[rows] = loss[better]
        best_x[rows] = xa.detach()[better]
    else:
        best_loss[active] = loss  # the loss of each row's last evaluated iterate (its x at the end)


def descend(
    objective: Objective,
    origin: Tensor,
    geometry: Geometry,
    steps: int,
    *,
    keep_best: bool = False,
    stop: Optional[StopRule] = None,
    generator: Optional[torch.Generator] = None,
    x_init: Optional[Tensor] = None,
    snapshots: Sequence[int] = (),
    final_evaluation: bool = True,
    on_step: Optional[Callable[[int, Tensor], None]] = None,
) -> DescentResult:
    """Minimise ``objective`` per example from ``origin`` (B, ...) under ``geometry``.

    ``x_init`` overrides the geometry's starting point (e.g. a noise seed for an inversion).
    The final iterate is evaluated once more without gradient so that ``loss`` is always the
    objective at the returned ``x``. The objective's models should be frozen (``stir.models.frozen``).
    ``snapshots``: steps t (0 <= t <= steps) at which to copy the best iterates among x_0..x_t
    (the returned ``x`` when t = steps); needs ``keep_best``. An example stopped early keeps its
    best iterate, so its snapshots after the stop equal its final x. ``final_evaluation=False``
    (an attack that only wants the last iterate, without keep_best) skips that last forward pass:
    ``loss`` and the last row of ``history`` are then NaN. ``on_step(t, loss)``, when given, is called
    after step t (1 <= t <= steps) with the (b_active,) objective of the iterate that step started from
    (progress reporting: ``stir.progress``).
    """
    _check_arguments(steps, keep_best, snapshots, final_evaluation)
    wanted, kept = set(snapshots), {}
    start, state = geometry.init(origin, generator)
    x = (start if x_init is None else x_init).detach().clone()
    batch = x.shape[0]
    all_rows = torch.arange(batch, device=x.device)
    best_x, best_loss = x.clone(), torch.full((batch,), float("inf"), device=x.device)
    steps_taken = torch.zeros(batch, dtype=torch.long, device=x.device)
    history = torch.full((steps + 1, batch), float("nan"), device=x.device)
    active = all_rows
    evaluations = 0

    for t in range(steps + 1):
        final = t == steps
        if final and not final_evaluation:
            best_loss[active] = float("nan")  # the last iterate is returned unevaluated
            break
        whole = len(active) == batch  # nobody has stopped: work on x itself, no gathered copies
        xa = (x if whole else x[active]).detach().requires_grad_(not final)
        with torch.set_grad_enabled(not final):
            loss = objective(xa, active)  # (b_active,)
        evaluations += len(active)
        loss_d = loss.detach().float()
        history[t, active] = loss_d
        _record(best_x, best_loss, xa, loss_d, active, keep_best)
        if t in wanted:
            kept[t] = best_x.clone()
        if final:
            break
        (grad,) = torch.autograd.grad(loss.sum(), xa)
        with torch.no_grad():
            if stop is None and whole:
                x = geometry.step(xa.detach(), grad, origin, state, all_rows, loss=loss_d)  # (B, ...): every row moves
                steps_taken += 1
                if on_step is not None:
                    on_step(t + 1, loss_d)
                continue
            done = stop(loss_d, active) if stop is not None else torch.zeros_like(loss_d, dtype=torch.bool)
            move = ~done
            moving = active[move]
            x[moving] = geometry.step(xa.detach()[move], grad[move], origin, state, moving, loss=loss_d[move])
            steps_taken[moving] += 1
        if on_step is not None:
            on_step(t + 1, loss_d)
        active = moving
        if len(active) == 0:
            break
    if not keep_best:
        best_x = x  # the last iterate of every row (a stopped row stays where it stopped)
    for t in wanted - set(kept):  # every example stopped before step t: nothing moves any more
        kept[t] = best_x.clone()
    return DescentResult(x=best_x, loss=best_loss, steps=steps_taken, evaluations=evaluations, history=history,
                         snapshots=dict(sorted(kept.items())))
