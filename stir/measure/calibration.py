"""What a STIR value means: its floor, its ceiling, the normalised value, an interval and a p-value.

A STIR value S = 1/k sum_j S_r(m2(X), m2(X'_j)) is read against references on the same images,
the same n and the same S_r (Nanda et al. use linear CKA at n = 1000; at n = 100 its chance level
is about 0.09 on CIFAR ResNets, /work/shared/PITFALLS.md):

    floor     F = E_pi 1/k sum_j S_r(m2(X), m2(X'_j)[pi]): the value with the pairing of X and X'
                  broken and both distributions kept (reading "iris", the default): the null of
                  "m2 represents x' like x". Exact for linear CKA (sqrt(PR(m2 X) PR(m2 X'_j)) / (n-1))
                  and its debiased form (0), by ``permutations`` permutations for any other measure
                  (``stir.measure.null``). The reading "images", E_pi S_r(m2(X), m2(X)[pi]), keeps the
                  spectrum of m2(X) on both sides: it is off whenever m2(X') has another spectrum
                  than m2(X) (X' are not natural images), and is reported beside.
    p-value   the permutation p-value of S against the "iris" null (one permutation shared by the
                  k draws): (1 + #{null >= S}) / (1 + P); its smallest possible value is 1 / (1 + P).
    ceiling   C = 1/k sum_j S_r(m1(X), m1(X'_j)): m1 on the very X' of the value (reading
                  "same_draws", the default: no extra inversion, and it shares the value's draws, so
                  their variance cancels in the ratio); "independent" measures m1 on X'' from one
                  more seed draw (seed ``inversion.seed + k``, a third more inversion time). Below 1
                  when the X' are not IRIs. Its own floor F_C is the same reading on m1.
    normalised (S - F) / (C - F_C): each value above its own chance level, 0 at the floor, 1 at the
                  ceiling. NaN when the ceiling does not stand ``guard`` permutation standard
                  deviations above F_C (the ratio would be noise over noise); above 1 is possible
                  (m2 = f(m1) can keep more than m1 at this budget) and is flagged, never clipped.
                  Where the two floors differ, this reading cannot reach 1 by sharing: at S = C = P (P
                  the measure's value on identical inputs, 1 for CKA) it is (P - F) / (P - F_C), a
                  ratio of two floors (0.86-1.16 at the early taps of AT seed pairs, issue 31).
    chance-corrected  kappa(S, F) / kappa(C, F_C), kappa(v, f) = (v - f) / (P - f): each value as the
                  fraction of its own room above chance that it takes (Cohen's kappa form), then m2's
                  against m1's. 0 at the floor, 1 at S = C = P whatever the floors, and equal to the
                  normalised value where F = F_C. NaN where the measure has no fixed identity value,
                  a floor sits at P, or the ceiling is not clear of its floor (the same guard). Its
                  interval comes from the same resamples as the normalised value's.
    interval  resamples of the images combined with the k draws: resample b takes the rows I_b
                  (X and every X'_j resampled together) and the draws J_b (k with replacement),
                  S_b = mean_{j in J_b} S_r(m2(X)[I_b], m2(X'_j)[I_b]); the normalised value gets its
                  interval from the same resamples with the floors and the ceiling measured on the
                  same rows (linear CKA: the closed-form floor of each resample; a floor with no
                  closed form is held fixed, and ``method`` says so). The interval holds the
                  variance of the images and of the inversion's seed draws, never that of training
                  seeds (``stir.measure.seeds``). Two readings (``interval``; coverage of both by
                  simulation and on real networks: docs/benchmarks/calibration.md):

                  jackknife_corrected (the default): the delete-one jackknife over images with the
                      k draws nested in them (row i carries x_i and every x'_ij), its variance less half
                      its Efron-Stein bias estimated from delete-two pairs (``stir.measure.jackknife``),
                      S +- z se. Coverage 92-97.5% in 29 of 30 simulated cells at n = 100.

                  half_sampling: I_b is n/2 rows drawn WITHOUT replacement and J_b k draws
                      with replacement; the spread of S_b estimates the standard error of S at n (the
                      delete-half jackknife: for a mean, the variance over half-samples is exactly
                      s^2/n), and the interval is S +- z se, centred on the value. With k = 1 the draws
                      cannot be resampled (``method`` says so). Conservative: from k = 2 it counts the
                      seed variance twice (each row already carries its x'_ij), and near the floor
                      the half-samples overstate a degenerate statistic's spread (coverage 94-100%,
                      up to 2.5 times too wide). Kept because every shipped result (zoo/store) was
                      measured under it and the reading is part of a result's key: profile=laptop
                      names it, so the shipped zoo is served; it was the default until issue 53.

                  Retired (refused, ``settings.RETIRED``): ``bootstrap`` (the percentile interval
                  of n rows drawn with replacement: duplicated rows raise linear CKA, 0-17% coverage
                  at the null) and ``jackknife`` (the plain delete-one jackknife: 1.4 times too wide
                  at the null, 97-99% coverage).

Linear CKA is resampled through its Gram form with each resample as a weight vector (``_Resampler``:
exactly linear CKA of the resampled rows, three (B, n) x (n, n) products for all B resamples); any
other measure is called on the resampled rows. Every draw of randomness comes from one
generator seeded by ``CalibrationConfig.seed``: calibrating never touches the global RNG.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from stir import similarity
from stir.measure.settings import CEILINGS, FLOORS, INTERVALS, CalibrationConfig  # noqa: F401  (re-exported)
from stir.measure.jackknife import corrected_jackknife_se, jackknife_se, leave_one_out, leave_two_out  # noqa: F401  (re-exported)
from stir.measure.null import GRAM_LIMIT, ZERO_FLOOR, centred_gram, closed_form_floor, p_value, permutation_null

@dataclass
class Calibration:
    """One STIR (or STIR_adv) value with its floor, ceiling, normalised value, interval and p-value.

    NaN where undefined (no finite draw, no floor asked for, a ceiling not clear of its floor), with
    the reason in the owning result's notes. ``flags`` names what a reader must not miss
    ("above_ceiling", "at_floor", "ceiling_at_floor").
    """

    value: float  # the STIR value: the mean over the k draws
    floor: float  # the floor of the reading ``floor_reading``
    floor_std: float  # the standard deviation of its permutation null (NaN without permutations)
    floor_images: float  # E_pi S_r(m2(X), m2(X)[pi])
    floor_iris: float  # E_pi 1/k sum_j S_r(m2(X), m2(X'_j)[pi])
    ceiling: float  # the ceiling of the reading ``ceiling_reading``
    ceiling_independent: float  # S_r(m1(X), m1(X'')), X'' an independent draw (NaN when not made)
    ceiling_same_draws: float  # 1/k sum_j S_r(m1(X), m1(X'_j))
    normalised: float  # (value - floor) / (ceiling - ceiling_floor)
    low: float  # the interval of value
    high: float
    normalised_low: float
    normalised_high: float
    confidence: float
    resamples: int  # resamples that gave a finite value
    method: str  # what the interval covers, in words
    floor_reading: str = "iris"
    ceiling_reading: str = "same_draws"
    interval_reading: str = "half_sampling"
    floor_method: str = ""  # "closed form" | "<P> permutations" | "none"
    ceiling_floor: float = math.nan  # the ceiling's own floor (the same reading, on m1)
    ceiling_floor_std: float = math.nan
    p_value: float = math.nan  # permutation p-value of value against the iris null
    permutations: int = 0  # P behind p_value and the floors' spread
    flags: List[str] = field(default_factory=list)
    # kappa(S, F) / kappa(C, F_C) (module docstring); NaN in results stored before it was measured.
    chance_corrected: float = math.nan
    chance_corrected_low: float = math.nan
    chance_corrected_high: float = math.nan

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Calibration":
        known = {f.name: f for f in fields(cls)}
        kwargs = {}
        for k, v in d.items():
            if k not in known:
                continue
            if known[k].type in ("float", "int") and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ValueError(f"calibration field {k} is {v!r}, not a number")  # a null field: never served
            kwargs[k] = v if k in ("resamples", "permutations", "flags") or not isinstance(v, (int, float)) else float(v)
        cal = cls(**kwargs)
        if cal.interval_reading in ("half_sampling", "jackknife_corrected") and all(map(math.isfinite, (cal.value, cal.low, cal.high))) \
                and not cal.low - 1e-9 <= cal.value <= cal.high + 1e-9:  # value +- z se holds its value
            raise ValueError(f"calibration value {cal.value:.4g} lies outside its own interval "
                             f"[{cal.low:.4g}, {cal.high:.4g}]")
        return cal


def permutation_floor(measure: str, x: Tensor, y: Tensor, permutations: int,
                      generator: torch.Generator) -> Tuple[float, float]:
    """Mean and std over ``permutations`` random row permutations pi of S_r(x, y[pi]).

    x (n, d1), y (n, d2): the sampled estimate of what ``stir.measure.null.closed_form_floor`` gives
    exactly where a closed form exists. (NaN, NaN) for no permutation.
    """
    if permutations == 0:
        return math.nan, math.nan
    t = permutation_null(measure, x, [y], permutations, generator)
    return float(t.mean()), float(t.std(unbiased=False))


def _value(measure: str, x: Tensor, y: Tensor) -> float:
    """S_r(x, y) as a float; NaN where the measure is undefined on this data (ValueError)."""
    try:
        return float(similarity.get(measure)(x, y))
    except ValueError:
        return math.nan


def _mean(values: Sequence[float]) -> float:
    return float(torch.tensor(list(values), dtype=torch.float64).mean()) if len(values) else math.nan


def _std(null: Tensor) -> float:
    finite = null[torch.isfinite(null)]
    return float(finite.std(unbiased=False)) if finite.numel() > 1 else math.nan


@dataclass
class _Floor:
    """One reading's floor of S_r(x, y_j) over draws j: its mean, its null's spread, how it was had."""

    mean: float
    std: float
    method: str
    null: Tensor  # (P,) the permutation null (empty without permutations)


def floor_of(measure: str, x: Tensor, ys: Sequence[Tensor], permutations: int, generator: torch.Generator) -> _Floor:
    """The floor of 1/k sum_j S_r(x, y_j): exact where ``closed_form_floor`` has it (the mean over j),
    else the mean of the permutation null; the null's standard deviation either way."""
    null = permutation_null(measure, x, ys, permutations, generator)
    exact = [closed_form_floor(measure, x, y) for y in ys]
    if ys and all(e is not None for e in exact):
        return _Floor(_mean(exact), _std(null), "closed form", null)
    if permutations == 0:
        return _Floor(math.nan, math.nan, "none", null)
    finite = null[torch.isfinite(null)]
    return _Floor(float(finite.mean()) if finite.numel() else math.nan, _std(null), f"{permutations} permutations", null)


