"""Make identically represented inputs (IRIs): ``invert`` and ``invert_adversarial``.

For images X (n, c, h, w) in [0, 1] and a reference model m1 read at a tap, an arbitrary IRI x' of
x starts from a seed image and descends

    r1(x') = || m1(x') - m1(x) ||_2 / || m1(x) ||_2             (Nanda et al., ICML 2022)

and an adversarial IRI (a controversial stimulus, Golan et al. 2020) maximises m2's relative
distance r2(x') = || m2(x') - m2(x) ||_2 / || m2(x) ||_2 subject to r1(x') <= stop_fraction *
tolerance, through the switching objective of ``stir.inversion.objectives`` (r1 until x' is an IRI,
then -w * r2), the best feasible iterate kept

with every iterate projected onto [0, 1]. Both models are in eval mode with frozen parameters
throughout (``stir.models.frozen``); every module's mode and every ``requires_grad`` flag is
restored exactly afterwards. The optimisation runs through ``stir.descent.descend``:

* faithful mode (default), the published procedure: ``FixedLengthStep(step_size=0.5)`` (x <- clamp(x
  - 0.5 * g / ||g||_2, 0, 1)), 1000 steps, the best iterate per image, no early stopping, starting
  from the raw seed, which the model reads through the published clamp (``published_clamp``: the
  first step sees the N(0, 1) seed projected onto [0, 1], and out-of-range seed pixels get no
  gradient, as the original's normaliser does), with FakeReLU on the last stage of ResNets
  (``stir.models.fake_relu``; ``fake_relu`` in the config). Two defects of the published code are
  not reproduced: its models are left in train mode after the first inversion (batch-norm
  statistics change), and on current torch its clamp would freeze pixels that reach exactly 0 or 1
  (``published_clamp`` passes the gradient there, as the torch of the published runs did).
* fast mode (opt-in, a different estimator): per-image ``Adam`` (lr 0.2, betas (0.9, 0.99)) with the inverse-time
  schedule lr / (1 + (t - 1) / 20), the best iterate per image, per-image early stopping once
  r1 <= stop_fraction * tolerance, from the seed projected onto [0, 1]; on CUDA the models run
  under bf16 autocast with channels-last inputs. Why this method: docs/benchmarks/inversion.md.

* iri mode (opt-in, a different estimator): the IRI solver of ``stir.inversion.iri`` (x = sigmoid(z),
  per-image ``PlateauAdam``, the raising surrogate on the last ReLU, each image stopped at ``target``).

Every mode differentiates working copies of the models (batch norm folded into the convolutions,
channels-last memory, optionally compiled: ``stir.inversion.batching``), equal to the models up to
float rounding, and the k seed draws of ``invert_draws`` run as one batch, chunked automatically.
Every result (``stir.inversion.result.InversionResult``) is re-measured in full precision at the
returned x' on the models themselves: ``residual`` (r1), ``m2_distance`` (the r2 of m2, when m2 is
given), ``l2_to_original`` (||x' - x||_2). ``snapshots`` keeps the best
iterate so far at each of ``cfg.snapshot_steps`` (with its residual), so that a caller can see how
a value computed from x' moves with the budget (``stir.measure`` records STIR along it). A "model evaluation" is one
image's forward (+ backward) pass through the model(s) up to the tap during the optimisation; the
target and measurement passes (a few per image) are not counted.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from stir.allocator import keep_freed_cpu_memory
from stir.descent import (
    Adam, Constant, Cosine, FixedLengthStep, HalvingLengthStep, InverseTime, Schedule, descend,
)
from stir.descent.loop import StopRule
from stir.inversion.batching import resolve_batch_size, working_model
from stir.inversion.cache import cache_key, entry_path, load_entry, save_entry
from stir.inversion.config import ExecutionConfig, InversionConfig, iri_shortfall
from stir.inversion.iri import IRIConfig, descend_iri
from stir.inversion.objectives import (
    Forward, InversionObjective, make_term, published_clamp, relative_distance, relative_distances, resolve_forward,
)
from stir.inversion.result import InversionResult, concat_results, make_result, slice_result
from stir.inversion.seeds import make_seed, seed_generator
from stir.models import frozen
from stir.models.fake_relu import fake_relu
from stir.models.probe import check_gradient_path
from stir.models.taps import representation
from stir.progress import Progress

log = logging.getLogger(__name__)

# What the continuation fakes: nothing (FakeReLU's gradient is not r1's; docs/estimator.md#the-continuation).
CONTINUATION_FAKE_RELU = "off"


@dataclass(frozen=True)
class Problem:
    """What to invert: m1 at ``tap1``; m2 at ``tap2`` pushed away (``adversarial``) or only measured."""

    m1: nn.Module
    tap1: str
    m2: Optional[nn.Module] = None
    tap2: Optional[str] = None
    adversarial: bool = False

    def __post_init__(self) -> None:
        if self.adversarial and self.m2 is None:
            raise ValueError("adversarial IRIs need a second model m2")

    @property
    def models(self) -> Tuple[nn.Module, ...]:
        return (self.m1,) if self.m2 is None else (self.m1, self.m2)

    @property
    def second_tap(self) -> str:
        return self.tap2 if self.tap2 is not None else self.tap1


def invert(
    m1: nn.Module,
    images: Tensor,
    tap: str,
    cfg: Optional[InversionConfig] = None,
    *,
    m2: Optional[nn.Module] = None,
    tap2: Optional[str] = None,
    run: Optional[ExecutionConfig] = None,
) -> InversionResult:
    """Arbitrary IRIs of ``images`` (n, c, h, w) in [0, 1] for ``m1`` at ``tap``.

    With ``m2`` (read at ``tap2``, default ``tap``) the result also holds ``m2_distance``; m2 does
    not influence x', so a cached inversion is reused across every m2. Models must live on the
    images' device; they are not moved. ``run`` says how it runs (batch size, cache folder, ...).
    """
    return _run(Problem(m1, tap, m2, tap2, adversarial=False), [images], cfg or InversionConfig(), run)[0]


def invert_draws(
    m1: nn.Module,
    draws: Sequence[Tensor],
    tap: str,
    cfg: Optional[InversionConfig] = None,
    *,
    m2: Optional[nn.Module] = None,
    tap2: Optional[str] = None,
    run: Optional[ExecutionConfig] = None,
) -> List[InversionResult]:
    """``invert`` for k seed draws at once: draw j inverts ``draws[j]`` (n_j, c, h, w) from seed
    ``cfg.seed + j``; result j is ``invert(m1, draws[j], tap, replace(cfg, seed=cfg.seed + j), ...)``.

    The draws missing from the cache are optimised together (one batch when it fits,
    ``stir.inversion.batching``) and cached one entry per draw. ``elapsed`` of a draw is its share
    of the joint run (in proportion to its images).
    """
    return _run(Problem(m1, tap, m2, tap2, adversarial=False), draws, cfg or InversionConfig(), run)


def invert_adversarial(
    m1: nn.Module,
    m2: nn.Module,
    images: Tensor,
    tap1: str,
    tap2: Optional[str] = None,
    cfg: Optional[InversionConfig] = None,
    run: Optional[ExecutionConfig] = None,
) -> InversionResult:
    """Adversarial IRIs (controversial stimuli): m1 at ``tap1`` matched, m2 at ``tap2`` pushed away.

    Per image: the x' with the largest r2 among the iterates with r1 <= stop_fraction * tolerance
    (the IRIs), or the smallest r1 when no iterate got there; no early stopping (r2 keeps growing
    after r1 meets the bound). Cached on both models when ``cache_dir``.
    """
    return _run(Problem(m1, tap1, m2, tap2, adversarial=True), [images], cfg or InversionConfig(), run)[0]


def invert_adversarial_draws(
    m1: nn.Module,
    m2: nn.Module,
    draws: Sequence[Tensor],
    tap1: str,
    tap2: Optional[str] = None,
    cfg: Optional[InversionConfig] = None,
    run: Optional[ExecutionConfig] = None,
) -> List[InversionResult]:
    """``invert_adversarial`` for k seed draws at once (seeds ``cfg.seed + j``), as ``invert_draws``."""
    return _run(Problem(m1, tap1, m2, tap2, adversarial=True), draws, cfg or InversionConfig(), run)


def cached(m1: nn.Module, images: Tensor, tap: str, cfg: InversionConfig, run: ExecutionConfig, *,
           m2: Optional[nn.Module] = None, tap2: Optional[str] = None, adversarial: bool = False,
           draw: int = 0) -> Optional[InversionResult]:
    """The cached inversion of draw ``draw`` (seed ``cfg.seed + draw``) of ``images``, or None when
    ``run.cache_dir`` holds none: the x' an earlier measurement made, never computed here (what a
    report shows as example IRIs)."""
    problem = Problem(m1, tap, m2, tap2, adversarial=adversarial)
    draw_cfg = replace(cfg, seed=cfg.seed + draw).resolved()
    forward = resolve_forward(cfg.model_precision, run.channels_last, images.device)
    key, path = _cache_entry(problem, images.detach(), draw_cfg, run, forward)
    if path is None:
        return None
    entry = load_entry(path, key, images.shape[0], tuple(images.shape[1:]), cfg.total_steps, cfg.snapshot_steps)
    return None if entry is None else _from_entry(problem, images.detach(), entry, draw_cfg)


def _run(problem: Problem, draws: Sequence[Tensor], cfg: InversionConfig,
         run: Optional[ExecutionConfig]) -> List[InversionResult]:
    """Each draw from the cache, or all missing draws optimised together in chunks: by ``solve``
    from their seeds, or with a continuation by ``continue_inversion`` from the published
    procedure's x' (itself from the cache when there). Unset steps and the forward resolved once here."""
    run = run or ExecutionConfig()
    cfg = cfg.resolved()
    forward = resolve_forward(cfg.model_precision, run.channels_last, draws[0].device) if draws else None
    base = _run(problem, draws, replace(cfg, continue_steps=0), run) if cfg.continue_steps else None
    results: List[Optional[InversionResult]] = [None] * len(draws)
    entries: List[Tuple[Optional[str], Optional[Path]]] = []
    for j, images in enumerate(draws):
        if images.dim() != 4 or images.shape[0] == 0:
            raise ValueError(f"images must be a non-empty (n, c, h, w) batch, got shape {tuple(images.shape)}")
        key, path = _cache_entry(problem, images.detach(), replace(cfg, seed=cfg.seed + j), run, forward)
        entries.append((key, path))
        if path is not None:
            entry = load_entry(path, key, images.shape[0], tuple(images.shape[1:]), cfg.total_steps, cfg.snapshot_steps)
            if entry is not None:
                log.info("inversion cache hit: %s", path)
                results[j] = _from_entry(problem, images.detach(), entry, cfg)
    missing = [j for j, r in enumerate(results) if r is None]
    if missing:
        images = torch.cat([draws[j].detach() for j in missing])  # (sum n_j, c, h, w)
        if images.device.type == "cpu" and run.keep_cpu_memory:
            keep_freed_cpu_memory()  # no page faults for every step's activations (stir.allocator)
        cfg.check_budget(images.shape[0])  # its record must fit, before anything is allocated for it
        with frozen(*problem.models):  # no descent on a model that passes no gradient: one line, before any step
            for model, tap in _descended(problem):
                check_gradient_path(model, images[:1], tap, type(getattr(model, "inner", model)).__name__,
                                    representation)
        with frozen(*problem.models):  # copies of eval-mode, frozen models, made once for every chunk
            working = Working.of(problem, cfg, run, forward)
        batch = resolve_batch_size(run, images, _probe(problem, working, images, cfg, forward))
        chunks = range(0, images.shape[0], batch)
        steps = cfg.steps if base is None else cfg.continue_steps
        what = "adversarial" if problem.adversarial else "arbitrary"
        desc = (f"{'inverting' if base is None else 'continuing'} {images.shape[0]} images ({what} IRIs, "
                f"{len(missing)} draw{'s' if len(missing) > 1 else ''}) x {steps} steps")
        with Progress(images.shape[0] * steps, desc, "image-step", enabled=run.progress, leave=False) as bar:
            if base is None:
                # each draw's seeds for its whole batch: independent of chunking and of the other draws
                seeds = torch.cat([make_seed(cfg.seed_kind, draws[j].detach(), seed_generator(cfg.seed + j))
                                   for j in missing])
                parts = [solve(problem, images[s:s + batch], seeds[s:s + batch], cfg, working, run, progress=bar,
                               forward=forward) for s in chunks]
            else:
                published = concat_results([base[j] for j in missing], cfg.tolerance)
                parts = [continue_inversion(problem, images[s:s + batch], slice_result(published, s, s + batch), cfg,
                                            working, run, progress=bar, forward=forward) for s in chunks]
        joint = concat_results(parts, cfg.tolerance)
        start = 0
        for j in missing:
            n_j = draws[j].shape[0]
            results[j] = slice_result(joint, start, start + n_j)
            start += n_j
            key, path = entries[j]
            if path is not None:
                save_entry(path, key, _to_entry(results[j], problem))
    _warn_if_low(results, run, problem, cfg)
    return results


def _descended(problem: Problem) -> List[Tuple[nn.Module, str]]:
    """(model, tap) pairs whose gradient the descent follows: m1, and m2 for adversarial IRIs."""
    return [(problem.m1, problem.tap1)] + ([(problem.m2, problem.second_tap)] if problem.adversarial else [])


def _cache_entry(problem: Problem, images: Tensor, cfg: InversionConfig, run: ExecutionConfig,
                 forward: Forward) -> Tuple[Optional[str], Optional[Path]]:
    """(key, path) of one draw's cache entry, or (None, None) without ``run.cache_dir``."""
    if run.cache_dir is None:
        return None, None
    models = [(problem.m1, problem.tap1)] + ([(problem.m2, problem.second_tap)] if problem.adversarial else [])
    key = cache_key(models, images, cfg.key_settings(problem.adversarial, forward.precision))
    return key, entry_path(run.cache_dir, key)


