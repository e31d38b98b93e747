"""STIR at IRIs: STIR(tgt|ref) read where the X' really are IRIs of a stated precision (issue 53).

The published STIR (``stir.measure.direction``) is read on whatever X' the published procedure ends
at: on the laptop ResNet18s a median r1 of about 0.15, eight times the 0.02 tolerance, so none of
its X' are IRIs. This reading inverts the reference with the IRI solver (``stir.inversion.iri``)
from the same seeds (``inversion.seed + j`` for draw j; an image still above the level after its try is
tried again from ``retry_generator(seed + j, a)``'s draw, ``IRIConfig.retries``), keeps per draw only the
images whose X' reached r1 <= ``level`` (the solver's target) and reads

    STIR_j = S_r(tgt(X_R), tgt(X'_R)),   R = {i : r1(x'_i) <= level}            (eq. 6 on R)

It says, per draw, how many images reached the level and which did not; an image that never
reached it is left out of that draw's value, never mixed in. The value is the mean over the k draws;
``spread`` the standard deviation over draws (the inversion's seed variance alone) and ``se`` the
corrected jackknife over images with the draws nested (image i, or a pair of images, left out of every
draw's R_j at once; ``stir.measure.jackknife``: the ``jackknife_corrected`` reading whose coverage
docs/benchmarks/calibration.md checks; results stored before it hold the plain delete-one jackknife,
1.4 times too wide at the null, and say so in ``se_reading``), so ``interval`` = value -+ z se. Stored
under its own kind (``AT_IRIS``), so no published result changes. The X' of one reference (its images, seeds and solver) are solved once per process and
shared by every target read on them (``_SOLVED``): the IRIs depend on m1 only.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from stir import similarity
from stir.inversion.iri import IRIConfig, IRISolution, solve_iri
from stir.measure.jackknife import corrected_jackknife_se, leave_one_out, leave_two_out
from stir.inversion.seeds import make_seed, retry_generator, seed_generator
from stir.models import frozen
from stir.models.identity import content_identity, tensor_digest
from stir.models.taps import representation
from stir.store import ResultStore

AT_IRIS = "direction_at_iris"  # the store's kind of this reading (the published kinds are untouched)
MIN_REACHED = 4  # fewer images than this at the level: no value for the draw (CKA of 3 rows is meaningless)
Z95 = 1.959964  # the interval's z (95%)
_SOLVED: Dict[Tuple[Any, ...], IRISolution] = {}  # (ref identity, tap, images, seed, solver) -> its X'
_KEEP = 32  # solutions kept per process (a Table 1 run has 6 references of 2 draws)


@dataclass
class AtIRIsResult:
    """STIR(tgt|ref) at IRIs of precision ``level`` over k draws (module docstring)."""

    ref: str
    target: str
    measure: str
    n: int
    level: float  # r1 each counted X' reached
    values: List[float]  # per draw, on the images that reached the level (NaN below MIN_REACHED)
    reached: List[int]  # per draw, images that reached the level
    unreached: List[List[int]]  # per draw, the indices of the images that did not
    median_residual: List[float]  # per draw, over all n X'
    evaluations: List[int]  # per draw, model evaluations the solver spent
    solver: Dict[str, Any]  # the IRIConfig
    notes: List[str] = field(default_factory=list)
    se: float = float("nan")  # the jackknife over images, draws nested (module docstring; its kind in se_reading)
    se_reading: str = "jackknife"  # jackknife_corrected since issue 53's coverage check; results stored before: jackknife

    @property
    def interval(self) -> Tuple[float, float]:
        """value -+ 1.96 se (NaN without a jackknife)."""
        return self.value - Z95 * self.se, self.value + Z95 * self.se

    @property
    def value(self) -> float:
        good = [v for v in self.values if math.isfinite(v)]
        return sum(good) / len(good) if good else float("nan")

    @property
    def spread(self) -> float:
        """Standard deviation over the draws (NaN with fewer than two)."""
        good = torch.tensor([v for v in self.values if math.isfinite(v)], dtype=torch.float64)
        return float(good.std()) if good.numel() > 1 else float("nan")

    @property
    def fraction_reached(self) -> float:
        return sum(self.reached) / (self.n * len(self.reached))

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "AtIRIsResult":
        return cls(**d)

    def line(self) -> str:
        """One report line: the value, its interval, its level, how many X' reached it."""
        low, high = self.interval
        return (f"STIR({self.target}|{self.ref}) at IRIs r1 <= {self.level:g}: {self.value:.3f} [{low:.3f}, {high:.3f}] "
                f"({self.se_reading.replace('_', ' ')} over images; sd over {len(self.values)} draws {self.spread:.3f}; {self.fraction_reached:.0%} "
                f"of {self.n} X' per draw reached the level, the others left out)")