def resample_rows(n: int, resamples: int, generator: torch.Generator, without_replacement: bool = False) -> Tensor:
    """(resamples, m) int64 row indices: m = n drawn with replacement, or m = n // 2 distinct rows."""
    if without_replacement:
        return torch.stack([torch.randperm(n, generator=generator)[: n // 2] for _ in range(resamples)])
    return torch.randint(0, n, (resamples, n), generator=generator)


class _Resampler:
    """S_r(x[I], y[I]) of one fixed x against several y, for many row resamples I at once, and the
    closed-form floor of the resampled rows.

    Linear CKA goes through its Gram form with the resample as a weight vector: with w the counts of
    each row in I (sum w = m, its size) and M = diag(w) - w w^T / m (so that P^T H P = M for the
    selection P and the centring H of m rows),

        HSIC(K, L)_I = tr(K M L M) = w^T (K o L) w - 2 (K u)^T diag(w) (L u) + (u^T K u)(u^T L u),
        tr(K_I)      = tr(K M)     = w^T diag(K) - u^T K u,

    u = w / sqrt(m), K = Xc Xc^T, L = Yc Yc^T: three (B, n) x (n, n) products for B resamples, exactly
    linear CKA of the resampled rows and its floor tr K_I tr L_I / ((m-1) ||K_I|| ||L_I||), and no
    gathered matrix. Other measures are called on the resampled rows one by one; their floor is 0
    for the debiased CKA and has no per-resample form otherwise (None).
    """

    def __init__(self, measure: str, x: Tensor, rows: Tensor):
        self.measure, self.x, self.rows = measure, x, rows
        self.gram = measure == "linear_cka" and x.shape[0] <= GRAM_LIMIT
        if self.gram:
            n = x.shape[0]
            ones = torch.ones(rows.shape, dtype=torch.float64)
            self.m = rows.shape[1]
            self.w = torch.zeros(rows.shape[0], n, dtype=torch.float64).scatter_add_(1, rows, ones).to(x.device)  # (B, n)
            self.u = self.w / math.sqrt(self.m)
            self.k = centred_gram(x)
            self.kk = self._hsic(self.k, self.k)
            self.trk = self._trace(self.k)

    def _hsic(self, k: Tensor, l: Tensor) -> Tensor:
        """(B,) HSIC numerators tr(K M_b L M_b) for every resample b."""
        w, u = self.w, self.u
        ku, lu = u @ k, u @ l  # (B, n)
        return ((w @ (k * l)) * w).sum(1) - 2 * (ku * w * lu).sum(1) + (ku * u).sum(1) * (lu * u).sum(1)

    def _trace(self, k: Tensor) -> Tensor:
        """(B,) tr(K M_b): the trace of the centred Gram matrix of resample b's rows."""
        return (self.w * torch.diagonal(k)).sum(1) - ((self.u @ k) * self.u).sum(1)

    def values(self, y: Tensor) -> Tensor:
        """(B,) S_r(x[I_b], y[I_b]) for every resample b; NaN where the measure is undefined."""
        return self.values_and_floors(y)[0]

    def values_and_floors(self, y: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
        """(B,) S_r(x[I_b], y[I_b]) and (B,) the closed-form floor of the same rows (None where the
        measure has no per-resample closed form)."""
        if not self.gram:
            out = [_value(self.measure, self.x[idx], y[idx]) for idx in self.rows.to(self.x.device)]
            values = torch.tensor(out, dtype=torch.float64)
            return values, (torch.zeros_like(values) if self.measure in ZERO_FLOOR else None)
        l = centred_gram(y)
        num, ll = self._hsic(self.k, l), self._hsic(l, l)
        den = (self.kk.clamp_min(0) * ll.clamp_min(0)).sqrt()
        nan = torch.full_like(num, math.nan)
        values = torch.where(den > 0, num / den, nan)
        floors = torch.where(den > 0, self.trk * self._trace(l) / ((self.m - 1) * den), nan)
        return values.cpu(), floors.cpu()


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


def normalise(value: float, floor: float, ceiling: float, ceiling_floor: Optional[float] = None,
              margin: float = 0.0, distance: bool = False) -> float:
    """(value - floor) / (ceiling - ceiling_floor), ``ceiling_floor`` defaulting to ``floor``.

    NaN when undefined: a reference missing, or the ceiling not beyond its floor by more than
    ``margin`` (in the measure's "more similar" direction: down for a distance). A margin of a few
    permutation standard deviations keeps the ratio from blowing up when the ceiling sits at chance.
    """
    ceiling_floor = floor if ceiling_floor is None else ceiling_floor
    if not all(math.isfinite(v) for v in (value, floor, ceiling, ceiling_floor)):
        return math.nan
    gap = (ceiling_floor - ceiling) if distance else (ceiling - ceiling_floor)
    if not gap > max(margin, 0.0) or gap == 0:
        return math.nan
    return (value - floor) / (ceiling - ceiling_floor)


def chance_correct(value: float, floor: float, ceiling: float, ceiling_floor: float, identity: Optional[float],
                   margin: float = 0.0, distance: bool = False) -> float:
    """kappa(value, floor) / kappa(ceiling, ceiling_floor), kappa(v, f) = (v - f) / (identity - f).

    ``identity`` is the measure's value on identical inputs (1 for CKA, 0 for a distance): each
    value is read as the fraction of its own room above chance it takes, so S = C = identity gives
    1 whatever the two floors. NaN when undefined: no identity value, a floor at the identity, or
    the ceiling not beyond its floor by more than ``margin`` (as ``normalise``).
    """
    if identity is None or not math.isfinite(normalise(value, floor, ceiling, ceiling_floor, margin, distance)):
        return math.nan
    if identity == floor or identity == ceiling_floor:
        return math.nan
    return ((value - floor) / (identity - floor)) / ((ceiling - ceiling_floor) / (identity - ceiling_floor))


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
    value = _mean(draw_values)
    distance = similarity.is_distance(measure)
    gen = torch.Generator().manual_seed(cfg.seed)
    iris = floor_of(measure, target, target_primes, cfg.permutations, gen)
    images = floor_of(measure, target, [target], cfg.permutations, gen)
    chosen = iris if cfg.floor == "iris" else images
    p = p_value(value, iris.null, distance)

    same = _mean([_value(measure, reference, y) for y in reference_primes])
    independent = _value(measure, reference, reference_independent) if reference_independent is not None else math.nan
    ceiling = {"independent": independent, "same_draws": same, "none": math.nan}[cfg.ceiling]
    ceiling_primes: List[Tensor] = []  # the X' the ceiling is measured on, by m1
    if cfg.ceiling == "same_draws":
        ceiling_primes = list(reference_primes)
    elif cfg.ceiling == "independent" and reference_independent is not None:
        ceiling_primes = [reference_independent]
    ceiling_floor = (floor_of(measure, reference, ceiling_primes if cfg.floor == "iris" else [reference],
                              cfg.permutations, gen) if ceiling_primes else _Floor(math.nan, math.nan, "none", torch.empty(0)))
    margin = cfg.guard * ceiling_floor.std if math.isfinite(ceiling_floor.std) else 0.0
    normalised = normalise(value, chosen.mean, ceiling, ceiling_floor.mean, margin, distance)
    identity = similarity.info(measure).identity
    corrected = chance_correct(value, chosen.mean, ceiling, ceiling_floor.mean, identity, margin, distance)

    low = high = n_low = n_high = c_low = c_high = math.nan
    resamples = 0
    method = "no interval (calibration.resamples=0)"
    if cfg.interval == "jackknife_corrected" and cfg.resamples > 0 and math.isfinite(value):  # > 0: an interval asked for
        low, high, n_low, n_high, c_low, c_high, resamples, method = _jackknife(
            measure, target, target_primes, draw_values, reference, ceiling_primes, chosen.mean, ceiling_floor.mean,
            identity, cfg, normalised, corrected, gen)
    elif cfg.resamples > 0 and math.isfinite(value):  # half_sampling (the retired bootstrap: settings.RETIRED)
        rows = resample_rows(n, cfg.resamples, gen, without_replacement=True)
        draws = torch.randint(0, k, (cfg.resamples, k), generator=gen) if k > 1 else torch.zeros(cfg.resamples, 1, dtype=torch.long)

        def interval(v: float, b: Tensor) -> Tuple[float, float, int]:
            return standard_error_interval(v, b, cfg.confidence)

        one = torch.zeros(cfg.resamples, 1, dtype=torch.long)  # the draw index of a single representation
        target_b = _Resampler(measure, target, rows)
        stir_b, floor_b = _over_draws(target_b, target_primes, draws)  # each resample's value and iris floor
        if cfg.floor == "images":
            floor_b = _over_draws(target_b, [target], one)[1]
        low, high, resamples = interval(value, stir_b)
        held = floor_b is None
        if math.isfinite(normalised) and ceiling_primes:
            ref_b = _Resampler(measure, reference, rows)
            ceil_b, ceil_floor_b = _over_draws(ref_b, ceiling_primes, draws if len(ceiling_primes) == k else one)
            if cfg.floor == "images":
                ceil_floor_b = _over_draws(ref_b, [reference], one)[1]
            held = held or ceil_floor_b is None
            f_b = floor_b if floor_b is not None else torch.full_like(stir_b, chosen.mean)
            cf_b = ceil_floor_b if ceil_floor_b is not None else torch.full_like(stir_b, ceiling_floor.mean)
            n_low, n_high, _ = interval(normalised, (stir_b - f_b) / (ceil_b - cf_b))
            if math.isfinite(corrected):  # (B,) kappa(S_b, F_b) / kappa(C_b, F_C,b) on each resample's rows
                c_low, c_high, _ = interval(corrected, ((stir_b - f_b) / (identity - f_b)) / ((ceil_b - cf_b) / (identity - cf_b)))
        images_text = f"{n // 2} of the {n} images without replacement"
        kind = "value +- z se, se from half-samples"
        covers = f"{cfg.resamples} resamples of {images_text} and of the {k} draws" if k > 1 else (
            f"{cfg.resamples} resamples of {images_text} (k=1: the seed variance is not in it)")
        method = f"{kind}: {covers}; over images and inversion draws, not training seeds" + (
            "; the normalised interval holds the floor fixed (no per-resample closed form)" if held and math.isfinite(n_low) else "")
    cal = Calibration(
        value=value, floor=chosen.mean, floor_std=chosen.std, floor_images=images.mean, floor_iris=iris.mean,
        ceiling=ceiling, ceiling_independent=independent, ceiling_same_draws=same,
        normalised=normalised, low=low, high=high, normalised_low=n_low,
        normalised_high=n_high, confidence=cfg.confidence, resamples=resamples, method=method,
        floor_reading=cfg.floor, ceiling_reading=cfg.ceiling, interval_reading=cfg.interval,
        floor_method=chosen.method, ceiling_floor=ceiling_floor.mean, ceiling_floor_std=ceiling_floor.std,
        p_value=p, permutations=int(torch.isfinite(iris.null).sum()),
        chance_corrected=corrected, chance_corrected_low=c_low, chance_corrected_high=c_high,
    )
    cal.flags = _flags(cal)
    return cal


def _z(confidence: float) -> float:
    return float(torch.distributions.Normal(0.0, 1.0).icdf(torch.tensor(0.5 + confidence / 2)))


def _jackknife(measure: str, target: Tensor, target_primes: Sequence[Tensor], draw_values: Sequence[float],
               reference: Tensor, ceiling_primes: Sequence[Tensor], floor: float, ceiling_floor: float,
               identity: Optional[float], cfg: CalibrationConfig, normalised: float, corrected: float,
               generator: torch.Generator):
    """The ``jackknife_corrected`` interval reading (``stir.measure.jackknife``) of the value, the
    normalised and the chance-corrected value, each +- z se: the draw-mean statistic recomputed on all
    images, without each image and without each of up to ``jackknife.PAIRS`` pairs of images (the k
    draws nested in the images), with the floors (closed form for linear CKA, else held fixed) and the
    ceiling on the same rows."""
    n, k = target.shape[0], len(target_primes)
    z = _z(cfg.confidence)
    two, first, second, total = leave_two_out(n, generator)
    rows = [torch.arange(n)[None], leave_one_out(n), two]  # all images (1, n); without one (n, n-1); two (M, n-2)

    def statistics(resampler_rows: Tensor) -> Tuple[Tensor, Optional[Tensor], Optional[Tensor], Optional[Tensor]]:
        draws = torch.arange(k).expand(resampler_rows.shape[0], k)
        t = _Resampler(measure, target, resampler_rows)
        s_b, f_b = _over_draws(t, target_primes, draws)
        if cfg.floor == "images":
            f_b = _over_draws(t, [target], torch.zeros_like(draws[:, :1]))[1]
        if not ceiling_primes:
            return s_b, f_b, None, None
        r = _Resampler(measure, reference, resampler_rows)
        c_draws = draws if len(ceiling_primes) == k else torch.zeros_like(draws[:, :1])
        c_b, cf_b = _over_draws(r, ceiling_primes, c_draws)
        if cfg.floor == "images":
            cf_b = _over_draws(r, [reference], torch.zeros_like(draws[:, :1]))[1]
        return s_b, f_b, c_b, cf_b

    stats = [statistics(r) for r in rows]  # [(B,) per part] for all, delete-one, delete-two

    def se(parts) -> float:  # parts: the (B,) statistic on all, delete-one and delete-two rows
        return corrected_jackknife_se(float(parts[0][0]), parts[1], parts[2], first, second, total)

    value = _mean(draw_values)
    se_v = se([s[0] for s in stats])
    low, high = value - z * se_v, value + z * se_v
    n_low = n_high = c_low = c_high = math.nan
    if math.isfinite(normalised) and ceiling_primes:
        def ratio(s_b, f_b, c_b, cf_b, kappa: bool) -> Tensor:
            f_b = f_b if f_b is not None else torch.full_like(s_b, floor)
            cf_b = cf_b if cf_b is not None else torch.full_like(s_b, ceiling_floor)
            if kappa:
                return ((s_b - f_b) / (identity - f_b)) / ((c_b - cf_b) / (identity - cf_b))
            return (s_b - f_b) / (c_b - cf_b)

        se_n = se([ratio(*s, False) for s in stats])
        n_low, n_high = normalised - z * se_n, normalised + z * se_n
        if math.isfinite(corrected):
            se_c = se([ratio(*s, True) for s in stats])
            c_low, c_high = corrected - z * se_c, corrected + z * se_c
    pairs = f"all {total}" if total == two.shape[0] else f"{two.shape[0]} of the {total}"
    method = (f"value +- z se, se from the delete-one jackknife over the {n} images (the {k} draws nested in them) "
              f"less half its Efron-Stein bias from {pairs} delete-two pairs; over images and inversion draws, not training seeds")
    return low, high, n_low, n_high, c_low, c_high, n, method


def _over_draws(resampler: _Resampler, ys: Sequence[Tensor], draws: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
    """(B,) the mean over each resample's draws J_b of S_r on its rows, and of their floors (None
    where the floor has no per-resample form)."""
    pairs = [resampler.values_and_floors(y) for y in ys]
    values = torch.stack([v for v, _ in pairs], dim=1).gather(1, draws).mean(dim=1)
    if any(f is None for _, f in pairs):
        return values, None
    return values, torch.stack([f for _, f in pairs], dim=1).gather(1, draws).mean(dim=1)


def _flags(cal: Calibration) -> List[str]:
    """What a reader must not miss about one calibrated value (``Calibration.flags``)."""
    flags = []
    alpha = 1 - cal.confidence
    decisive = math.isfinite(cal.p_value) and 1 / (1 + cal.permutations) <= alpha  # P large enough to reject at alpha
    if decisive and cal.p_value > alpha:
        flags.append("at_floor")
    elif not decisive and all(math.isfinite(v) for v in (cal.value, cal.floor, cal.low)) and cal.low <= cal.floor:
        flags.append("at_floor")
    if math.isfinite(cal.ceiling) and math.isfinite(cal.ceiling_floor) and not math.isfinite(cal.normalised) and math.isfinite(cal.value):
        flags.append("ceiling_at_floor")
    if math.isfinite(cal.normalised) and cal.normalised > 1:
        flags.append("above_ceiling")
    return flags


def calibration_notes(label: str, cal: Calibration) -> List[str]:
    """What a reader must know about one calibrated value (said in the result's notes)."""
    notes = []
    if "at_floor" in cal.flags:
        test = (f"permutation p = {cal.p_value:.3g} over {cal.permutations} permutations"
                if math.isfinite(cal.p_value) and 1 / (1 + cal.permutations) <= 1 - cal.confidence
                else f"interval [{cal.low:.3f}, {cal.high:.3f}]")
        notes.append(f"{label}: {cal.value:.3f} is not above its floor {cal.floor:.3f} ({test}): "
                     "no shared invariance is detected at this n")
    if "ceiling_at_floor" in cal.flags:
        notes.append(f"{label}: ceiling {cal.ceiling:.3f} is not clear of its own floor {cal.ceiling_floor:.3f} "
                     f"(by more than calibration.guard permutation sds of {cal.ceiling_floor_std:.3g}): the normalised "
                     "value is undefined (the X' are far from IRIs of m1)")
    if "above_ceiling" in cal.flags:
        notes.append(f"{label}: normalised value {cal.normalised:.2f} is above 1: m2 represents the X' more alike "
                     f"than m1 does ({cal.value:.3f} against the ceiling {cal.ceiling:.3f}); not clipped")
    return notes
