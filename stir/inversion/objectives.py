"""What an inversion minimises: distances between representations at a tap.

For images x (n, c, h, w), a reference model m1 read at tap t1 and a candidate x' (same shape):

    d1(x')  = || m1(x') - m1(x) ||_2                       per image, representations (n, d1)
    r1(x')  = d1(x') / || m1(x) ||_2                       the relative residual (official code)

Arbitrary IRIs minimise r1 (or d1 with ``normalize=False``). Adversarial IRIs (controversial
stimuli, Golan et al. 2020, the STIR paper's adversarial IRIs) solve the constrained problem

    maximise r2(x') = || m2(x') - m2(x) ||_2 / || m2(x) ||_2   subject to  r1(x') <= b

(b = the IRI bound, a little under the tolerance delta) with a switching objective (Polyak's
switching subgradient method for constrained problems):

    L(x') = r1(x')            while r1(x') >  b   (infeasible: become an IRI first)
    L(x') = b - w * r2(x')    once  r1(x') <= b   (feasible: push m2 away)

This is ``adversarial_objective=constrained`` (the default). Two readings of the published method
are available for reproduction, both with the best (lowest) iterate kept and no IRI guarantee:

    paper:     L(x') = d1(x') - d2(x')                   eq. 7 of the paper, unnormalised
    original:  L(x') = r1(x') - 0.1 * r2(x')             the original code's ControversialStimuliLoss

The switching objective's value orders iterates lexicographically, so the loop's best-iterate rule returns the feasible
iterate with the largest r2 (or, when none was feasible, the one with the smallest r1): every
feasible value is <= b < every infeasible one. A weighted difference r1 - w * r2 has no such
guarantee: on trained ResNets w = 1 left m1's median residual at 0.62 (no IRIs at all). w only
scales the push gradient against the pull of r1 (docs/benchmarks/adversarial.md measures it). With unnormalized
distances the same holds with d1, d2 and the bound b * ||m1(x)||. ``Forward`` fixes how the models are run: autocast to a
lower precision for the model only (the distance itself is computed in float32), and channels-last
inputs on CUDA. Targets m(x) are computed once, without gradient, in the same precision as the
objective, so that x' = x is an exact zero of the objective.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from stir.models import representation

# The push weight of the original code's ControversialStimuliLoss (its default beta).
ORIGINAL_CODE_BETA = 0.1

_TINY = 1e-12  # a zero target norm (a dead representation) would divide by zero


@dataclass(frozen=True)
class Forward:
    """How a model is evaluated: ``amp_dtype`` None = full precision; channels-last input or not."""

    amp_dtype: Optional[torch.dtype] = None
    channels_last: bool = False

    @property
    def precision(self) -> str:
        """The model's precision by name ("32" | "bf16" | "16"), as cache and store keys record it."""
        return {None: "32", torch.bfloat16: "bf16", torch.float16: "16"}[self.amp_dtype]

    def __call__(self, model: nn.Module, x: Tensor, tap: str) -> Tensor:
        """(b, c, h, w) -> (b, d) float32 representation of ``model`` at ``tap`` (differentiable)."""
        if self.channels_last and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)  # the model's weights stay as they are
        ctx = torch.autocast(x.device.type, dtype=self.amp_dtype) if self.amp_dtype is not None else nullcontext()
        with ctx:
            rep = representation(model, x, tap)
        return rep.float()


def resolve_forward(precision: str, channels_last: bool, device: torch.device) -> Forward:
    """The ``Forward`` for a config's precision ("auto" | "32" | "bf16" | "16") on ``device``.

    "auto" is bf16 autocast on CUDA and full precision elsewhere. Channels-last inputs on any device
    (on CPU too: 1.2-1.3x faster input gradients of ResNet18 at widths 8-32, docs/benchmarks/levers.md; the
    engine's working copies of the models are channels-last as well).
    """
    on_cuda = device.type == "cuda"
    amp = {"auto": torch.bfloat16 if on_cuda else None, "32": None, "bf16": torch.bfloat16, "16": torch.float16}[precision]
    return Forward(amp_dtype=amp, channels_last=channels_last)


@dataclass(frozen=True)
class Term:
    """One model read at one tap, with the targets m(x) (n, d) and their norms (n,) for the batch."""

    model: nn.Module
    tap: str
    target: Tensor  # (n, d) float32
    target_norm: Tensor  # (n,) float32, clamped away from 0

    def distance(self, x: Tensor, index: Tensor, forward: Forward) -> Tensor:
        """|| m(x) - m(x_orig[index]) ||_2 for x (b, c, h, w) holding rows ``index``: (b,)."""
        return (forward(self.model, x, self.tap) - self.target[index]).norm(dim=1)

    def relative(self, distance: Tensor, index: Tensor) -> Tensor:
        """distance (b,) / || m(x_orig[index]) ||_2: (b,)."""
        return distance / self.target_norm[index]


