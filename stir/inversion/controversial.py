"""Controversial stimuli started at the image: how much perturbation makes two models disagree.

Nanda et al., ICML 2022, appendix C (eq. 8), after Golan et al. (2020): for an image x, a
controversial stimulus x_c is represented like x by m1 and unlike x by m2. Its difficulty is the
perturbation it needs, ||x_c - x||_2. Starting the search at a noise seed (as for IRIs) would make
that the seed's distance from x (about 23 for CIFAR images, whatever the models); so here

    x_0       = clamp(x + start_noise * u),  u uniform on the unit sphere (seeded)
    x_{t+1}   = clamp(x_t - step_size * g / ||g||_2),  g = grad of the adversarial objective
                (``InversionObjective``: constrained | paper | original)
    reached_i = exists t: r1(x_t) <= tolerance and r2(x_t) >= m2_threshold
    delta_i   = min over such t of ||x_t - x_i||_2                    (inf when never reached)

with r1, r2 the relative distances of m1 and m2 at their taps. A pair that shares m1's invariances
(m2 a function of m1's representation) cannot get there: r2 stays within a factor of r1. Both models
are frozen in eval mode; FakeReLU follows ``InversionConfig.fake_relu``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional, Sequence

import torch
from torch import Tensor, nn

from stir.descent import FixedLengthStep, descend
from stir.inversion.config import ControversialConfig, InversionConfig, resolve_budgets
from stir.inversion.objectives import Forward, InversionObjective, make_term
from stir.inversion.seeds import seed_generator
from stir.models import frozen
from stir.models.fake_relu import fake_relu
from stir.progress import Progress


@dataclass(eq=False)
class ControversialResult:
    """Per image: the smallest perturbation that made x controversial, and whether any did.

    Attributes:
        distance: (n,) min ||x_c - x||_2 over controversial iterates; inf where none was.
        reached: (n,) bool, distance is finite.
        fraction: mean of ``reached``.
        delta: mean of ``distance`` over the reached images (NaN when none was reached).
        max_r2: (n,) the largest r2 seen among iterates with r1 <= tolerance (how far m2 could be pushed).
        walked: (n,) the largest ||x_t - x||_2 of the walk: how far from x an image that never
            became controversial was looked at.
        first_step: (n,) the first step t at which x_t was controversial (inf where none was); t *
            step_size is how far the walk went to get there.
        steps, step_size: the walk's budget (an image never reached walked steps * step_size).
    """

    distance: Tensor
    reached: Tensor
    fraction: float
    delta: float
    max_r2: Tensor
    walked: Tensor
    first_step: Tensor
    steps: int
    step_size: float

    def censored(self) -> Dict[str, Dict[str, float]]:
        """Both readings of difficulty as a censored measurement (``censored_difficulty``):
        "walk": how far the walk went, t * step_size, each image not reached censored at the budget
        steps * step_size (what orders pairs: every image is looked at for the whole walk);
        "perturbation": ||x_c - x||_2 (eq. 8's quantity), censored at the largest displacement the
        walk reached, which stays small where no feasible step raises r2 (a pair that shares m1's
        invariances keeps x_c near the IRI boundary), so this reading cannot order such pairs."""
        return pooled_censored([self], resamples=0)


def controversial_perturbation(
    m1: nn.Module,
    m2: nn.Module,
    images: Tensor,
    tap1: str,
    tap2: Optional[str] = None,
    cfg: Optional[ControversialConfig] = None,
    inversion: Optional[InversionConfig] = None,
    progress: bool = False,
) -> ControversialResult:
    """The smallest perturbation of each image (n, c, h, w) in [0, 1] that m1 ignores and m2 does not.

    ``inversion`` supplies the IRI tolerance, the adversarial objective (and its weight and bound),
    FakeReLU and the seed of the start perturbation; ``cfg`` the walk (module docstring).
    ``progress``: report the walk (``stir.progress``: steps done, the fraction of images already
    controversial, the ETA).
    """
    # unset budgets filled in by the one rule (a no-op for evaluate.py's settings, resolved once already)
    inversion, cfg = resolve_budgets(inversion or InversionConfig(), cfg or ControversialConfig())
    tap2 = tap2 or tap1
    images = images.detach()
    n = images.shape[0]
    gen = seed_generator(inversion.seed)
    u = torch.randn(images.shape, generator=gen, dtype=images.dtype).to(images.device)
    u = u / u.flatten(1).norm(dim=1).view(-1, *([1] * (images.dim() - 1)))
    start = (images + cfg.start_noise * u).clamp(0, 1)

    distance = torch.full((n,), float("inf"), device=images.device)
    max_r2 = torch.zeros(n, device=images.device)
    walked = torch.zeros(n, device=images.device)
    first_step = torch.full((n,), float("inf"), device=images.device)
    calls = [0]  # the loop evaluates every image at every step: call t is x_t
    with frozen(m1, m2):
        forward = Forward()  # full precision: the distances decide which iterate counts
        objective = InversionObjective(
            make_term(m1, tap1, images, forward), forward, inversion.normalize_residual,
            make_term(m2, tap2, images, forward), inversion.adversarial_weight,
            bound=inversion.stop_fraction * inversion.tolerance, kind=inversion.adversarial_objective,
        )

        def tracked(x: Tensor, index: Tensor) -> Tensor:  # records every iterate's (r1, r2, distance)
            loss, r1, r2 = objective.parts(x, index)
            with torch.no_grad():
                iri = r1.detach() <= inversion.tolerance
                ok = iri & (r2.detach() >= cfg.m2_threshold)
                moved = (x.detach() - images[index]).flatten(1).norm(dim=1)
                walked[index] = torch.maximum(walked[index], moved)
                first_step[index[ok]] = torch.minimum(first_step[index[ok]], torch.full_like(moved[ok], calls[0]))
                calls[0] += 1
                rows = index[ok]
                distance[rows] = torch.minimum(distance[rows], moved[ok])
                rows = index[iri]
                max_r2[rows] = torch.maximum(max_r2[rows], r2.detach()[iri])
            return loss

        desc = f"difficulty walk of {n} images x {cfg.steps} steps of {cfg.step_size:g}"
        with fake_relu(m1, m2, enabled=inversion.fake_relu_spec), \
                Progress(n * cfg.steps, desc, "image-step", enabled=progress, leave=False) as bar:
            def tick(t: int, loss: Tensor) -> None:
                bar.update(n, controversial=lambda: f"{float(torch.isfinite(distance).float().mean()):.0%}")

            descend(tracked, images, FixedLengthStep(cfg.step_size), cfg.steps, keep_best=False, x_init=start,
                    on_step=tick)
    reached = torch.isfinite(distance)
    delta = distance[reached].mean().item() if reached.any() else float("nan")
    return ControversialResult(distance, reached, reached.float().mean().item(), delta, max_r2, walked,
                               first_step, cfg.steps, cfg.step_size)


DIFFICULTY_RESAMPLES = 1000  # bootstrap resamples of the images behind each difficulty interval


def pooled_censored(walks: Sequence[ControversialResult], resamples: int = DIFFICULTY_RESAMPLES,
                    seed: int = 0, confidence: float = 0.95) -> Dict[str, Dict[str, float]]:
    """``ControversialResult.censored`` over the images of several walks (the k draws) pooled, each
    reading with a bootstrap interval over the images (``censored_difficulty``).

    The "perturbation" reading is withheld (its values NaN, ``withheld`` = 1) unless every image
    became controversial: an image that never did is censored at the small displacement its walk
    reached, which depends on the pair (informative censoring), so a pair where half the images
    never get there would read like one where all do. The "walk" reading censors every image at the
    same budget and is the headline.
    """
    walk = censored_difficulty(torch.cat([w.first_step * w.step_size for w in walks]),
                               torch.cat([torch.full_like(w.walked, w.steps * w.step_size) for w in walks]),
                               resamples, seed, confidence)
    perturbation = censored_difficulty(torch.cat([w.distance for w in walks]), torch.cat([w.walked for w in walks]),
                                       resamples, seed, confidence)
    if not perturbation["fraction"] == 1.0:
        perturbation = {**{k: math.nan for k in perturbation}, "fraction": perturbation["fraction"], "withheld": 1.0}
    else:
        perturbation["withheld"] = 0.0
    return {"walk": walk, "perturbation": perturbation}


def censored_difficulty(distance: Tensor, walked: Tensor, resamples: int = 0, seed: int = 0,
                        confidence: float = 0.95) -> Dict[str, float]:
    """Difficulty as a censored measurement: Kaplan-Meier over the distances at which images become
    controversial.

    Each image is an event at ``distance`` (where it became controversial) or, when it never did
    (``distance`` inf), censored at ``walked`` (how far it was looked at). S(d) = P(an image is not yet
    controversial at d) is the Kaplan-Meier product over event distances d_j: S(d) = prod_{d_j <= d}
    (1 - events_j / at_risk_j); at a tie, events come before censorings (the usual convention: an
    image reached at the last step of the budget counts as reached). Returns, over the (n,) images
    given (several draws pooled):

        fraction         the fraction that became controversial within the walk
        median           the smallest d with S(d) <= 1/2; when S never gets there, the largest
                         distance looked at, and ``median_censored`` = 1 (the median lies beyond it)
        median_censored  1.0 when the median is only a lower bound, else 0.0
        restricted_mean  the area under S up to the largest distance looked at: a lower bound of the
                         mean perturbation needed (an image not reached counts its censoring
                         distance), defined even when no image became controversial
        max_distance     that largest distance
        median_low, median_high, restricted_mean_low, restricted_mean_high
                         percentile intervals at ``confidence`` over ``resamples`` bootstrap
                         resamples of the images (NaN with resamples = 0): they hold the image
                         sample's variance (and the draws', pooled), not the training seeds'

    A pair that shares more of m1's invariances has a higher S: a larger median and restricted
    mean, so pairs order by them even when most images never get there (the mean over reached
    images, eq. 8 read literally, is undefined then).
    """
    d = distance.detach().double().cpu()
    reached = torch.isfinite(d)
    times = torch.where(reached, d, walked.detach().double().cpu())
    n = times.numel()
    nan = {"median_low": math.nan, "median_high": math.nan, "restricted_mean_low": math.nan,
           "restricted_mean_high": math.nan}
    if n == 0:
        return {"fraction": math.nan, "median": math.nan, "median_censored": 1.0, "restricted_mean": math.nan,
                "max_distance": math.nan, **nan}
    # Events before censorings at equal times: sort by "censored" first, then stably by time.
    by_censoring = torch.argsort((~reached).double(), stable=True)
    order = by_censoring[torch.argsort(times[by_censoring], stable=True)]
    t, e = times[order], reached[order].double()
    median, censored, area = _kaplan_meier(t, e, torch.ones(1, n, dtype=torch.float64))
    out = {"fraction": float(e.mean()), "median": float(median[0]), "median_censored": float(censored[0]),
           "restricted_mean": float(area[0]), "max_distance": float(t[-1]), **nan}
    if resamples > 0:
        g = torch.Generator().manual_seed(seed)
        rows = torch.randint(0, n, (resamples, n), generator=g)
        w = torch.zeros(resamples, n, dtype=torch.float64).scatter_add_(1, rows, torch.ones(resamples, n, dtype=torch.float64))
        m_b, _, a_b = _kaplan_meier(t, e, w[:, order])
        alpha = (1 - confidence) / 2
        q = torch.tensor([alpha, 1 - alpha], dtype=torch.float64)
        out["median_low"], out["median_high"] = (float(v) for v in torch.quantile(m_b, q))
        out["restricted_mean_low"], out["restricted_mean_high"] = (float(v) for v in torch.quantile(a_b, q))
    return out


def _kaplan_meier(t: Tensor, e: Tensor, w: Tensor):
    """Kaplan-Meier of sorted times t (n,) with event indicators e (n,), for B weightings w (B, n) of
    the images at once (bootstrap counts; ones for the sample itself).

    Returns (B,) medians (the largest time where S never falls to 1/2), (B,) 1.0 where that median
    is censored, (B,) restricted means (area under S up to t[-1])."""
    at_risk = w.flip(1).cumsum(1).flip(1)  # (B, n) weight of the images with time >= t_i
    factor = torch.where(at_risk > 0, 1 - w * e / at_risk.clamp_min(1e-300), torch.ones_like(w))
    s = factor.cumprod(1)  # (B, n) S just after t_i
    below = s <= 0.5
    first = torch.where(below.any(1), below.double().argmax(1), torch.full((w.shape[0],), t.numel() - 1))
    median = t[first]
    censored = (~below.any(1)).double()
    previous = torch.cat([torch.ones(w.shape[0], 1, dtype=s.dtype), s[:, :-1]], dim=1)
    dt = torch.diff(t, prepend=t.new_zeros(1))
    return median, censored, (previous * dt).sum(1)
