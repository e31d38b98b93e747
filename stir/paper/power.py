"""The power of each verdict rule at this report's budget, by simulation: small, seeded, fast (each
function well under a second), so the report prints them beside the verdicts and tests pin them.

A rule's power is the rate at which it says "holds" when the truth is the paper's effect (or the
effect we measured), with the noise we measured; a rule whose outcome hardly depends on the truth
(claim 8's plateau) is said to be so. All functions take a ``seed`` and return rates in [0, 1].

    pooled_power      random effects over m seed pairs (DerSimonian-Laird tau, Hartung-Knapp interval,
                      as ``stir.measure.seeds.seed_estimate``), its low end above a threshold;
                      ``shared=True`` draws the pairs of 3 models that share models ((a, b), (a, c),
                      (b, c)): each pair's value is mu + u_a + u_b + e (so the pairs correlate)
    sign_power        a one-sided sign test over n independent units at alpha
    interval_power    one reading with standard error ``se``: its interval's low end above a threshold
    plateau_rates     claim 8's plateau rule on simulated chains (true plateau / true straight line)
    graded_power      claim 7's graded rule on simulated families (``stir.paper.rules.GRADED``)
"""
from __future__ import annotations

import math
from typing import Dict

import numpy as np
from scipy import stats

from stir.paper import verdicts as v


def _hk(y: np.ndarray, s2: np.ndarray, confidence: float = 0.95):
    """Vectorised ``seed_estimate`` over rows of y (sims, m) with variances s2 (sims, m): (mu, low, high)."""
    m = y.shape[1]
    w = 1 / np.maximum(s2, 1e-300)
    fixed = (w * y).sum(1) / w.sum(1)
    q = (w * (y - fixed[:, None]) ** 2).sum(1)
    c = w.sum(1) - (w * w).sum(1) / w.sum(1)
    tau2 = np.where(c > 0, np.maximum(0.0, (q - (m - 1)) / np.where(c > 0, c, 1)), 0.0)
    ws = 1 / (s2 + tau2[:, None])
    mu = (ws * y).sum(1) / ws.sum(1)
    hk = (ws * (y - mu[:, None]) ** 2).sum(1) / ((m - 1) * ws.sum(1))
    se = np.sqrt(np.maximum(hk, 1 / ws.sum(1)))
    t = stats.t.ppf(0.5 + confidence / 2, m - 1)
    return mu, mu - t * se, mu + t * se


def pooled_power(effect: float, tau: float, se: float, m: int, threshold: float, sims: int = 4000, seed: int = 0,
                 shared: bool = False) -> float:
    """P(the random-effects interval over m seed pairs lies above ``threshold``) when each pair's true
    value is ``effect`` + a between-seed term of sd ``tau`` and its reading adds noise of sd ``se``."""
    rng = np.random.default_rng(seed)
    if shared:  # 3 models, pairs (a, b), (a, c), (b, c): a model's term enters two pairs
        if m != 3:
            raise ValueError("shared=True simulates the 3 pairs of 3 models")
        u = rng.normal(0, tau / math.sqrt(2), (sims, 3))
        between = np.stack([u[:, 0] + u[:, 1], u[:, 0] + u[:, 2], u[:, 1] + u[:, 2]], 1)
    else:
        between = rng.normal(0, tau, (sims, m))
    y = effect + between + rng.normal(0, se, (sims, m))
    _, low, _ = _hk(y, np.full((sims, m), se ** 2))
    return float((low > threshold).mean())


def pooled_coverage(tau: float, se: float, sims: int = 4000, seed: int = 0, shared: bool = True) -> float:
    """The coverage of the random-effects interval over the 3 pairs of 3 models (``shared``) or 3
    independent pairs, at between-seed sd ``tau`` (``pooled_power``'s model, true value 0)."""
    rng = np.random.default_rng(seed)
    if shared:
        u = rng.normal(0, tau / math.sqrt(2), (sims, 3))
        between = np.stack([u[:, 0] + u[:, 1], u[:, 0] + u[:, 2], u[:, 1] + u[:, 2]], 1)
    else:
        between = rng.normal(0, tau, (sims, 3))
    y = between + rng.normal(0, se, (sims, 3))
    _, low, high = _hk(y, np.full((sims, 3), se ** 2))
    return float(((low <= 0) & (high >= 0)).mean())


def sign_power(effect: float, sd: float, n: int, alpha: float = 0.05, sims: int = 4000, seed: int = 0) -> float:
    """P(one-sided sign test over n independent units rejects 'no direction' at alpha) when each unit
    is N(effect, sd)."""
    rng = np.random.default_rng(seed)
    positive = (rng.normal(effect, sd, (sims, n)) > 0).sum(1)
    p = stats.binom.sf(positive - 1, n, 0.5)  # P(X >= positive) under p = 1/2
    return float((p < alpha).mean())


