"""What a STIR value means: its floor, its ceiling, the normalised value and an interval.

A STIR value S = 1/k sum_j S_r(m2(X), m2(X'_j)) is read against two references on the same images,
the same n and the same S_r (Nanda et al. use linear CKA at n = 1000; at n = 100 its chance level
is about 0.09 on CIFAR ResNets, /work/shared/PITFALLS.md):

    floor     F = mean over P permutations pi of S_r(m2(X), m2(X)[pi])
                  the value with no shared invariance at all: the rows no longer correspond
                  (reading "images", the default). The other reading, F' = mean over pi and j of
                  S_r(m2(X), m2(X'_j)[pi]), keeps the distribution of the X' the inversion made and
                  destroys only their correspondence (reading "iris"); both are reported.
    ceiling   C = S_r(m1(X), m1(X'')), X'' arbitrary IRIs of m1 from an independent seed draw
                  (seed ``inversion.seed + k``): what the same procedure gives when m2 = m1
                  (reading "independent", the default). The other reading, C' = 1/k sum_j
                  S_r(m1(X), m1(X'_j)), measures m1 on the very X' of the value (free, always
                  reported as ``ceiling_same_draws``). Below 1 when the X' are not IRIs.
    normalised (S - F) / (C - F): 0 at the floor, 1 at the ceiling.
    interval  resamples of the images combined with the k draws: resample b takes the rows I_b
                  (X and every X'_j resampled together) and the draws J_b (k with replacement),
                  S_b = mean_{j in J_b} S_r(m2(X)[I_b], m2(X'_j)[I_b]); the normalised value gets its
                  interval from the same resamples with the ceiling measured on the same rows. With
                  k = 1 the draws cannot be resampled: the interval then covers the image sample only
                  (``method`` says so). Two readings of "a bootstrap over images" (``interval``):

                  half_sampling (default): I_b is n/2 rows drawn WITHOUT replacement; the spread of
                      S_b estimates the standard error of S at n (the delete-half jackknife: for a
                      mean, the variance over half-samples is exactly s^2/n), and the interval is
                      S +- z se, centred on the value.
                  bootstrap: I_b is n rows drawn WITH replacement and the interval is the percentile
                      interval of S_b. Duplicated rows raise linear CKA (a resample holds about 63%
                      distinct images, and CKA's chance level rises as n falls), so on STIR the
                      percentile interval sits above the value at small n (measured in
                      ``bench/bench_calibration.py``: docs/estimator.md); kept for comparison.

Linear CKA is resampled through its Gram form with each resample as a weight vector (``_Resampler``:
exactly linear CKA of the resampled rows, three (B, n) x (n, n) products for all B resamples); any
other measure is called on the resampled rows. Every draw of randomness comes from one
generator seeded by ``CalibrationConfig.seed``: calibrating never touches the global RNG.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from stir import similarity

CEILINGS = ("independent", "same_draws", "none")
FLOORS = ("images", "iris")
INTERVALS = ("half_sampling", "bootstrap")
GRAM_LIMIT = 5000  # n above which linear CKA is resampled in feature form (an n x n float64 Gram is 200 MB)


@dataclass
class CalibrationConfig:
    """How every STIR and STIR_adv value is calibrated (module docstring); ``calibration.*`` of
    evaluate.py. Part of the store key."""

    permutations: int = 20  # P: permutations of the floor (0: no floor)
    floor: str = "images"  # images (S_r(m2(X), m2(X)[pi])) | iris (S_r(m2(X), m2(X')[pi])): which reading normalises
    ceiling: str = "independent"  # independent (one more seed draw of m1) | same_draws (m1 on the k draws) | none
    resamples: int = 1000  # B: resamples of the interval (0: no interval)
    interval: str = "half_sampling"  # half_sampling (n/2 rows without replacement, value +- z se) | bootstrap (percentile)
    confidence: float = 0.95  # the interval's nominal coverage
    seed: int = 0  # the generator of the permutations and the resamples

    def __post_init__(self) -> None:
        if self.permutations < 0 or self.resamples < 0:
            raise ValueError(f"calibration.permutations and calibration.resamples must be >= 0, got "
                             f"{self.permutations}, {self.resamples}")
        if self.floor not in FLOORS:
            raise ValueError(f"calibration.floor must be one of {FLOORS}, got {self.floor!r}")
        if self.ceiling not in CEILINGS:
            raise ValueError(f"calibration.ceiling must be one of {CEILINGS}, got {self.ceiling!r}")
        if self.interval not in INTERVALS:
            raise ValueError(f"calibration.interval must be one of {INTERVALS}, got {self.interval!r}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"calibration.confidence must be in (0, 1), got {self.confidence}")


@dataclass
class Calibration:
    """One STIR (or STIR_adv) value with its floor, ceiling, normalised value and interval.

    NaN where undefined (no finite draw, no floor asked for, a ceiling at the floor), with the
    reason in the owning result's notes.
    """

    value: float  # the STIR value: the mean over the k draws
    floor: float  # the floor of the reading ``floor_reading`` (mean over permutations)
    floor_std: float  # its spread over the permutations
    floor_images: float  # S_r(m2(X), m2(X)[pi]), mean over pi
    floor_iris: float  # S_r(m2(X), m2(X'_j)[pi]), mean over pi and j
    ceiling: float  # the ceiling of the reading ``ceiling_reading``
    ceiling_independent: float  # S_r(m1(X), m1(X'')), X'' an independent draw (NaN when not made)
    ceiling_same_draws: float  # 1/k sum_j S_r(m1(X), m1(X'_j))
    normalised: float  # (value - floor) / (ceiling - floor)
    low: float  # the interval of value
    high: float
    normalised_low: float
    normalised_high: float
    confidence: float
    resamples: int  # resamples that gave a finite value
    method: str  # what the interval covers, in words
    floor_reading: str = "images"
    ceiling_reading: str = "independent"
    interval_reading: str = "half_sampling"

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Calibration":
        return cls(**{k: (float(v) if isinstance(v, (int, float)) and k not in ("resamples",) else v) for k, v in d.items()})


def permutation_floor(measure: str, x: Tensor, y: Tensor, permutations: int,
                      generator: torch.Generator) -> Tuple[float, float]:
    """Mean and std over ``permutations`` random row permutations pi of S_r(x, y[pi]).

    x (n, d1), y (n, d2): with y = x it is the similarity of a representation with itself in
    shuffled order, the chance level of S_r at this n. (NaN, NaN) for no permutation.
    """
    if permutations == 0:
        return math.nan, math.nan
    values = [_value(measure, x, y[torch.randperm(y.shape[0], generator=generator).to(y.device)])
              for _ in range(permutations)]
    t = torch.tensor(values, dtype=torch.float64)
    return float(t.mean()), float(t.std(unbiased=False))


def _value(measure: str, x: Tensor, y: Tensor) -> float:
    """S_r(x, y) as a float; NaN where the measure is undefined on this data (ValueError)."""
    try:
        return float(similarity.get(measure)(x, y))
    except ValueError:
        return math.nan


def resample_rows(n: int, resamples: int, generator: torch.Generator, without_replacement: bool = False) -> Tensor:
    """(resamples, m) int64 row indices: m = n drawn with replacement, or m = n // 2 distinct rows."""
    if without_replacement:
        return torch.stack([torch.randperm(n, generator=generator)[: n // 2] for _ in range(resamples)])
    return torch.randint(0, n, (resamples, n), generator=generator)


class _Resampler:
    """S_r(x[I], y[I]) of one fixed x against several y, for many row resamples I at once.

    Linear CKA goes through its Gram form with the resample as a weight vector: with w the counts of
    each row in I (sum w = m, its size) and M = diag(w) - w w^T / m (so that P^T H P = M for the
    selection P and the centring H of m rows),

        HSIC(K, L)_I = tr(K M L M) = w^T (K o L) w - 2 (K u)^T diag(w) (L u) + (u^T K u)(u^T L u),

    u = w / sqrt(m), K = Xc Xc^T, L = Yc Yc^T: three (B, n) x (n, n) products for B resamples, exactly
    linear CKA of the resampled rows, and no gathered matrix. Other measures are called on the
    resampled rows one by one.
    """

    def __init__(self, measure: str, x: Tensor, rows: Tensor):
        self.measure, self.x, self.rows = measure, x, rows
        self.gram = measure == "linear_cka" and x.shape[0] <= GRAM_LIMIT
        if self.gram:
            n = x.shape[0]
            ones = torch.ones(rows.shape, dtype=torch.float64)
            self.w = torch.zeros(rows.shape[0], n, dtype=torch.float64).scatter_add_(1, rows, ones).to(x.device)  # (B, n)
            self.u = self.w / math.sqrt(rows.shape[1])
            self.k = _gram(x)
            self.kk = self._hsic(self.k, self.k)

    def _hsic(self, k: Tensor, l: Tensor) -> Tensor:
        """(B,) HSIC numerators tr(K M_b L M_b) for every resample b."""
        w, u = self.w, self.u
        ku, lu = u @ k, u @ l  # (B, n)
        return ((w @ (k * l)) * w).sum(1) - 2 * (ku * w * lu).sum(1) + (ku * u).sum(1) * (lu * u).sum(1)

    def values(self, y: Tensor) -> Tensor:
        """(B,) S_r(x[I_b], y[I_b]) for every resample b; NaN where the measure is undefined."""
        if not self.gram:
            out = [_value(self.measure, self.x[idx], y[idx]) for idx in self.rows.to(self.x.device)]
            return torch.tensor(out, dtype=torch.float64)
        l = _gram(y)
        num, ll = self._hsic(self.k, l), self._hsic(l, l)
        den = (self.kk.clamp_min(0) * ll.clamp_min(0)).sqrt()
        return torch.where(den > 0, num / den, torch.full_like(num, math.nan)).cpu()


def _gram(z: Tensor) -> Tensor:
    """Xc Xc^T (n, n) in float64 (centred once for stability; M removes any column shift)."""
    z = z.detach().double()
    z = z - z.mean(dim=0, keepdim=True)
    return z @ z.T


def percentile_interval(values: Tensor, confidence: float) -> Tuple[float, float, int]:
    """(low, high, count) of the finite values' central ``confidence`` quantiles; NaN without any."""
    finite = values[torch.isfinite(values)]
    if finite.numel() == 0:
        return math.nan, math.nan, 0
    alpha = (1 - confidence) / 2
    q = torch.quantile(finite, torch.tensor([alpha, 1 - alpha], dtype=finite.dtype))
    return float(q[0]), float(q[1]), int(finite.numel())


def standard_error_interval(value: float, values: Tensor, confidence: float) -> Tuple[float, float, int]:
    """(value - z se, value + z se, count), se the standard deviation of the finite resampled values
    and z the normal quantile of ``confidence``; NaN without two finite values."""
    finite = values[torch.isfinite(values)]
    if finite.numel() < 2 or not math.isfinite(value):
        return math.nan, math.nan, int(finite.numel())
    z = float(torch.distributions.Normal(0.0, 1.0).icdf(torch.tensor(0.5 + confidence / 2)))
    se = float(finite.std(unbiased=True))
    return value - z * se, value + z * se, int(finite.numel())


def normalise(value: float, floor: float, ceiling: float) -> float:
    """(value - floor) / (ceiling - floor); NaN when undefined (missing or equal references)."""
    if not all(math.isfinite(v) for v in (value, floor, ceiling)) or ceiling == floor:
        return math.nan
    return (value - floor) / (ceiling - floor)


def calibrate(
    measure: str,
    target: Tensor,
    target_primes: Sequence[Tensor],
    draw_values: Sequence[float],
    reference: Tensor,
    reference_primes: Sequence[Tensor],
    reference_independent: Optional[Tensor],
    cfg: CalibrationConfig,
) -> Calibration:
    """Calibrate one STIR value (module docstring).

    Args:
        measure: the S_r of the value (a ``stir.similarity`` name).
        target: m2(X) (n, d2).  target_primes: m2(X'_j) (n, d2) for the k draws.
        draw_values: the k values S_r(m2(X), m2(X'_j)) already measured (NaN for a refused draw).
        reference: m1(X) (n, d1) at the reference's tap.  reference_primes: m1(X'_j) for the k draws.
        reference_independent: m1(X'') (n, d1) of the independent draw, or None when not made.
        cfg: what to compute.
    """
    k, n = len(target_primes), target.shape[0]
    value = float(torch.tensor(list(draw_values), dtype=torch.float64).mean())
    gen = torch.Generator().manual_seed(cfg.seed)
    floor_images, floor_std_images = permutation_floor(measure, target, target, cfg.permutations, gen)
    per_draw = [permutation_floor(measure, target, y, cfg.permutations, gen) for y in target_primes]
    floor_iris = float(torch.tensor([m for m, _ in per_draw]).mean()) if cfg.permutations else math.nan
    floor_std_iris = float(torch.tensor([s for _, s in per_draw]).mean()) if cfg.permutations else math.nan
    same = float(torch.tensor([_value(measure, reference, y) for y in reference_primes], dtype=torch.float64).mean())
    independent = _value(measure, reference, reference_independent) if reference_independent is not None else math.nan
    ceiling = {"independent": independent, "same_draws": same, "none": math.nan}[cfg.ceiling]
    floor, floor_std = (floor_images, floor_std_images) if cfg.floor == "images" else (floor_iris, floor_std_iris)

    low = high = n_low = n_high = math.nan
    resamples = 0
    method = "no interval (calibration.resamples=0)"
    if cfg.resamples > 0 and math.isfinite(value):
        half = cfg.interval == "half_sampling"
        rows = resample_rows(n, cfg.resamples, gen, without_replacement=half)
        draws = torch.randint(0, k, (cfg.resamples, k), generator=gen) if k > 1 else torch.zeros(cfg.resamples, 1, dtype=torch.long)
        resampled = _Resampler(measure, target, rows)
        per = torch.stack([resampled.values(y) for y in target_primes], dim=1)  # (B, k)
        stir_b = per.gather(1, draws).mean(dim=1)  # (B,)
        interval = (lambda v, b: standard_error_interval(v, b, cfg.confidence)) if half else (
            lambda v, b: percentile_interval(b, cfg.confidence))
        low, high, resamples = interval(value, stir_b)
        normalised = normalise(value, floor, ceiling)
        if cfg.ceiling != "none" and math.isfinite(floor) and math.isfinite(normalised):
            ref = _Resampler(measure, reference, rows)
            if cfg.ceiling == "independent" and reference_independent is not None:
                ceil_b = ref.values(reference_independent)
            else:
                ceil_b = torch.stack([ref.values(y) for y in reference_primes], dim=1).gather(1, draws).mean(dim=1)
            n_low, n_high, _ = interval(normalised, (stir_b - floor) / (ceil_b - floor))
        images = f"{n // 2} of the {n} images without replacement" if half else f"{n} of the {n} images with replacement"
        kind = "value +- z se, se from half-samples" if half else "percentile bootstrap"
        method = (f"{kind}: {cfg.resamples} resamples of {images} and of the {k} draws" if k > 1 else
                  f"{kind}: {cfg.resamples} resamples of {images} (k=1: the seed variance is not in it)")
    return Calibration(
        value=value, floor=floor, floor_std=floor_std, floor_images=floor_images, floor_iris=floor_iris,
        ceiling=ceiling, ceiling_independent=independent, ceiling_same_draws=same,
        normalised=normalise(value, floor, ceiling), low=low, high=high, normalised_low=n_low,
        normalised_high=n_high, confidence=cfg.confidence, resamples=resamples, method=method,
        floor_reading=cfg.floor, ceiling_reading=cfg.ceiling, interval_reading=cfg.interval,
    )


def calibration_notes(label: str, cal: Calibration) -> List[str]:
    """What a reader must know about one calibrated value (said in the result's notes)."""
    notes = []
    if math.isfinite(cal.value) and math.isfinite(cal.floor) and math.isfinite(cal.low) and cal.low <= cal.floor:
        notes.append(f"{label}: {cal.value:.3f} is not above its floor {cal.floor:.3f} "
                     f"(interval [{cal.low:.3f}, {cal.high:.3f}]): no shared invariance is detected at this n")
    if math.isfinite(cal.ceiling) and math.isfinite(cal.floor) and cal.ceiling <= cal.floor:
        notes.append(f"{label}: ceiling {cal.ceiling:.3f} is not above the floor {cal.floor:.3f}: "
                     "the normalised value is undefined (the X' are far from IRIs of m1)")
    return notes
