"""Step geometries for the descent loop: where a step goes and what it is projected onto.

A geometry is a small strategy object (the robustness library's AttackerStep idea):
``init(origin, generator) -> (x0, state)`` picks the starting point (a random start or the
origin) and any per-example state; ``step(x, grad, origin, state, index) -> x`` takes one step
that DECREASES the objective and projects the result. ``index`` (a LongTensor of rows into the
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

    def step(self, x: Tensor, grad: Tensor, origin: Tensor, state: State, index: Tensor) -> Tensor: ...


@dataclass(frozen=True)
class L2Ball:
    """PGD in the l2 ball ||x - origin||_2 <= eps: normalized-gradient steps of length ``step_size``.

    Random start: a direction uniform on the sphere scaled by a radius U(0, 1) * eps (as
    torchattacks' PGDL2), clipped to the image box.
    """

    eps: float
    step_size: float
    random_start: bool = True

    def init(self, origin: Tensor, generator: Optional[torch.Generator]) -> Tuple[Tensor, State]:
        if not self.random_start:
            return origin.clone(), {}
        delta = torch.randn(origin.shape, generator=generator, device=origin.device, dtype=origin.dtype)
        radius = torch.rand(origin.shape[0], generator=generator, device=origin.device, dtype=origin.dtype)
        delta = delta / _per_example_norm(delta).clamp_min(_TINY) * radius.view(-1, *([1] * (origin.dim() - 1))) * self.eps
        return (origin + delta).clamp(0, 1), {}

    def step(self, x: Tensor, grad: Tensor, origin: Tensor, state: State, index: Tensor) -> Tensor:
        x = x - self.step_size * grad / _per_example_norm(grad).clamp_min(_TINY)
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

    def step(self, x: Tensor, grad: Tensor, origin: Tensor, state: State, index: Tensor) -> Tensor:
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

    def step(self, x: Tensor, grad: Tensor, origin: Tensor, state: State, index: Tensor) -> Tensor:
        return (x - self.step_size * grad / _per_example_norm(grad).clamp_min(_TINY)).clamp(0, 1)