def nested_jackknife_se(measure: str, rep_x: Tensor, rep_primes: Sequence[Tensor], reached: Sequence[Tensor],
                        generator: Optional[torch.Generator] = None) -> float:
    """The ``jackknife_corrected`` standard error (``stir.measure.jackknife``: the reading whose coverage
    docs/benchmarks/calibration.md checks) of the mean over draws of S_r on each draw's reached rows:
    rep_x (n, d), rep_primes k x (n, d), reached k x (n,) bool. The statistic is recomputed without each
    image and without each of up to ``jackknife.PAIRS`` pairs of images, each left out of every draw."""
    fn = similarity.get(measure)
    n = rep_x.shape[0]
    two, first, second, total = leave_two_out(n, generator or torch.Generator().manual_seed(0))

    def statistic(rows: Tensor) -> float:  # (m,) row indices -> mean over draws with enough reached rows
        values = []
        for rep_p, ok in zip(rep_primes, reached):
            kept = rows[ok[rows]]
            if len(kept) >= MIN_REACHED:
                values.append(float(fn(rep_x[kept], rep_p[kept])))
        return sum(values) / len(values) if values else float("nan")

    full = statistic(torch.arange(n))
    one = torch.tensor([statistic(r) for r in leave_one_out(n)], dtype=torch.float64)
    pairs = torch.tensor([statistic(r) for r in two], dtype=torch.float64)
    return corrected_jackknife_se(full, one, pairs, first, second, total)


def solved(ref: nn.Module, tap: str, images: Tensor, seed: int, cfg: IRIConfig) -> IRISolution:
    """The IRI solver's X' of ``images`` for ``ref`` from the N(0, 1) seeds of ``seed``, solved once per
    process (``_SOLVED``)."""
    key = (content_identity(ref), tap, tensor_digest(images), seed, tuple(sorted(dataclasses.asdict(cfg).items())))
    if key not in _SOLVED:
        if len(_SOLVED) >= _KEEP:
            _SOLVED.pop(next(iter(_SOLVED)))
        _SOLVED[key] = solve_iri(ref, tap, images, make_seed("normal", images, seed_generator(seed)), cfg,
                                 redraw=lambda a: make_seed("normal", images, retry_generator(seed, a)))
    return _SOLVED[key]


def at_iris_parts(ids: Tuple[str, str], taps: Tuple[str, str], images: Tensor, measure: str, k: int, seed: int,
                  cfg: IRIConfig) -> Dict[str, Any]:
    """The store key's parts: both models and taps, the images, the measure, the draws and the solver."""
    return dict(ref=[ids[0], taps[0]], target=[ids[1], taps[1]], images=tensor_digest(images), n=images.shape[0],
                measure=measure, k=k, seed=seed, seed_kind="normal", solver=cfg.key())


def stir_at_iris(ref: nn.Module, target: nn.Module, images: Tensor, tap_ref: str = "penultimate",
                 tap_target: Optional[str] = None, cfg: IRIConfig = IRIConfig(), *, measure: str = "linear_cka",
                 k: int = 5, seed: int = 0, names: Tuple[str, str] = ("ref", "target"),
                 store: Optional[ResultStore] = None) -> AtIRIsResult:
    """STIR(target|ref) at IRIs of precision ``cfg.target`` over ``k`` draws (module docstring); with
    ``store``, looked up first and stored under ``AT_IRIS`` the moment it is computed."""
    tap_target = tap_target or tap_ref

    def compute() -> AtIRIsResult:
        fn = similarity.get(measure)
        with frozen(ref, target), torch.no_grad():
            rep_x = representation(target, images, tap_target).flatten(1).double()  # (n, d_tgt)
        values, reached, unreached, medians, evaluations = [], [], [], [], []
        notes: List[str] = []
        primes, oks = [], []
        for j in range(k):
            sol = solved(ref, tap_ref, images, seed + j, cfg)
            ok = sol.residual <= cfg.target  # (n,)
            with frozen(target), torch.no_grad():
                rep_p = representation(target, sol.x_prime, tap_target).flatten(1).double()
            primes.append(rep_p)
            oks.append(ok)
            rows = ok.nonzero().flatten()
            values.append(float(fn(rep_x[rows], rep_p[rows])) if len(rows) >= MIN_REACHED else float("nan"))
            reached.append(int(ok.sum()))
            unreached.append((~ok).nonzero().flatten().tolist())
            medians.append(float(sol.residual.median()))
            evaluations.append(int(sol.evaluations))
        short = [j for j, r in enumerate(reached) if r < images.shape[0]]
        if short:
            notes.append(f"{sum(images.shape[0] - reached[j] for j in short)} of {images.shape[0] * k} X' did not reach "
                         f"r1 <= {cfg.target:g} within {cfg.steps} steps: left out of their draw's value")
        return AtIRIsResult(names[0], names[1], measure, images.shape[0], cfg.target, values, reached, unreached,
                            medians, evaluations, dataclasses.asdict(cfg), notes,
                            nested_jackknife_se(measure, rep_x, primes, oks), "jackknife_corrected")

    if store is None:
        return compute()
    ids = (content_identity(ref), content_identity(target))
    result = store.cached(AT_IRIS, at_iris_parts(ids, (tap_ref, tap_target), images, measure, k, seed, cfg), compute,
                          AtIRIsResult.from_dict)
    return dataclasses.replace(result, ref=names[0], target=names[1])
