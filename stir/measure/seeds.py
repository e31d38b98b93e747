"""Intervals that hold training-seed variance, and equivalence claims that say their margin.

An interval of one STIR value holds the variance of its images and inversion draws
(``stir.measure.calibration``): it says nothing about another training seed of the same recipe.
A claim about a recipe or a model family ("AT seeds share more than vanilla seeds", "the recipe
moves STIR") is a claim about the distribution of seed pairs, so it needs several seed pairs per
arm and an interval that holds both levels:

    random effects   y_i = mu + u_i + e_i,  u_i ~ N(0, tau^2) between seed pairs,
                     e_i ~ N(0, s_i^2) within (s_i: the image-level standard error of pair i).
                     tau^2 by DerSimonian-Laird (method of moments, truncated at 0), mu the
                     inverse-variance weighted mean with w_i = 1 / (s_i^2 + tau^2), and its interval
                     by Hartung-Knapp-Sidik-Jonkman (a t quantile on m - 1 degrees of freedom and a
                     weighted residual variance, never below 1 / sum w_i), which keeps its coverage at the m = 2-5 seed
                     pairs a laptop zoo has; plain DL intervals are too narrow there.
    one seed pair    the between-seed spread is not measured: no interval of the recipe (NaN) and a
                     reason; the image-level interval still describes that one pair.

A difference of two arms (recipes, families) is mu_a - mu_b with se = sqrt(se_a^2 + se_b^2) on
Welch-Satterthwaite degrees of freedom. "Not significantly different" is not "equal": equivalence is
claimed only by two one-sided tests (TOST) at a stated margin, ``equivalence``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, Sequence

from scipy import stats as scipy_stats


@dataclass(frozen=True)
class SeedEstimate:
    """A recipe's (or family's) STIR over its seed pairs, with an interval over seed pairs and images."""

    mean: float  # mu: the random-effects estimate
    se: float  # its standard error (Hartung-Knapp)
    low: float
    high: float
    tau: float  # the between-seed-pair standard deviation (DerSimonian-Laird; NaN for one pair)
    pairs: int  # m: seed pairs
    df: float  # m - 1
    confidence: float
    method: str  # what the interval holds, in words

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def z_value(confidence: float = 0.95) -> float:
    """z = Phi^-1(0.5 + confidence / 2), the half-width of a normal interval in standard errors."""
    return float(scipy_stats.norm.ppf(0.5 + confidence / 2))


def standard_error(low: float, high: float, confidence: float = 0.95) -> float:
    """The standard error behind a symmetric normal interval [low, high] at ``confidence``."""
    return (high - low) / (2 * z_value(confidence))


def seed_estimate(values: Sequence[float], ses: Sequence[float], confidence: float = 0.95) -> SeedEstimate:
    """The random-effects estimate of ``values`` (one per seed pair) with image-level standard
    errors ``ses`` (module docstring). NaN interval and tau for a single pair."""
    y, s2 = [float(v) for v in values], [float(s) ** 2 for s in ses]
    m = len(y)
    if m == 0 or len(s2) != m or not all(math.isfinite(v) for v in y + s2):
        raise ValueError(f"seed_estimate needs one finite value and standard error per seed pair, got {values!r}, {ses!r}")
    if m == 1:
        return SeedEstimate(y[0], math.sqrt(s2[0]), math.nan, math.nan, math.nan, 1, 0.0, confidence,
                            "one seed pair: the between-seed spread is not measured (no interval of the recipe)")
    w = [1 / max(v, 1e-300) for v in s2]
    fixed = sum(wi * yi for wi, yi in zip(w, y)) / sum(w)
    q = sum(wi * (yi - fixed) ** 2 for wi, yi in zip(w, y))
    c = sum(w) - sum(wi * wi for wi in w) / sum(w)
    tau2 = max(0.0, (q - (m - 1)) / c) if c > 0 else 0.0
    w_star = [1 / (v + tau2) for v in s2]
    mu = sum(wi * yi for wi, yi in zip(w_star, y)) / sum(w_star)
    # Hartung-Knapp: the weighted residual variance on m - 1 degrees of freedom, never below the
    # DerSimonian-Laird variance 1 / sum w* (the "modified" HKSJ: with 2-3 pairs that agree by chance
    # the plain one can be narrower than the image-level interval of a single pair).
    hk = sum(wi * (yi - mu) ** 2 for wi, yi in zip(w_star, y)) / ((m - 1) * sum(w_star))
    se = math.sqrt(max(hk, 1 / sum(w_star)))
    t = scipy_stats.t.ppf(0.5 + confidence / 2, m - 1)
    return SeedEstimate(mu, se, mu - t * se, mu + t * se, math.sqrt(tau2), m, float(m - 1), confidence,
                        f"random effects over {m} seed pairs (DerSimonian-Laird tau, Hartung-Knapp interval on "
                        f"{m - 1} df): holds the between-seed-pair and the image-level variance")


@dataclass(frozen=True)
class Difference:
    """mu_a - mu_b of two arms, its interval, and the equivalence test at ``margin``."""

    difference: float
    se: float
    low: float
    high: float
    df: float
    p_difference: float  # two-sided t-test of difference = 0
    margin: float
    p_equivalence: float  # TOST: both one-sided tests of |difference| >= margin; below alpha: equivalent
    confidence: float

    @property
    def equivalent(self) -> bool:
        return math.isfinite(self.p_equivalence) and self.p_equivalence < 1 - self.confidence

    @property
    def different(self) -> bool:
        return math.isfinite(self.p_difference) and self.p_difference < 1 - self.confidence

    def to_dict(self) -> Dict[str, Any]:
        return {**asdict(self), "equivalent": self.equivalent, "different": self.different}


def difference(a: SeedEstimate, b: SeedEstimate, margin: float, confidence: float = 0.95) -> Difference:
    """a - b with Welch-Satterthwaite degrees of freedom, a two-sided test and TOST at ``margin``.
    NaN (no test) where either arm has a single seed pair: its between-seed spread is unknown."""
    return welch(a.mean, a.se, a.df, b.mean, b.se, b.df, margin, confidence)


def welch(mean_a: float, se_a: float, df_a: float, mean_b: float, se_b: float, df_b: float, margin: float,
          confidence: float = 0.95) -> Difference:
    """The difference of two means with standard errors se_a, se_b on df_a, df_b degrees of freedom
    (for plain samples: se = sd / sqrt(n), df = n - 1): Welch's t interval, its two-sided p-value,
    and TOST's p-value max(P(T >= (d + margin) / se), P(T <= (d - margin) / se)) (complements)."""
    d = mean_a - mean_b
    if df_a <= 0 or df_b <= 0:
        return Difference(d, math.nan, math.nan, math.nan, math.nan, math.nan, margin, math.nan, confidence)
    va, vb = se_a ** 2, se_b ** 2
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / ((va ** 2 / df_a if va else 0) + (vb ** 2 / df_b if vb else 0)) if se > 0 else math.inf
    t = scipy_stats.t.ppf(0.5 + confidence / 2, df)
    p_diff = 2 * scipy_stats.t.sf(abs(d) / se, df) if se > 0 else (0.0 if d else 1.0)
    lower = scipy_stats.t.sf((d + margin) / se, df)  # H0: d <= -margin
    upper = scipy_stats.t.cdf((d - margin) / se, df)  # H0: d >= +margin
    return Difference(d, se, d - t * se, d + t * se, df, p_diff, margin, max(lower, upper), confidence)
