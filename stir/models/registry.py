"""A registry of architectures, each listing its named feature taps.

Every registered network is a plain ``nn.Module`` whose ``forward`` takes images in [0, 1] and
returns logits; ``taps`` lists, in depth order, the points where a representation can be read
(``stir.models.taps.representation`` reads them). Builders receive only the model's own config.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence, Tuple

from torch import nn

from stir.config.schema import ModelConfig
from stir.registry import Registry


@dataclass(frozen=True)
class Tap:
    """One named point inside a network where its representation can be read.

    ``module`` is the dotted path (as in ``named_modules()``) of the module whose output is the
    representation; ``channels`` and ``stride`` give its shape for a 32x32 input:
    (n, channels, 32 // stride, 32 // stride), or (n, channels) when ``stride`` is 0 (a vector).
    """

    name: str
    module: str
    channels: int
    stride: int

    def dim(self, image_size: int = 32) -> int:
        """Flattened dimension d of the (n, d) representation for square inputs of this size."""
        if self.stride == 0:
            return self.channels
        side = image_size // self.stride
        return self.channels * side * side


class Network(nn.Module):
    """Base class of registered networks: ``taps`` in depth order, ``forward`` returns logits."""

    taps: Tuple[Tap, ...] = ()
    inner_taps: Tuple[Tap, ...] = ()  # readable too, but not in the depth list (e.g. inside a block)
    fake_relu_sites: Tuple[str, ...] = ()  # OutputReLU module paths of the architecture's FakeReLU rule
    published_fake_relu: bool = False  # whether the original STIR code fakes those sites (its own zoo only)
    fake_relu_rule: str = "none (no ReLU is faked)"  # in words, for records and notes

    @property
    def original_layer_taps(self) -> Tuple[str, ...]:
        """The layer list of the original STIR code for this family (default: the depth taps)."""
        return tuple(t.name for t in self.taps if t.name != "logits")

    def tap(self, name: str) -> Tap:
        for t in self.taps + self.inner_taps:
            if t.name == name:
                return t
        raise ValueError(
            f"unknown tap {name!r} for {type(self).__name__}; valid taps: {[t.name for t in self.taps + self.inner_taps]}"
        )


# (num_classes, mean, std) -> network; mean/std are the data set's channel statistics.
Builder = Callable[[ModelConfig, int, Sequence[float], Sequence[float]], Network]

# A family registers its builders with @register("name") where they are defined; the registry
# collects every module of stir.models on first use (a new family is one new module, no list).
ARCHITECTURES: Registry[Builder] = Registry("architecture", package="stir.models", skip=("registry",))


def register(name: str) -> Callable[[Builder], Builder]:
    """Decorator: the builder of architecture ``name`` (``model.arch=name``)."""
    return ARCHITECTURES.register(name)


def names() -> list[str]:
    """Names of every registered architecture, sorted."""
    return ARCHITECTURES.names()


def build(cfg: ModelConfig, num_classes: int, mean: Sequence[float], std: Sequence[float]) -> Network:
    """Build the architecture ``cfg.arch`` at width ``cfg.width`` for ``num_classes`` classes."""
    if cfg.arch not in ARCHITECTURES:
        raise ValueError(f"unknown architecture model.arch={cfg.arch!r}; choose one of {names()}")
    if cfg.width < 1:
        raise ValueError(f"model.width must be a positive channel count, got {cfg.width}")
    return ARCHITECTURES.get(cfg.arch)(cfg, num_classes, mean, std)