def _probe(problem: Problem, working: Working, images: Tensor, cfg: InversionConfig,
           forward: Forward) -> Callable[[Tensor], Tensor]:
    """objective(x) on the first rows of ``images``: what the automatic batch size measures (CUDA)."""

    def probe(x: Tensor) -> Tensor:
        with frozen(*problem.models):
            objective = _objective(problem, working, images[:x.shape[0]], cfg, forward)
            return objective(x, torch.arange(x.shape[0], device=x.device))

    return probe


@dataclass(frozen=True)
class Working:
    """The models the optimisation differentiates (``stir.inversion.batching.working_model``)."""

    m1: nn.Module
    m2: Optional[nn.Module] = None  # adversarial IRIs only

    @classmethod
    def of(cls, problem: Problem, cfg: InversionConfig, run: ExecutionConfig, forward: Forward) -> "Working":
        channels_last = forward.channels_last
        m1 = working_model(problem.m1, problem.tap1, cfg.fold_batch_norm, run.compile, channels_last)
        m2 = (working_model(problem.m2, problem.second_tap, cfg.fold_batch_norm, run.compile, channels_last)
              if problem.adversarial else None)
        return cls(m1, m2)

    @property
    def models(self) -> Tuple[nn.Module, ...]:
        return (self.m1,) if self.m2 is None else (self.m1, self.m2)


