"""G-empirical equivariance deviation (G-EED) of a network's representations, tap by tap.

Kvinge et al. 2022, "On the Symmetries of Deep Learning Models and their Internal Representations".
For a model f read at a tap, images x and a transformation g (``stir.invariance.transforms``):

    invariance G-EED   = E_x E_g d(f(g x), f(x))        0 when the tap ignores g
    equivariance G-EED = E_x E_g d(f(g x), g f(x))      0 when g commutes with the tap's map
                         (only where g acts on the tap's feature map: spatial maps, see Transform)

with two distances between representations a, b of one image (flattened to vectors):

    euclidean  ||a - b||_2 / ||f(x)||_2   (normalised by the untransformed representation's norm,
                                           so taps of different scale compare; NaN where f(x) = 0)
    cosine     1 - <a, b> / (||a|| ||b||)  (NaN where either is 0)

Per transformation g the expectation over g is that one g (one line per transformation in the
plots). Values are per image; ``interval`` gives the mean and a normal 95% interval over images
(and over seeds when several models' values are pooled, ``pool``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence

import torch
from torch import Tensor, nn

from stir.models.taps import collect
from stir.invariance.transforms import Transform, gaussian_noise, get_transforms

DISTANCES = ("euclidean", "cosine")
KINDS = ("invariance", "equivariance")
Z95 = 1.959963984540054


def distance(a: Tensor, b: Tensor, ref: Tensor, name: str) -> Tensor:
    """Per-row distance (n,) between a and b (n, ...), in float64; ``ref`` = f(x) for the euclidean norm."""
    a, b, ref = (t.flatten(1).double() for t in (a, b, ref))
    if name == "euclidean":
        norm = ref.norm(dim=1)
        return torch.where(norm > 0, (a - b).norm(dim=1) / norm, torch.full_like(norm, math.nan))
    if name == "cosine":
        na, nb = a.norm(dim=1, keepdim=True), b.norm(dim=1, keepdim=True)
        # 1 - cos = ||a/|a| - b/|b|||^2 / 2: the same value, exactly 0 for a == b (1 - cos is not).
        value = (a / na - b / nb).pow(2).sum(dim=1) / 2
        return torch.where((na[:, 0] > 0) & (nb[:, 0] > 0), value, torch.full_like(value, math.nan))
    raise ValueError(f"unknown distance {name!r}; choose from {list(DISTANCES)}")


def invariance_values(f_x: Tensor, f_gx: Tensor, dist: str) -> Tensor:
    """d(f(g x), f(x)) per image: (n,)."""
    return distance(f_gx, f_x, f_x, dist)


def equivariance_values(f_x: Tensor, f_gx: Tensor, g: Transform, stride: int, dist: str) -> Tensor:
    """d(f(g x), g f(x)) per image: (n,); f maps (n, c, h', w') of the given stride."""
    return distance(f_gx, g.apply_map(f_x, stride), f_x, dist)


@dataclass
class Interval:
    """Mean of finite values with a normal 95% interval mean +- 1.96 s / sqrt(m) (s: sample std)."""

    mean: float
    low: float
    high: float
    count: int

    @classmethod
    def of(cls, values: Iterable[float]) -> "Interval":
        v = torch.tensor([float(x) for x in values], dtype=torch.float64)
        v = v[torch.isfinite(v)]
        if v.numel() == 0:
            return cls(math.nan, math.nan, math.nan, 0)
        mean = v.mean().item()
        half = Z95 * v.std(unbiased=True).item() / math.sqrt(v.numel()) if v.numel() > 1 else 0.0
        return cls(mean, mean - half, mean + half, int(v.numel()))


@dataclass
class GEEDRow:
    """G-EED of one (tap, transformation, kind, distance, noise level): per-image values and their interval."""

    tap: str
    transform: str
    kind: str  # invariance | equivariance
    distance: str
    noise: float  # sigma of the Gaussian noise added to the images first (0: in distribution)
    values: List[float]
    depth: float = math.nan  # relative depth of the tap in the measured list (0 first, 1 last)

    @property
    def interval(self) -> Interval:
        return Interval.of(self.values)

    def key(self) -> tuple:
        return (self.tap, self.transform, self.kind, self.distance, self.noise)


@dataclass
class GEEDResult:
    """Every G-EED row of one model."""

    model: str
    rows: List[GEEDRow] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "GEEDResult":
        return cls(d["model"], [GEEDRow(**r) for r in d["rows"]], list(d.get("notes", [])))

    def get(self, tap: str, transform: str, kind: str = "invariance", distance: str = "euclidean",
            noise: float = 0.0) -> Optional[GEEDRow]:
        for row in self.rows:
            if row.key() == (tap, transform, kind, distance, noise):
                return row
        return None


def measure_geed(
    model: nn.Module,
    images: Tensor,
    taps: Sequence[str],
    transforms: Sequence[str],
    *,
    distances: Sequence[str] = DISTANCES,
    noise_levels: Sequence[float] = (0.0,),
    noise_seed: int = 0,
    name: str = "model",
    batch_size: int = 250,
) -> GEEDResult:
    """Invariance (and, where defined, equivariance) G-EED of ``model`` at every tap, per transformation.

    Args:
        model: takes images (n, c, h, w) in [0, 1]; measured frozen in eval mode (modes restored).
        images: x, (n, c, h, w) in [0, 1].  taps: tap names in depth order (``stir.models.tap_names``).
        transforms: names of ``stir.invariance.transforms`` (unknown: ValueError listing the choices).
        distances: subset of ("euclidean", "cosine").  noise_levels: sigma of Gaussian noise added to
            x first (0 = the images themselves); the same noise (``noise_seed``) for every g.
    """
    group = get_transforms(transforms)
    bad = [d for d in distances if d not in DISTANCES]
    if bad or not distances:
        raise ValueError(f"unknown distance(s) {bad}; choose from {list(DISTANCES)}")
    taps = list(taps)
    if not taps:
        raise ValueError("no taps to measure")
    depths = [1.0] if len(taps) == 1 else [i / (len(taps) - 1) for i in range(len(taps))]
    result = GEEDResult(name)
    side = images.shape[-1]
    for sigma in noise_levels:
        x = gaussian_noise(images, float(sigma), noise_seed)
        f_x = collect(model, x, taps, batch_size, reduce=False)
        for g in group:
            f_gx = collect(model, g.apply(x), taps, batch_size, reduce=False)
            for tap, depth in zip(taps, depths):
                a, b = f_x[tap], f_gx[tap]
                spatial = a.dim() == 4 and a.shape[-1] == a.shape[-2]
                stride = side // a.shape[-1] if spatial else 0
                for dist in distances:
                    result.rows.append(GEEDRow(tap, g.name, "invariance", dist, float(sigma),
                                               invariance_values(a, b, dist).tolist(), depth))
                    if spatial and g.acts_on(stride):
                        result.rows.append(GEEDRow(tap, g.name, "equivariance", dist, float(sigma),
                                                   equivariance_values(a, b, g, stride, dist).tolist(), depth))
    return result


def pool(results: Sequence[GEEDResult], label: str) -> GEEDResult:
    """Several models' (e.g. seeds') rows pooled per key: values concatenated (interval over images and seeds).

    The interval treats every (image, seed) value as independent; when seeds differ systematically
    it is narrower than an interval over seed means would be (compare the per-model results).
    """
    pooled: Dict[tuple, GEEDRow] = {}
    for result in results:
        for row in result.rows:
            if row.key() in pooled:
                pooled[row.key()].values.extend(row.values)
            else:
                pooled[row.key()] = GEEDRow(**{**asdict(row), "values": list(row.values)})
    return GEEDResult(label, list(pooled.values()))
