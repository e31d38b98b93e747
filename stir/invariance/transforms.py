"""The transformation group G that G-EED acts with: named input transformations of images in [0, 1].

Each ``Transform`` acts on images (n, c, h, w) in [0, 1] (``apply``) and, where the same
transformation has a meaning on a spatial feature map (n, c, h', w') read at a tap of stride s =
h / h', on that map too (``apply_map``): horizontal flip and the rotations act on any square map;
a cyclic shift by p pixels acts on a map of stride s as a cyclic shift by p / s cells when s
divides p, and not at all otherwise. Colour changes never act on maps (channels mean features
there), so they have invariance G-EED only.

    hflip              x[..., ::-1] (left-right mirror)
    shift1 ... shift4  torch.roll by p pixels along the width (cyclic: what leaves right enters left)
    rot90/180/270      counter-clockwise rotation in the (h, w) plane (torch.rot90 on dims (2, 3))
    brightness         clamp(x + 0.2, 0, 1): every pixel 0.2 brighter (named colour change)
    grayscale          each pixel replaced by its luminance 0.299 R + 0.587 G + 0.114 B on all channels

Kvinge et al. 2022, "On the Symmetries of Deep Learning Models and their Internal Representations"
(G-EED) take G a group; the set above is closed under composition only for flips / rotations / the
full cyclic group, so here G-EED is reported per transformation g (the expectation over g = one g).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import torch
from torch import Tensor

BRIGHTNESS_SHIFT = 0.2
_LUMA = (0.299, 0.587, 0.114)


@dataclass(frozen=True)
class Transform:
    """A named transformation of images; ``map_fn(f, stride)`` its action on feature maps (or None)."""

    name: str
    fn: Callable[[Tensor], Tensor]
    map_fn: Optional[Callable[[Tensor, int], Optional[Tensor]]] = None

    def apply(self, x: Tensor) -> Tensor:
        """g x for images x (n, c, h, w) in [0, 1]; the result stays in [0, 1]."""
        return self.fn(x)

    def acts_on(self, stride: int) -> bool:
        """Whether g has an action on a spatial map of this stride (equivariance is defined there)."""
        return self.map_fn is not None and self.map_fn(torch.zeros(1, 1, 8, 8), stride) is not None

    def apply_map(self, f: Tensor, stride: int) -> Tensor:
        """g f for a feature map f (n, c, h', w') of the given stride; ValueError where g has no action."""
        out = None if self.map_fn is None else self.map_fn(f, stride)
        if out is None:
            raise ValueError(f"transformation {self.name!r} has no action on a feature map of stride {stride}")
        return out


def _shift(pixels: int) -> Transform:
    def on_maps(f: Tensor, stride: int) -> Optional[Tensor]:
        if stride < 1 or pixels % stride:
            return None  # a shift by a fraction of a cell is not a permutation of the map
        return torch.roll(f, pixels // stride, dims=-1)

    return Transform(f"shift{pixels}", lambda x: torch.roll(x, pixels, dims=-1), on_maps)


def _rotation(quarter_turns: int) -> Transform:
    return Transform(f"rot{90 * quarter_turns}", lambda x: torch.rot90(x, quarter_turns, dims=(2, 3)),
                     lambda f, stride: torch.rot90(f, quarter_turns, dims=(2, 3)))


def _grayscale(x: Tensor) -> Tensor:
    luma = sum(w * x[:, c:c + 1] for c, w in enumerate(_LUMA))  # (n, 1, h, w)
    return luma.expand_as(x).clamp(0, 1)


TRANSFORMS: Dict[str, Transform] = {
    t.name: t for t in [
        Transform("hflip", lambda x: x.flip(-1), lambda f, stride: f.flip(-1)),
        *(_shift(p) for p in (1, 2, 3, 4)),
        *(_rotation(q) for q in (1, 2, 3)),
        Transform("brightness", lambda x: (x + BRIGHTNESS_SHIFT).clamp(0, 1)),
        Transform("grayscale", _grayscale),
    ]
}


def transform_names() -> List[str]:
    return list(TRANSFORMS)


def get_transform(name: str) -> Transform:
    if name not in TRANSFORMS:
        raise ValueError(f"unknown transformation {name!r}; choose from {transform_names()}")
    return TRANSFORMS[name]


def get_transforms(names: Sequence[str]) -> List[Transform]:
    """The named transformations, in order; an unknown name raises ValueError listing the choices."""
    if isinstance(names, str) or not names:
        raise ValueError(f"transformations must be a non-empty list of names from {transform_names()}, got {names!r}")
    return [get_transform(n) for n in names]


def gaussian_noise(x: Tensor, sigma: float, seed: int) -> Tensor:
    """clamp(x + sigma * N(0, 1), 0, 1) with a fixed generator (the same noise on every call)."""
    if sigma < 0:
        raise ValueError(f"noise level must be >= 0, got {sigma}")
    if sigma == 0:
        return x
    gen = torch.Generator(device="cpu").manual_seed(seed)
    noise = torch.randn(x.shape, generator=gen, dtype=x.dtype).to(x.device)
    return (x + sigma * noise).clamp(0, 1)
