"""Step geometries for the descent loop: where a step goes and what it is projected onto.

A geometry is a small strategy object (the robustness library's AttackerStep idea):
``init(origin, generator) -> (x0, state)`` picks the starting point (a random start or the
origin) and any per-example state; ``step(x, grad, origin, state, index, loss) -> x`` takes one step
that DECREASES the objective and projects the result (``loss``, the (b,) objective at x, is there
for geometries that adapt to progress: ``HalvingLengthStep``). ``index`` (a LongTensor of rows into the
full batch) selects the rows of ``origin`` and ``state`` that ``x`` and ``grad`` hold, so the loop
can drop finished examples. Every step ends with a projection onto the image box [0, 1], done
after the step and outside autograd (a clamp inside the differentiated path would freeze pixels on
the boundary for good).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Protocol, Tuple

import torch
from torch import Tensor

State = Dict[str, Tensor]
_TINY = 1e-12  # guards the division by a zero gradient norm: such an example does not move


def _per_example_norm(t: Tensor) -> Tensor:
    """(b, ...) -> (b, 1, ..., 1) L2 norm of each example, broadcastable against t."""
    return t.flatten(1).norm(dim=1).view(-1, *([1] * (t.dim() - 1)))


class Geometry(Protocol):
    def init(self, origin: Tensor, generator: Optional[torch.Generator]) -> Tuple[Tensor, State]: ...

    def step(self, x: Tensor, grad: Tensor, origin: Tensor, state: State, index: Tensor,
             loss: Optional[Tensor] = None) -> Tensor: ...


@dataclass(frozen=True)
class L2Ball:
    """PGD in the l2 ball ||x - origin||_2 <= eps: normalized-gradient steps of length ``step_size``.

        x <- clip_[0,1]( Proj_{||. - origin|| <= eps}( x - step_size * g / (||g||_2 + norm_offset) ) )

    Random start: a direction uniform on the sphere scaled by a radius U(0, 1) * eps, clipped to the
    image box, drawn as torchattacks' PGDL2 draws it (N(0, I) noise, then the radii, from
    ``generator``; the device's global RNG when None) and in its order of operations, so that with
    ``norm_offset`` = torchattacks' 1e-10 the loop reproduces PGDL2 bit for bit
    (tests/training/test_attacks.py).
    """

    eps: float
    step_size: float
    random_start: bool = True
    norm_offset: float = 0.0  # added to ||g||_2 (torchattacks: 1e-10); a zero gradient never moves either way

    def init(self, origin: Tensor, generator: Optional[torch.Generator]) -> Tuple[Tensor, State]:
        if not self.random_start:
            return origin.clone(), {}
        delta = torch.randn(origin.shape, generator=generator, device=origin.device, dtype=origin.dtype)
        norm = _per_example_norm(delta)  # (b, 1, ..., 1)
        radius = torch.rand(norm.shape, generator=generator, device=origin.device, dtype=origin.dtype)
        delta = delta * (radius / norm * self.eps)
        return (origin + delta).clamp(0, 1), {}

    def step(self, x: Tensor, grad: Tensor, origin: Tensor, state: State, index: Tensor,
             loss: Optional[Tensor] = None) -> Tensor:
        # step_size * (g / ||g||), in this order (torchattacks' rounding), not (step_size * g) / ||g||
        x = x - self.step_size * (grad / (_per_example_norm(grad) + self.norm_offset).clamp_min(_TINY))
        o = origin[index]
        delta = x - o
        delta = delta * (self.eps / _per_example_norm(delta).clamp_min(_TINY)).clamp(max=1.0)
        return (o + delta).clamp(0, 1)


@dataclass(frozen=True)
class LinfBall:
    """PGD in the l_inf ball: signed-gradient steps of size ``step_size``; uniform random start."""

    eps: float
    step_size: float
    random_start: bool = True

    def init(self, origin: Tensor, generator: Optional[torch.Generator]) -> Tuple[Tensor, State]:
        if not self.random_start:
            return origin.clone(), {}
        u = torch.rand(origin.shape, generator=generator, device=origin.device, dtype=origin.dtype)
        return (origin + (2 * u - 1) * self.eps).clamp(0, 1), {}

    def step(self, x: Tensor, grad: Tensor, origin: Tensor, state: State, index: Tensor,
             loss: Optional[Tensor] = None) -> Tensor:
        o = origin[index]
        x = x - self.step_size * grad.sign()
        return (o + (x - o).clamp(-self.eps, self.eps)).clamp(0, 1)


@dataclass(frozen=True)
class FixedLengthStep:
    """Unconstrained steps of fixed L2 length along the normalized gradient, kept in [0, 1].

    The published STIR inversion: x <- clamp(x - step_size * g / ||g||_2, 0, 1), step_size 0.5.
    ``origin`` is the starting point (the seed image); nothing ties x to it.
    """

    step_size: float

    def init(self, origin: Tensor, generator: Optional[torch.Generator]) -> Tuple[Tensor, State]:
        return origin.clamp(0, 1), {}

    def step(self, x: Tensor, grad: Tensor, origin: Tensor, state: State, index: Tensor,
             loss: Optional[Tensor] = None) -> Tensor:
        return (x - self.step_size * grad / _per_example_norm(grad).clamp_min(_TINY)).clamp(0, 1)


class Schedule(Protocol):
    """A step schedule: (b,) step counts t >= 1 (the current step included) -> (b,) float32 factors."""

    def __call__(self, t: Tensor) -> Tensor: ...


@dataclass(frozen=True)
class Constant:
    """factor(t) = 1."""

    def __call__(self, t: Tensor) -> Tensor:
        return torch.ones_like(t, dtype=torch.float32)


@dataclass(frozen=True)
class Cosine:
    """factor(t) = 0.5 * (1 + cos(pi * (t - 1) / horizon)): from 1 at step 1 to 0 at ``horizon``."""

    horizon: int

    def __call__(self, t: Tensor) -> Tensor:
        frac = ((t - 1).to(torch.float32) / max(self.horizon, 1)).clamp(0, 1)
        return 0.5 * (1 + torch.cos(torch.pi * frac))


@dataclass(frozen=True)
class InverseTime:
    """factor(t) = 1 / (1 + (t - 1) / tau): no horizon, so the first steps never depend on the budget."""

    tau: float

    def __call__(self, t: Tensor) -> Tensor:
        return 1.0 / (1.0 + (t - 1).to(torch.float32) / self.tau)


@dataclass(frozen=True)
class Exponential:
    """factor(t) = 0.5 ** ((t - 1) / half_life)."""

    half_life: float

    def __call__(self, t: Tensor) -> Tensor:
        return 0.5 ** ((t - 1).to(torch.float32) / self.half_life)


@dataclass(frozen=True)
class Adam:
    """Per-example Adam (Kingma & Ba 2015) with a step schedule, kept in [0, 1].

        g_t = grad                         (or grad / ||grad||_2 per example with ``normalize``)
        m_t = b1 m_{t-1} + (1 - b1) g_t,   v_t = b2 v_{t-1} + (1 - b2) g_t^2
        x  <- clamp(x - lr * schedule(t) * m_hat / (sqrt(v_hat) + eps), 0, 1)
        m_hat = m_t / (1 - b1^t),   v_hat = v_t / (1 - b2^t)

    ``lr`` is roughly the first step per pixel. State rows: moments ``m``, ``v`` (B, ...) and the
    step count ``t`` (B,) of each example, so an example's schedule follows its own steps.
    ``normalize=True`` feeds the per-example unit gradient to the moments (then the step does not
    depend on the loss scale even through ``eps``).
    """

    lr: float
    schedule: Schedule = Constant()
    betas: Tuple[float, float] = (0.9, 0.99)
    eps: float = 1e-8
    normalize: bool = False

    def init(self, origin: Tensor, generator: Optional[torch.Generator]) -> Tuple[Tensor, State]:
        state = {
            "m": torch.zeros_like(origin),
            "v": torch.zeros_like(origin),
            "t": torch.zeros(origin.shape[0], dtype=torch.long, device=origin.device),
        }
        return origin.clamp(0, 1), state

    def step(self, x: Tensor, grad: Tensor, origin: Tensor, state: State, index: Tensor,
             loss: Optional[Tensor] = None) -> Tensor:
        b1, b2 = self.betas
        g = grad / _per_example_norm(grad).clamp_min(_TINY) if self.normalize else grad
        t = state["t"][index] + 1  # (b,)
        m = b1 * state["m"][index] + (1 - b1) * g
        v = b2 * state["v"][index] + (1 - b2) * g * g
        state["t"][index], state["m"][index], state["v"][index] = t, m, v
        shape = (-1, *([1] * (x.dim() - 1)))  # (b,) -> (b, 1, ..., 1)
        tf = t.to(x.dtype)
        m_hat = m / (1 - b1**tf).view(shape)
        v_hat = v / (1 - b2**tf).view(shape)
        lr = self.lr * self.schedule(t).to(x.dtype)
        return (x - lr.view(shape) * m_hat / (v_hat.sqrt() + self.eps)).clamp(0, 1)


@dataclass(frozen=True)
class ScheduledLengthStep:
    """``FixedLengthStep`` with a step schedule: x <- clamp(x - s * schedule(t) * g / ||g||_2, 0, 1).

    State: the step count ``t`` (B,) of each example.
    """

    step_size: float
    schedule: Schedule = Constant()

    def init(self, origin: Tensor, generator: Optional[torch.Generator]) -> Tuple[Tensor, State]:
        return origin.clamp(0, 1), {"t": torch.zeros(origin.shape[0], dtype=torch.long, device=origin.device)}

    def step(self, x: Tensor, grad: Tensor, origin: Tensor, state: State, index: Tensor,
             loss: Optional[Tensor] = None) -> Tensor:
        t = state["t"][index] + 1
        state["t"][index] = t
        s = (self.step_size * self.schedule(t)).to(x.dtype).view(-1, *([1] * (x.dim() - 1)))
        return (x - s * grad / _per_example_norm(grad).clamp_min(_TINY)).clamp(0, 1)


@dataclass(frozen=True)
class HalvingLengthStep:
    """``FixedLengthStep`` whose length halves per example when its objective stops improving.

        x <- clamp(x - s_i * g / ||g||_2, 0, 1),   s_i <- shrink * s_i after ``patience`` steps
                                                 without a new best objective for example i

    from s_i = ``step_size``, never below ``min_step``. The continuation of the published inversion
    (``InversionConfig.continue_steps``): fixed-length steps of 0.5 stall once the residual is of the
    order of what one step changes; shorter steps go further. State rows: the length ``s`` (B,), the
    best objective ``best`` (B,) and the steps since it ``stall`` (B,).
    """

    step_size: float
    patience: int = 20
    shrink: float = 0.5
    min_step: float = 1e-4

    def init(self, origin: Tensor, generator: Optional[torch.Generator]) -> Tuple[Tensor, State]:
        b = origin.shape[0]
        state = {"s": torch.full((b,), self.step_size, dtype=origin.dtype, device=origin.device),
                 "best": torch.full((b,), float("inf"), device=origin.device),
                 "stall": torch.zeros(b, dtype=torch.long, device=origin.device)}
        return origin.clamp(0, 1), state

    def step(self, x: Tensor, grad: Tensor, origin: Tensor, state: State, index: Tensor,
             loss: Optional[Tensor] = None) -> Tensor:
        if loss is None:
            raise ValueError("HalvingLengthStep adapts to the objective: the loop must pass loss")
        s = _shrink_on_plateau(state, "s", index, loss, self.patience, self.shrink, self.min_step)
        step = s.view(-1, *([1] * (x.dim() - 1)))
        return (x - step * (grad / _per_example_norm(grad).clamp_min(_TINY))).clamp(0, 1)


def _shrink_on_plateau(state: State, rate: str, index: Tensor, loss: Tensor, patience: int, shrink: float,
                       floor: float) -> Tensor:
    """The per-example rate ``state[rate]`` of rows ``index`` (b,), multiplied by ``shrink`` (never below
    ``floor``) once ``patience`` steps passed without a new best ``loss`` (b,); updates ``best``,
    ``stall`` and the rate in place and returns the rate. Shared by HalvingLengthStep and PlateauAdam."""
    improved = loss < state["best"][index]
    state["best"][index] = torch.where(improved, loss, state["best"][index])
    stall = torch.where(improved, torch.zeros_like(state["stall"][index]), state["stall"][index] + 1)
    shrunk = stall >= patience
    r = torch.where(shrunk, (state[rate][index] * shrink).clamp_min(floor), state[rate][index])
    state[rate][index], state["stall"][index] = r, torch.where(shrunk, torch.zeros_like(stall), stall)
    return r


@dataclass(frozen=True)
class PlateauAdam:
    """Per-example Adam whose learning rate halves per example when its objective stops improving.

        m_t, v_t as ``Adam``;   x <- P(x - lr_i * m_hat / (sqrt(v_hat) + eps))
        lr_i <- shrink * lr_i after ``patience`` steps without a new best objective for example i

    from lr_i = ``lr``, never below ``min_lr``. ``bounds`` (lo, hi) is the box P projects onto ((0, 1):
    the image box); None leaves x unconstrained, for a reparameterised variable (x = sigmoid(z) of
    ``stir.inversion.iri``: the box is then in the map, and no pixel sticks on its boundary). A step
    schedule with no horizon that adapts to each image: the IRI solver's geometry. State rows: the
    moments ``m``, ``v`` (B, ...), the step count ``t``, the rate ``lr``, the best objective ``best``
    and the steps since it ``stall`` (B,).
    """

    lr: float
    patience: int = 30
    shrink: float = 0.5
    min_lr: float = 1e-5
    betas: Tuple[float, float] = (0.9, 0.99)
    eps: float = 1e-8
    bounds: Optional[Tuple[float, float]] = (0.0, 1.0)

    def _project(self, x: Tensor) -> Tensor:
        return x if self.bounds is None else x.clamp(*self.bounds)

    def init(self, origin: Tensor, generator: Optional[torch.Generator]) -> Tuple[Tensor, State]:
        b = origin.shape[0]
        state = {"m": torch.zeros_like(origin), "v": torch.zeros_like(origin),
                 "t": torch.zeros(b, dtype=torch.long, device=origin.device),
                 "lr": torch.full((b,), self.lr, dtype=origin.dtype, device=origin.device),
                 "best": torch.full((b,), float("inf"), device=origin.device),
                 "stall": torch.zeros(b, dtype=torch.long, device=origin.device)}
        return self._project(origin), state

    def step(self, x: Tensor, grad: Tensor, origin: Tensor, state: State, index: Tensor,
             loss: Optional[Tensor] = None) -> Tensor:
        if loss is None:
            raise ValueError("PlateauAdam adapts to the objective: the loop must pass loss")
        lr = _shrink_on_plateau(state, "lr", index, loss, self.patience, self.shrink, self.min_lr)
        b1, b2 = self.betas
        t = state["t"][index] + 1  # (b,)
        m = b1 * state["m"][index] + (1 - b1) * grad
        v = b2 * state["v"][index] + (1 - b2) * grad * grad
        state["t"][index], state["m"][index], state["v"][index] = t, m, v
        shape = (-1, *([1] * (x.dim() - 1)))  # (b,) -> (b, 1, ..., 1)
        tf = t.to(x.dtype)
        m_hat = m / (1 - b1**tf).view(shape)
        v_hat = v / (1 - b2**tf).view(shape)
        return self._project(x - lr.view(shape) * m_hat / (v_hat.sqrt() + self.eps))
