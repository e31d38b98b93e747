"""Controversial stimuli as the STIR paper made them (appendix C, eq. 8), and their perturbation Delta.

Nanda et al., ICML 2022, appendix C, after Golan et al. (2020): for an image x and two models read at
their penultimate layers,

    x_c = argmin_{x'}  ||m1(x) - m1(x')||_2 - ||m2(x) - m2(x')||_2              (eq. 8)
    Delta = mean_i ||x_i - x_c,i||_2                                          (Table 3's last row)

m1 is the model that must keep representing x_c like x (eq. 8's first term), m2 the one pushed away.
In Table 3's notation the column "a|b" holds Delta with b as eq. 8's m1 (the reference, as in STIR(a|b))
and a as its m2: the AT/vanilla column reads 7.368 where AT is kept and vanilla pushed (easy: vanilla
is not robust) and 19.270 the other way.

The solver is the one descent loop (``stir.descent.descend``) with every choice explicit; what the
original code does (github.com/nvedant07/STIR, read for this; its public repository holds the loss,
``stir/attack/losses.py: ControversialStimuliLoss``, but no script that calls it, so the driver's
settings are those its attacker uses for the published inversion, ``stir/stir.py: _stir``'s
``ve_kwargs`` run through ``stir/attack/attacker.py: Attacker.forward``):

    objective  "paper": d1 - d2, eq. 8 as printed (unnormalised distances);
               "original": r1 - 0.1 r2, ``ControversialStimuliLoss`` (distances divided by
               ||m(x)||_2, beta = 0.1). Both are ``stir.inversion.objectives.InversionObjective``.
    step       x <- clamp(x - step_size * g / ||g||_2, 0, 1): ``UnconstrainedStep.step`` then
               ``.project`` (constraint "unconstrained", the l2-normalised gradient, targeted, i.e.
               descent), ``stir.descent.FixedLengthStep``; step_size 0.5 and 1000 steps as
               ``_stir``'s ``ve_kwargs`` (``step_size``, ``iterations``).
    input      the models read clamp(x, 0, 1) with the gradient passed inside [0, 1] (``Attacker``'s
               ``should_normalize=True``: the normaliser clamps; ``published_clamp``).
    kept       the iterate with the lowest objective, the last one evaluated too (``use_best=True``,
               ``replace_best``: strictly lower replaces).
    FakeReLU   off: ``ControversialStimuliLoss`` calls ``model(inp, with_latent=True)`` without
               ``fake_relu`` (unlike the inversion's ``LPNormLossSingleModel``, which fakes), so the
               gradient passes no dead ReLU. ``fake_relu`` takes any ``stir.models.fake_relu`` spec.
    start      the paper does not say; two readings (``start``):
               "image": x plus ``UnconstrainedStep.random_perturb`` (uniform noise in [-1/2, 1/2]^d
               renormed to l2 norm at most step_size, clamped): the attacker's random start. Exactly
               at x both distances have no gradient (a norm at 0), so a search from x itself never
               moves; the random start is how that attacker leaves it.
               "seed": the IRI seed of the published inversion, i.i.d. N(0, 1) pixels drawn as
               ``stir.inversion.seeds.make_seed("normal", ...)`` with ``seed_generator(seed)``
               (draw 0 of an inversion with the same seed starts there), read through the clamp.

Delta then depends on the start: from "seed" it is mostly how far an IRI of m1 from noise lies from
x, from "image" how far the objective drives x away. Both are returned, never mixed.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor, nn

from stir.descent import FixedLengthStep, descend
from stir.inversion.objectives import Forward, InversionObjective, make_term, published_clamp
from stir.inversion.seeds import make_seed, seed_generator
from stir.models import frozen
from stir.models.fake_relu import fake_relu

STARTS = ("image", "seed")
OBJECTIVES = ("paper", "original")


@dataclass(frozen=True)
class StimulusConfig:
    """How eq. 8 is solved (module docstring: which original function each choice follows)."""

    start: str = "image"  # image (x + the attacker's random start) | seed (the inversion's N(0, 1) seed)
    objective: str = "paper"  # paper (d1 - d2, eq. 8) | original (r1 - 0.1 r2, ControversialStimuliLoss)
    steps: int = 1000  # the published attacker's iterations
    step_size: float = 0.5  # l2 length of every step (the published 0.5)
    seed: int = 0  # the CPU generator of the start (noise seed or random start)
    fake_relu: Any = "off"  # a stir.models.fake_relu spec; off as ControversialStimuliLoss runs the models
    record_steps: Tuple[int, ...] = (100, 250, 500)  # Delta of the best iterate so far at these steps too

    def __post_init__(self) -> None:
        if self.start not in STARTS:
            raise ValueError(f"controversial stimuli: start must be one of {STARTS}, got {self.start!r}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"controversial stimuli: objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if int(self.steps) != self.steps or self.steps < 1:
            raise ValueError(f"controversial stimuli: steps must be a positive integer, got {self.steps!r}")
        if not self.step_size > 0:
            raise ValueError(f"controversial stimuli: step_size must be > 0, got {self.step_size!r}")

    @property
    def recorded(self) -> Tuple[int, ...]:
        """The recorded steps inside the budget, then the budget: (t_1 < ... < steps)."""
        return tuple(sorted({int(t) for t in self.record_steps if 0 < t < self.steps} | {int(self.steps)}))

    def key(self) -> Dict[str, Any]:
        """Every field, JSON-able: what a stored Delta is keyed by."""
        out = dataclasses.asdict(self)
        out["record_steps"] = list(self.recorded)
        out["fake_relu"] = out["fake_relu"] if isinstance(out["fake_relu"], (str, bool)) else list(out["fake_relu"])
        return out


@dataclass(eq=False)
class Stimuli:
    """Controversial stimuli of n images and what they cost; every tensor has n rows.

    Attributes:
        x_c: (n, c, h, w) the kept iterate of each image (in [0, 1] once a step was taken).
        distance: (n,) ||x - x_c||_2, the perturbation eq. 8 needed (Delta is its mean).
        start_distance: (n,) ||x - clamp(x_0, 0, 1)||_2, where the search began (as the models see it).
        r1, r2: (n,) ||m(x_c) - m(x)||_2 / ||m(x)||_2 of m1 (kept) and m2 (pushed), at x_c.
        d1, d2: (n,) the same distances unnormalised.
        loss_start, loss: (n,) the objective at x_0 and at x_c (loss <= loss_start: the best is kept).
        history: (steps + 1, n) the objective of every iterate.
        along: {t: (n,) ||x - x_c(t)||_2} for the kept iterate among x_0..x_t at each recorded step t
            (``record_steps`` below the budget, and the budget): how Delta depends on the budget.
    """

    x_c: Tensor
    distance: Tensor
    start_distance: Tensor
    r1: Tensor
    r2: Tensor
    d1: Tensor
    d2: Tensor
    loss_start: Tensor
    loss: Tensor
    history: Tensor
    along: Dict[int, Tensor]


def start_point(images: Tensor, cfg: StimulusConfig) -> Tensor:
    """x_0 (n, c, h, w) for images (n, c, h, w) in [0, 1] (module docstring, "start"), drawn on the CPU
    from ``seed_generator(cfg.seed)`` so that every device starts at the same points."""
    gen = seed_generator(cfg.seed)
    if cfg.start == "seed":
        return make_seed("normal", images, gen)  # raw N(0, 1): the clamp in the input path reads it
    noise = torch.rand(images.shape, generator=gen, dtype=images.dtype).to(images.device) - 0.5
    norm = noise.flatten(1).norm(dim=1).view(-1, *([1] * (images.dim() - 1)))  # (n, 1, 1, 1)
    noise = noise * (cfg.step_size / norm).clamp(max=1.0)  # renorm to l2 norm <= step_size per image
    return (images + noise).clamp(0, 1)


def controversial_stimuli(m1: nn.Module, m2: nn.Module, images: Tensor, tap1: str = "penultimate",
                          tap2: Optional[str] = None, cfg: Optional[StimulusConfig] = None) -> Stimuli:
    """Solve eq. 8 for every image (n, c, h, w) in [0, 1]: m1 (read at ``tap1``) keeps x_c like x, m2
    (at ``tap2``, default ``tap1``) is pushed away. Both models frozen in eval mode, full precision."""
    cfg = cfg or StimulusConfig()
    tap2 = tap2 or tap1
    images = images.detach()
    forward = Forward()  # float32: the distances are the result
    with frozen(m1, m2), fake_relu(m1, m2, enabled=cfg.fake_relu):
        first, second = make_term(m1, tap1, images, forward), make_term(m2, tap2, images, forward)
        # bound is read by the constrained objective only; paper and original are weighted differences
        inner = InversionObjective(first, forward, normalize=True, second=second, kind=cfg.objective)

        def objective(x: Tensor, index: Tensor) -> Tensor:  # (b, c, h, w) -> (b,)
            return inner(published_clamp(x), index)

        x0 = start_point(images, cfg)
        result = descend(objective, images, FixedLengthStep(cfg.step_size), cfg.steps, keep_best=True, x_init=x0,
                         snapshots=cfg.recorded)
        with torch.no_grad():
            index = torch.arange(images.shape[0], device=images.device)
            seen = published_clamp(result.x)
            d1, d2 = first.distance(seen, index, forward), second.distance(seen, index, forward)
    def from_x(t: Tensor) -> Tensor:  # (n, c, h, w) -> (n,) l2 distance from the images
        return (t - images).flatten(1).norm(dim=1)

    return Stimuli(
        x_c=result.x, distance=from_x(result.x), start_distance=from_x(x0.clamp(0, 1)),
        r1=first.relative(d1, index), r2=second.relative(d2, index), d1=d1, d2=d2, loss_start=result.history[0],
        loss=result.loss, history=result.history,
        along={t: from_x(x) for t, x in result.snapshots.items()})