def _objective(problem: Problem, working: Working, images: Tensor, cfg: InversionConfig,
               forward: Forward) -> InversionObjective:
    first = make_term(working.m1, problem.tap1, images, forward)
    second = make_term(working.m2, problem.second_tap, images, forward) if problem.adversarial else None
    return InversionObjective(first, forward, cfg.normalize_residual, second, cfg.adversarial_weight,
                              bound=cfg.stop_fraction * cfg.tolerance, kind=cfg.adversarial_objective)


def solve(problem: Problem, images: Tensor, seeds: Tensor, cfg: InversionConfig,
          working: Optional[Working] = None, run: Optional[ExecutionConfig] = None,
          progress: Optional[Progress] = None, forward: Optional[Forward] = None) -> InversionResult:
    """Invert one batch ``images`` (b, c, h, w) from ``seeds`` (b, c, h, w): no cache, no chunking.

    The building block of ``invert`` and of the multi-device ``InversionPredictor``; ``run`` gives the
    layout (channels-last) and compile settings of the working copies. The optimisation differentiates
    working copies of the models (``working``, made here when not given: batch norm folded,
    channels-last, compiled; ``stir.inversion.batching``); residuals and distances are measured on the
    models themselves. ``progress``: the bar this batch advances (``stir.progress``; ``images.shape[0]``
    image-steps per step, the median residual). ``forward``: precision and layout (here when not given)."""
    run, cfg = run or ExecutionConfig(), cfg.resolved()  # resolved: a no-op from _run
    forward = forward or resolve_forward(cfg.model_precision, run.channels_last, images.device)
    with frozen(*problem.models):
        working = working or Working.of(problem, cfg, run, forward)
        objective = _objective(problem, working, images, cfg, forward)
        faithful = cfg.mode == "faithful"

        times: List[float] = []
        start = time.perf_counter()

        def timed(objective: Callable[[Tensor, Tensor], Tensor]) -> Callable[[Tensor, Tensor], Tensor]:
            def evaluate(x: Tensor, index: Tensor) -> Tensor:  # records when each iterate was evaluated
                loss = objective(published_clamp(x) if faithful else x, index)
                times.append(time.perf_counter() - start)
                return loss
            return evaluate

        tick = _ticker(progress, images.shape[0], cfg.steps, problem, cfg)
        with fake_relu(*working.models, enabled=cfg.fake_relu_spec):
            if cfg.mode == "iri":  # stir.inversion.iri's descent; arbitrary IRIs: its smoothing phase first
                stop = None if problem.adversarial else _stop_at(objective, cfg.target)
                solver = cfg.iri_config()
                smooth = 0 if problem.adversarial else solver.smooth_steps
                # after a smoothing phase of `smooth` steps the descent has the rest; snapshot t is its t - smooth
                shifted = {t: max(0, t - smooth) for t in cfg.snapshot_steps}
                out = descend_iri(timed(objective), working.m1, seeds, images[:1], solver,
                                  retarget=lambda: timed(_objective(problem, working, images, cfg, forward)),
                                  smoothing=not problem.adversarial, stop=stop,
                                  snapshots=sorted(set(shifted.values())), on_step=tick)
                run, to_image, taken, evaluations = out.run, out.to_image, out.steps, out.evaluations
            else:
                if faithful:
                    geometry, x_init, stop = FixedLengthStep(cfg.step_size), seeds, None  # raw seed, as published
                else:
                    geometry = Adam(cfg.lr, _schedule(cfg), cfg.betas)
                    x_init = None
                    stop = _early_stop(objective, cfg) if (cfg.early_stop and not problem.adversarial) else None
                smooth, shifted = 0, {t: t for t in cfg.snapshot_steps}
                run = descend(timed(objective), seeds, geometry, cfg.steps, keep_best=True, stop=stop, x_init=x_init,
                              snapshots=sorted(set(cfg.snapshot_steps)), on_step=tick)
                # the clamp is a no-op unless the raw seed was the best iterate
                to_image, taken, evaluations = (lambda x: x.clamp(0, 1)), run.steps, run.evaluations
            tick.finish()

        snapshots = {t: to_image(run.snapshots[shifted[t]]) for t in cfg.snapshot_steps}
        # the smoothing phase's steps and evaluations counted; its values are not r1: NaN rows of the history
        history = torch.cat([run.history.new_full((smooth, run.history.shape[1]), float("nan")), run.history])
        x_prime = snapshots[cfg.steps]
        # r1 of every snapshot (x_prime is the last), the targets m1(x) computed once
        snapshot_residual = dict(zip(snapshots, relative_distances(problem.m1, problem.tap1, list(snapshots.values()), images)))
        residual = snapshot_residual[cfg.steps]
        m2_distance = (
            relative_distance(problem.m2, problem.second_tap, x_prime, images) if problem.m2 is not None else None
        )
    elapsed = torch.tensor(times, dtype=torch.float64)
    elapsed = torch.cat([elapsed, elapsed[-1:].expand(cfg.steps + 1 - len(times))])  # flat once all stopped
    return make_result(x_prime, residual, m2_distance, images, taken, evaluations, history, elapsed,
                   cfg.tolerance, snapshots, snapshot_residual)


