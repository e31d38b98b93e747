"""What a direction will cost before it starts: its work in model passes, timed by a short probe.

A direction (``stir.measure.direction``) spends almost all its time in input-gradient passes
(forward and backward) of its two models over batches of images:

    arbitrary IRIs    k * n * S image-steps of m1                 (S = inversion steps + continuation)
    ceiling draw      n * S of m1, when calibration.ceiling=independent
    adversarial IRIs  k * n * S image-steps of m1 and of m2       (m2 is pushed at every step)
    difficulty walk   k * n * W image-steps of m1 and of m2       (W = difficulty steps)

The probe times one such pass of each model on a small batch of X (after one pass of warm-up)
and multiplies. It is an estimate for a user deciding whether to wait, not a measurement: larger
batches are cheaper per image on a CPU, the folded batch norm of the inversion is faster still, and
draws already in the inversion cache cost nothing, so a run usually takes less. The progress lines
of each inversion then give the measured ETA.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Tuple

import torch
from torch import Tensor, nn

from stir.measure.plan import Plan
from stir.models import frozen
from stir.models.taps import representation
from stir.progress import clock

PROBE_IMAGES = 16  # images in the probe's batch: small enough to be quick, large enough to time


@dataclass(frozen=True)
class Cost:
    """Image-steps of each model a direction will run, and their probed seconds per image-step."""

    ref_steps: int  # image-steps of input gradients through m1 (every kind of X')
    tgt_steps: int  # image-steps through m2 (adversarial IRIs and the walk)
    ref_seconds: float  # seconds per image-step of m1, probed
    tgt_seconds: float  # seconds per image-step of m2, probed

    @property
    def seconds(self) -> float:
        return self.ref_steps * self.ref_seconds + self.tgt_steps * self.tgt_seconds


def work(plan: Plan, adversarial: bool) -> Tuple[int, int]:
    """(image-steps of m1, image-steps of m2) of one direction of ``plan`` (module docstring)."""
    est, cfg = plan.estimator, plan.cfg
    per_draw = plan.n * cfg.total_steps
    draws = plan.k * (int(est.arbitrary) + int(adversarial)) + int(est.calibration.ceiling == "independent")
    walk = plan.k * plan.n * est.difficulty.steps if adversarial else 0
    pushed = plan.k * per_draw if adversarial else 0
    return draws * per_draw + walk, pushed + walk


def probe_seconds(model: nn.Module, images: Tensor, tap: str) -> float:
    """Seconds per image of one forward and backward pass of ``model`` to its input at ``tap``."""
    x = images[:PROBE_IMAGES].detach().clone()
    with frozen(model), torch.enable_grad():
        timings = []
        for _ in range(2):  # the first pass warms allocators and kernels up; the second is timed
            x.requires_grad_(True)
            start = time.perf_counter()
            representation(model, x, tap).square().sum().backward()
            if x.is_cuda:
                torch.cuda.synchronize(x.device)
            timings.append(time.perf_counter() - start)
            x = x.detach()
    return timings[-1] / x.shape[0]


def estimate(ref: nn.Module, target: nn.Module, tap_ref: str, tap_target: str, plan: Plan, adversarial: bool) -> Cost:
    """The work of one direction and its probed time (two short passes of each model it runs)."""
    ref_steps, tgt_steps = work(plan, adversarial)
    ref_s = probe_seconds(ref, plan.images, tap_ref)
    target_s = probe_seconds(target, plan.images, tap_target) if tgt_steps else 0.0
    return Cost(ref_steps, tgt_steps, ref_s, target_s)


def describe(cost: Cost) -> str:
    """``1,200,000 image-steps of m1 + 400,000 of m2, probed at 3.1 / 2.9 ms: about 1h12m``."""
    parts = f"{cost.ref_steps:,} image-steps of the reference"
    if cost.tgt_steps:
        parts += f" + {cost.tgt_steps:,} of the target"
    probed = f"{cost.ref_seconds * 1e3:.2g} ms" + (f" / {cost.tgt_seconds * 1e3:.2g} ms" if cost.tgt_steps else "")
    return f"{parts}, probed at {probed} per image-step: about {clock(cost.seconds)} (less for draws in the inversion cache)"