def sign_p(positive: int, n: int) -> float:
    """One-sided sign-test p-value of ``positive`` of n units on the claim's side."""
    return float(stats.binom.sf(positive - 1, n, 0.5)) if n else math.nan


def interval_power(effect: float, se: float, threshold: float, confidence: float = 0.95, sims: int = 4000,
                   seed: int = 0) -> float:
    """P(a normal interval of one reading lies above ``threshold``) when the truth is ``effect``."""
    rng = np.random.default_rng(seed)
    z = stats.norm.ppf(0.5 + confidence / 2)
    return float((rng.normal(effect, se, sims) - z * se > threshold).mean())


def plateau_rates(noise: float, links: int = 8, rise: float = 0.1, sims: int = 400, seed: int = 0) -> Dict[str, float]:
    """Claim 8's rule (``stir.paper.verdicts.rises_and_plateaus``) on simulated chains of ``links``
    links with noise sd ``noise``, adjacent links sharing a model (each link's noise is the mean of
    its two models' terms, so neighbours correlate 0.5): the rates of "holds" and "contradicted" when
    the truth is a plateau (the whole ``rise`` in the first third) and when it is a straight line."""
    rng = np.random.default_rng(seed)
    sizes = [10000 + 5000 * i for i in range(links)]
    u = np.arange(links) / (links - 1)
    shapes = {"plateau": rise * np.minimum(1.0, u * 3), "line": rise * u}
    out = {}
    for name, curve in shapes.items():
        holds = contradicted = 0
        for _ in range(sims):
            models = rng.normal(0, noise * math.sqrt(2), links + 1)
            ys = curve + (models[:-1] + models[1:]) / 2
            points = [(n, v.Interval(float(y), float(y) - 0.01, float(y) + 0.01)) for n, y in zip(sizes, ys)]
            verdict = v.rises_and_plateaus(v.CurveEvidence({"f": points}))
            holds += verdict.holds
            contradicted += verdict.reason.startswith("contradicted")
        out[f"holds if {name}"] = holds / sims
        out[f"contradicted if {name}"] = contradicted / sims
    return out


def theil_sen_coverage(noise: float, links: int = 8, sims: int = 400, seed: int = 0) -> float:
    """The coverage of the Theil-Sen rise interval (``verdicts.trend``) of a straight line of links
    that share models (neighbours correlated 0.5, ``plateau_rates``' model)."""
    rng = np.random.default_rng(seed)
    sizes = [10000 + 5000 * i for i in range(links)]
    u = np.arange(links) / (links - 1)
    covered = 0
    for _ in range(sims):
        models = rng.normal(0, noise * math.sqrt(2), links + 1)
        ys = 0.1 * u + (models[:-1] + models[1:]) / 2
        t = v.trend([(n, v.Interval(float(y), float(y), float(y))) for n, y in zip(sizes, ys)])
        covered += t.low <= 0.1 <= t.high
    return covered / sims


def graded_power(differences: Dict[str, float], tau: float, se: float, positions: int = 3, sims: int = 4000,
                 seed: int = 0) -> Dict[str, float]:
    """Claim 7's graded rule (``stir.paper.rules.GRADED``): per ordered pair, the difference pooled
    over ``positions`` disjoint seed positions by random effects; "holds" where every pair's interval
    lies above 0, "direction reproduced" where every position's point value of every pair is above 0.
    Returns those two rates when the true differences are ``differences`` (pair -> value)."""
    rng = np.random.default_rng(seed)
    every_above = np.ones(sims, bool)
    every_positive = np.ones(sims, bool)
    for effect in differences.values():
        y = effect + rng.normal(0, tau, (sims, positions)) + rng.normal(0, se, (sims, positions))
        _, low, _ = _hk(y, np.full((sims, positions), se ** 2))
        every_above &= low > 0
        every_positive &= (y > 0).all(1)
    return {"holds": float(every_above.mean()), "direction reproduced": float(every_positive.mean())}


def band_power(effect: float, se: float, low: float, high: float, confidence: float = 0.95, sims: int = 4000,
               seed: int = 0) -> float:
    """P(a normal interval of one reading lies inside [low, high]) when the truth is ``effect``
    (``high`` = inf: above ``low``; ``low`` = -inf: below ``high``)."""
    rng = np.random.default_rng(seed)
    z = stats.norm.ppf(0.5 + confidence / 2)
    x = rng.normal(effect, se, sims)
    return float(((x - z * se >= low) & (x + z * se <= high)).mean())


def all_power(readings, low: float, high: float, seed: int = 0) -> float:
    """P(every one of several independent readings' intervals lies inside [low, high]), each at its
    own (value, se): the product of ``band_power`` (the power of a rule that needs them all)."""
    p = 1.0
    for i, (value, se) in enumerate(readings):
        p *= band_power(value, se, low, high, seed=seed + i)
    return p