def continue_inversion(problem: Problem, images: Tensor, published: InversionResult, cfg: InversionConfig,
                       working: Optional[Working] = None, run: Optional[ExecutionConfig] = None,
                       progress: Optional[Progress] = None, forward: Optional[Forward] = None) -> InversionResult:
    """The continuation of one batch's published inversion ``published`` (``InversionConfig.continue_steps``).

    From the published x' (its best iterates), ``cfg.continue_steps`` more steps along r1's true gradient
    (FakeReLU off, whatever ``cfg.fake_relu`` says of the published steps: ``CONTINUATION_FAKE_RELU``):
    the IRI solver's descent without its smoothing phase or surrogate (``continue_descent=iri``,
    ``stir.inversion.iri.descend_iri``: x = sigmoid(z) from the published x', per-image plateau Adam) or
    normalised steps of a length that halves per image on a stall (``halving``,
    ``stir.descent.HalvingLengthStep``); the best iterate kept, each image stopped once its
    residual is within ``stop_fraction * tolerance`` (arbitrary IRIs; adversarial ones keep pushing m2
    within the bound). The result holds the
    published record (history, snapshots up to ``cfg.steps``) followed by the continuation's, its
    final snapshot at ``cfg.total_steps``.
    """
    run = run or ExecutionConfig()
    forward = forward or resolve_forward(cfg.model_precision, run.channels_last, images.device)
    with frozen(*problem.models):
        working = working or Working.of(problem, cfg, run, forward)
        objective = _objective(problem, working, images, cfg, forward)
        times: List[float] = []
        start = time.perf_counter()

        def timed(x: Tensor, index: Tensor) -> Tensor:
            loss = objective(x, index)
            times.append(time.perf_counter() - start)
            return loss

        stop = None if problem.adversarial else _early_stop(objective, cfg)
        origin = published.x_prime.detach()
        with fake_relu(*working.models, enabled=CONTINUATION_FAKE_RELU):
            tick = _ticker(progress, images.shape[0], cfg.continue_steps, problem, cfg)
            if cfg.continue_descent == "iri":  # z = logit(x'), the solver's descent without its smoothing phase
                solver = IRIConfig(steps=cfg.continue_steps, smooth_share=0.0, surrogate="off",  # r1's true gradient
                                   seed_map="clamp")  # from an image: z = logit(x')
                out = descend_iri(timed, working.m1, origin, images[:1], solver, smoothing=False, stop=stop,
                                  on_step=tick)
                cont, x_prime = out.run, out.to_image(out.run.x)
            else:
                geometry = HalvingLengthStep(cfg.step_size * cfg.continue_shrink, cfg.continue_patience,
                                             cfg.continue_shrink)
                cont = descend(timed, origin, geometry, cfg.continue_steps, keep_best=True, stop=stop, x_init=origin,
                               on_step=tick)
                x_prime = cont.x.clamp(0, 1)
            tick.finish()
        residual = relative_distance(problem.m1, problem.tap1, x_prime, images)
        m2_distance = (relative_distance(problem.m2, problem.second_tap, x_prime, images)
                       if problem.m2 is not None else None)
    elapsed = torch.tensor(times, dtype=torch.float64)
    elapsed = torch.cat([elapsed, elapsed[-1:].expand(cfg.continue_steps + 1 - len(times))])
    elapsed = torch.cat([published.elapsed, published.elapsed[-1] + elapsed[1:]])
    history = torch.cat([published.history, cont.history[1:].to(published.history.dtype)])
    snapshots = {**published.snapshots, cfg.total_steps: x_prime}
    snapshot_residual = {**published.snapshot_residual, cfg.total_steps: residual}
    return make_result(x_prime, residual, m2_distance, images, published.steps + cont.steps,
                   published.evaluations + cont.evaluations, history, elapsed, cfg.tolerance, snapshots, snapshot_residual)