def make_term(model: nn.Module, tap: str, images: Tensor, forward: Forward) -> Term:
    """The targets of ``model`` at ``tap`` for ``images`` (n, c, h, w), computed without gradient."""
    with torch.no_grad():
        target = forward(model, images, tap)  # (n, d)
    return Term(model, tap, target, target.norm(dim=1).clamp_min(_TINY))


@dataclass(frozen=True)
class InversionObjective:
    """r1(x') per image, or the switching objective of adversarial IRIs (module docstring).

    Called by ``stir.descent.descend`` as ``objective(x, index) -> (b,)``. ``bound`` (b, in units of
    the relative residual r1) is required with ``second``.
    """

    first: Term
    forward: Forward
    normalize: bool = True
    second: Optional[Term] = None  # set: adversarial IRIs (controversial stimuli)
    weight: float = 1.0
    bound: Optional[float] = None
    kind: str = "constrained"  # constrained | paper | original (module docstring); with ``second`` only

    def __post_init__(self) -> None:
        if self.second is not None and self.kind == "constrained" and (self.bound is None or self.bound <= 0):
            raise ValueError(f"an adversarial objective needs a residual bound > 0, got {self.bound}")
        if self.kind not in ("constrained", "paper", "original"):
            raise ValueError(f"unknown adversarial objective {self.kind!r}; choose constrained, paper or original")

    def __call__(self, x: Tensor, index: Tensor) -> Tensor:
        return self.parts(x, index)[0]

    def parts(self, x: Tensor, index: Tensor) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
        """(loss (b,), r1 (b,), r2 (b,) or None without a second model) for x holding rows ``index``."""
        d1 = self.first.distance(x, index, self.forward)  # (b,)
        r1 = self.first.relative(d1, index)
        loss = r1 if self.normalize else d1
        if self.second is None:
            return loss, r1, None
        d2 = self.second.distance(x, index, self.forward)
        r2 = self.second.relative(d2, index)
        if self.kind == "paper":
            return d1 - d2, r1, r2
        if self.kind == "original":
            return r1 - ORIGINAL_CODE_BETA * r2, r1, r2
        bound = torch.full_like(loss, self.bound) if self.normalize else self.bound * self.first.target_norm[index]
        push = bound - self.weight * (r2 if self.normalize else d2)
        return torch.where(r1 <= self.bound, push, loss), r1, r2  # x' already an IRI: push m2; else match m1

    def relative_residual(self, loss: Tensor, index: Tensor) -> Tensor:
        """r1 from the objective value of an arbitrary-IRI objective (no second term): (b,)."""
        if self.second is not None:
            raise ValueError("the residual of an adversarial objective is not a function of its value")
        return loss if self.normalize else self.first.relative(loss, index)


class _PublishedClamp(torch.autograd.Function):
    """clamp(x, 0, 1) with the gradient of older torch: passed where 0 <= x <= 1, zero outside.

    The original code's input normaliser clamps x inside the differentiated path. Current torch
    gives zero gradient at exactly 0 and 1 too (pixels the projection puts on the boundary would
    freeze for good); the published runs passed it there. In faithful mode this matters only at the
    first step, at the raw seed: afterwards every iterate is in [0, 1] and this is the identity.
    """

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:  # noqa: D401 - autograd signature
        inside = (x >= 0) & (x <= 1)
        ctx.save_for_backward(inside)
        return x.clamp(0, 1)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        (inside,) = ctx.saved_tensors
        return grad * inside


def published_clamp(x: Tensor) -> Tensor:
    """The published code's view of its input: clamp to [0, 1], gradient passed inside (inclusive)."""
    return _PublishedClamp.apply(x)


def relative_distance(model: nn.Module, tap: str, x_prime: Tensor, images: Tensor, forward: Forward = Forward()) -> Tensor:
    """|| m(x') - m(x) ||_2 / || m(x) ||_2 per image, without gradient: (n,) float32.

    The measurement every result reports (``residual`` for m1, ``m2_distance`` for m2); full
    precision by default, whatever precision the optimisation used.
    """
    return relative_distances(model, tap, [x_prime], images, forward)[0]


def relative_distances(model: nn.Module, tap: str, x_primes: Sequence[Tensor], images: Tensor,
                       forward: Forward = Forward()) -> List[Tensor]:
    """``relative_distance`` of several candidates (each (n, c, h, w)), the targets m(x) computed once."""
    with torch.no_grad():
        term = make_term(model, tap, images, forward)
        index = torch.arange(images.shape[0], device=images.device)
        return [term.relative(term.distance(x, index, forward), index) for x in x_primes]