def _schedule(cfg: InversionConfig) -> Schedule:
    if cfg.schedule == "inverse_time":
        return InverseTime(cfg.decay_steps)
    if cfg.schedule == "cosine":
        return Cosine(cfg.steps)
    return Constant()


def _early_stop(objective: InversionObjective, cfg: InversionConfig) -> StopRule:
    return _stop_at(objective, cfg.stop_fraction * cfg.tolerance)


def _stop_at(objective: InversionObjective, threshold: float) -> StopRule:

    def stop(loss: Tensor, index: Tensor) -> Tensor:  # (b,) objective -> (b,) done
        return objective.relative_residual(loss, index) <= threshold

    return stop


def _to_entry(result: InversionResult, problem: Problem) -> dict:
    entry = {
        "x_prime": result.x_prime,
        "residual": result.residual,
        "l2_to_original": result.l2_to_original,
        "steps": result.steps,
        "evaluations": result.evaluations,
        "history": result.history,
        "elapsed": result.elapsed,
        # the last snapshot is x_prime itself: not stored twice
        "snapshots": {t: x for t, x in result.snapshots.items() if t != max(result.snapshots)},
        "snapshot_residual": dict(result.snapshot_residual),
    }
    if problem.adversarial:  # m2 shaped x': its distance belongs to the entry
        entry["m2_distance"] = result.m2_distance
    return entry


def _from_entry(problem: Problem, images: Tensor, entry: dict, cfg: InversionConfig) -> InversionResult:
    device = images.device
    x_prime = entry["x_prime"].to(device=device, dtype=images.dtype)
    m2_distance = entry.get("m2_distance")
    if m2_distance is not None:
        m2_distance = m2_distance.to(device)
    elif problem.m2 is not None:  # arbitrary IRIs: m2 is only measured, so measure it now
        with frozen(problem.m2):
            m2_distance = relative_distance(problem.m2, problem.second_tap, x_prime, images)
    snapshots = {t: x.to(device=device, dtype=images.dtype) for t, x in entry["snapshots"].items()}
    snapshots[cfg.total_steps] = x_prime
    result = make_result(
        x_prime, entry["residual"].to(device), m2_distance, images, entry["steps"].to(device),
        entry["evaluations"], entry["history"].to(device), entry["elapsed"], cfg.tolerance,
        snapshots, {t: r.to(device) for t, r in entry["snapshot_residual"].items()},
    )
    result.from_cache = True
    return result


class _Ticker:
    """Advances a progress bar by one batch's images per step (``descend``'s ``on_step``), showing the
    median residual of the images still moving; ``finish`` counts the steps of images stopped early."""

    def __init__(self, bar: Optional[Progress], images: int, steps: int, label: str):
        self.bar, self.images, self.steps, self.label, self.done = bar, images, steps, label, 0

    def __call__(self, t: int, loss: Tensor) -> None:
        if self.bar is not None:
            self.bar.update(self.images, **{self.label: lambda: float(loss.median())})
            self.done = t

    def finish(self) -> None:
        if self.bar is not None and self.done < self.steps:
            self.bar.update(self.images * (self.steps - self.done))
            self.done = self.steps


def _ticker(bar: Optional[Progress], images: int, steps: int, problem: Problem, cfg: InversionConfig) -> _Ticker:
    # arbitrary IRIs minimise r1 itself (normalised); the adversarial objective mixes r1 and r2
    label = "median r1" if not problem.adversarial and cfg.normalize_residual else "median objective"
    return _Ticker(bar, images, steps, label)


def _warn_if_low(results: Sequence[InversionResult], run: ExecutionConfig, problem: Problem,
                 cfg: InversionConfig) -> None:
    """One warning for all draws of one call when too few X' are IRIs (the report's note says the same)."""
    residual = torch.cat([r.residual.detach().float().cpu() for r in results])
    fraction = float(torch.cat([r.is_iri.detach().cpu() for r in results]).float().mean())
    if fraction < run.warn_below:
        kind = "adversarial" if problem.adversarial else "arbitrary"
        log.warning("%s", iri_shortfall(kind, fraction, residual.numel(), float(residual.median()), cfg))
