"""One direction, "target given reference": STIR(tgt|ref) (eq. 6), STIR_adv (eq. 7), agreement on
the reference's IRIs, controversial-stimulus difficulty, IRI quality, the convergence record and the
calibration (floor, ceiling, interval) of every STIR value.

The unit of work (and of the results store) that a pair runs twice and a matrix once per ordered
pair. Arbitrary IRIs of the reference depend only on (ref, tap, X, seed, settings): they are
requested for all k draws at once as ``invert_draws(ref, [X_1..X_k], tap, cfg, m2=tgt, tap2=...)``,
whose per-draw cache keys ignore the target, so with ``ExecutionConfig.cache_dir`` one inversion per
draw serves every target. The ceiling's independent draw (seed ``inversion.seed + k``) is one more
such inversion of the reference, cached the same way.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor, nn

from stir import similarity
from stir.inversion import ExecutionConfig, InversionResult, invert_adversarial_draws, invert_draws
from stir.inversion.config import iri_shortfall
from stir.inversion.controversial import controversial_perturbation, pooled_censored
from stir.measure import cost
from stir.measure.call import Call, check_run_batch, open_call
from stir.measure.calibration import Calibration, calibrate, calibration_notes
from stir.measure.convergence import convergence_record, curve, natural_null, pool_quality, refuse_failed, summary
from stir.measure.observe import check_models, measure_value, observe
from stir.measure.plan import DEFAULT_TAP, DIRECTION, Estimator, Images, Plan, direction_parts
from stir.measure.results import DirectionResult, Stat
from stir.measure.settings import refuse_new_measurement
from stir.measure.undefined import undefined_direction
from stir.models.fake_relu import describe
from stir.store import ResultStore

log = logging.getLogger(__name__)

Measure = Callable[[Tensor, Tensor], Tensor]
_LABEL = {"arbitrary": "STIR", "adversarial": "STIR_adv"}
_STAT = {"arbitrary": "stir", "adversarial": "stir_adv"}
# Linear CKA's values come with the debiased estimate of the same pairs (bench/bench_small_n.py: at n = 100
# linear CKA's floor is about 0.09 on CIFAR ResNets, the debiased estimate's about 0).
DEBIASED_BESIDE = "linear_cka"


def evaluate_direction(
    ref: nn.Module,
    target: nn.Module,
    images: Images,
    tap_ref: str = DEFAULT_TAP,
    tap_target: Optional[str] = None,
    estimator: Optional[Estimator] = None,
    *,
    run: Optional[ExecutionConfig] = None,
    names: Tuple[str, str] = ("ref", "target"),
    ids: Optional[Tuple[str, str]] = None,
    store: Optional[ResultStore] = None,
    record: Optional[Dict[str, Any]] = None,
) -> DirectionResult:
    """STIR(tgt|ref) (eq. 6), STIR_adv(tgt|ref) (eq. 7), agreement on ref's IRIs, difficulty, quality.

    Args:
        ref, target: models taking (n, c, h, w) images in [0, 1], on the images' device.
        images: X, (n, c, h, w) in [0, 1]; or k such tensors, one per draw (X resampled per draw).
        tap_ref, tap_target: where each model is read (``stir.models.tap_names``); tap_target defaults to tap_ref.
        estimator: what is measured and how (``Estimator``; default: linear CKA, k = 5, both IRI
            kinds, the published inversion, calibrated).
        run: how the work runs (batch sizes, ``cache_dir`` to reuse the reference's IRIs across targets).
        names: display names.  ids: identities for the store key (default ``content_identity``).
        store: if given, the result is looked up first and saved the moment it is computed.
        record: provenance stored beside the result (resolved config, checkpoint paths, ...).
    """
    taps = (tap_ref, tap_target or tap_ref)
    call = open_call(ref, target, images, estimator, run, names, ids, store, record, taps=taps)
    return direction_of(call, (ref, target), taps)


def direction_of(call: Call, models: Tuple[nn.Module, nn.Module], taps: Tuple[str, str],
                 target_rep: Optional[Callable[[], Tensor]] = None) -> DirectionResult:
    """The direction models[1] given models[0] of ``call``: the stored result, or measured (and stored).

    ``target_rep``: a function giving ``models[1](X)`` (n, d) when the caller computes it for other results
    too and has checked both models (``evaluate_pair``); otherwise the models are checked here.
    """
    plan, names, ids = call.plan, call.names, call.ids
    if call.broken is not None:  # no number from a model that is not finite (stir.measure.undefined)
        return undefined_direction(plan, names, ids, taps, call.broken)

    def compute() -> DirectionResult:
        check_run_batch(plan, models, names, taps)  # coupling above the probe's cap, at the batch measured now
        if target_rep is None:
            check_models(plan.images, [(names[0], models[0], taps[0]), (names[1], models[1], taps[1])],
                         differentiated=[names[0]])  # the reference is inverted
        rep = None if target_rep is None else target_rep()  # the caller's checks run here, resampled X or not
        return measure_direction(models[0], models[1], taps[0], taps[1], plan, names, ids,
                                 target_rep=None if plan.resampled else rep)  # resampled: tgt(X_j) per draw

    if call.store is None:
        return compute()
    result = call.store.cached(DIRECTION, direction_parts(plan, ids, taps), compute, DirectionResult.from_dict,
                               call.record)
    return replace(result, ref=names[0], target=names[1])  # the store keeps the names it was made with


@dataclass
class _Kind:
    """What one IRI kind (arbitrary or adversarial) of a direction collects over the k draws."""

    values: List[float] = field(default_factory=list)  # S_r(tgt(X), tgt(X'_j)) per draw (NaN if refused)
    primes: List[Tensor] = field(default_factory=list)  # tgt(X'_j) (n, d_tgt) per draw
    ref_primes: List[Tensor] = field(default_factory=list)  # ref(X'_j) (n, d_ref) per draw
    curves: List[Dict[int, float]] = field(default_factory=list)  # per draw: step -> S_r
    runs: List[Dict[str, Any]] = field(default_factory=list)  # per draw: ``convergence.summary``
    agreement: List[float] = field(default_factory=list)
    debiased: List[float] = field(default_factory=list)  # debiased linear CKA of the same pairs (linear CKA only)


def measure_direction(ref: nn.Module, target: nn.Module, tap_ref: str, tap_target: str, plan: Plan,
                      names: Tuple[str, str], ids: Tuple[str, str],
                      target_rep: Optional[Tensor] = None) -> DirectionResult:
    """One direction, tgt given ref, over the k draws of ``plan`` (no store); ``target_rep`` = tgt(X)
    (n, d) when the caller has it already (fixed X only)."""
    est = plan.estimator
    # A reading that failed its coverage check is served from the store, never measured anew (before any work).
    refuse_new_measurement(est.calibration, f"STIR({names[1]}|{names[0]}) at ({tap_ref}, {tap_target})")
    fn = similarity.get(est.measure)
    notes: List[str] = []
    # Adversarial IRIs of a model against itself (same identity and tap) are undefined: the push
    # term cancels the match term exactly, the objective is 0 and x' never leaves its seed.
    self_pair = (ref is target or ids[0] == ids[1]) and tap_ref == tap_target
    walk = f", difficulty walk {est.difficulty.steps} steps" if est.adversarial and not self_pair else ""
    log.info("STIR(%s|%s) at (%s, %s): %s IRIs, k=%d, n=%d, %s mode, %d steps%s; %s", names[1], names[0], tap_ref,
             tap_target, est.iri, est.k, plan.n, plan.cfg.mode, plan.cfg.steps, walk,
             cost.describe(cost.estimate(ref, target, tap_ref, tap_target, plan, est.adversarial and not self_pair)))
    runs = _inversions(ref, target, tap_ref, tap_target, plan, adversarial=est.adversarial and not self_pair)
    target_reps = _target_representations(target, tap_target, plan, target_rep)
    kinds = {kind: _Kind() for kind in runs if kind != "ceiling"}
    difficulty, reached, walks = [], [], []
    for j in range(est.k):
        label = f"draw {j} (seed {plan.cfg.seed + j})"
        for kind, collected in kinds.items():
            _measure_draw(ref, target, tap_ref, tap_target, target_reps[j], runs[kind][j], fn, plan,
                          f"{_LABEL[kind]} {label}", notes, collected)
            runs[kind][j] = None  # its x' (n, c, h, w) is done with
        if "adversarial" in kinds:
            walk = controversial_perturbation(ref, target, plan.draw_images[j], tap_ref, tap_target, est.difficulty,
                                              replace(plan.cfg, seed=plan.cfg.seed + j), progress=plan.run.progress)
            difficulty.append(walk.delta)  # mean ||x_c - x||_2 over the images that became controversial
            reached.append(walk.fraction)
            walks.append(walk)
            if not walk.reached.any():
                notes.append(f"difficulty {label}: no image became controversial within {est.difficulty.steps} "
                             f"steps of {est.difficulty.step_size:g} (r1 <= {plan.cfg.tolerance:g} and "
                             f"r2 >= {est.difficulty.m2_threshold:g}): difficulty is censored at the distance walked (a "
                             "lower bound): this budget cannot order the pair, and it is no evidence of "
                             "shared invariance (raise difficulty.steps)")
    if est.adversarial and self_pair:
        notes.append("STIR_adv and difficulty: undefined for a model against itself at the same tap "
                     "(adversarial IRIs would match and push away the same representation)")
        kinds["adversarial"] = _Kind(values=[math.nan] * est.k)
        difficulty, reached = [math.nan] * est.k, [0.0] * est.k

    ref_reps = _reference_representations(ref, tap_ref, plan)  # m1(X_j) (n, d_ref) per draw
    null = [natural_null(rep) for rep in ref_reps]  # Feather et al.'s criterion per image and draw
    quality = {kind: pool_quality(c.runs, null) for kind, c in kinds.items() if c.runs}
    for kind, q in quality.items():  # X' that are not IRIs still count in STIR: say how many
        if q["fraction_iri"] < plan.run.warn_below:
            count = sum(r["residual"].numel() for r in kinds[kind].runs)
            notes.append(iri_shortfall(kind, q["fraction_iri"], count, q["median_residual"], plan.cfg))
    adversarial = quality.get("adversarial")
    if adversarial is not None and plan.cfg.adversarial_objective == "constrained":
        _adversarial_feasibility(kinds["adversarial"], plan, notes)
    ceiling_rep = _ceiling_representation(ref, tap_ref, runs.get("ceiling"), plan)
    calibration = _calibrations(plan, target_reps[0], ref_reps[0], kinds, ceiling_rep, notes)
    fake = _fake_relu(ref, target, names, plan, notes, adversarial="adversarial" in kinds and not self_pair)
    return DirectionResult(
        ref=names[0], target=names[1], ref_id=ids[0], target_id=ids[1], tap_ref=tap_ref, tap_target=tap_target,
        measure=est.measure, n=plan.n, k=est.k, iri=est.iri,
        stir=Stat.from_values(kinds["arbitrary"].values) if est.arbitrary else None,
        stir_adv=Stat.from_values(kinds["adversarial"].values) if est.adversarial else None,
        agreement=Stat.from_values(kinds["arbitrary"].agreement) if est.arbitrary else None,
        difficulty=Stat.from_values(difficulty) if est.adversarial else None,
        difficulty_fraction=Stat.from_values(reached) if est.adversarial else None,
        difficulty_censored=pooled_censored(walks) if walks else {},
        quality=quality,
        convergence={kind: convergence_record(c.curves, c.runs, plan.cfg) for kind, c in kinds.items() if c.curves},
        debiased={_STAT[kind]: Stat.from_values(c.debiased) for kind, c in kinds.items() if c.debiased},
        calibration=calibration, notes=notes, settings={**plan.settings, "fake_relu_applied": fake},
    )


def _adversarial_feasibility(adv: _Kind, plan: Plan, notes: List[str]) -> None:
    """STIR_adv of the constrained objective says whether it was measured.

    The objective pushes m2 away only from X' whose r1 reached the IRI bound b = stop_fraction *
    tolerance; every other X' is exactly its arbitrary IRI, so STIR_adv over them equals STIR by
    construction. Below ``min_fraction_adversarial`` X' at the bound, STIR_adv is not measured: its
    draws become NaN (no calibration) with the count; above it and below all, a note says the value
    is an upper bound of the worst case (the rest are arbitrary IRIs).
    """
    bound = plan.cfg.stop_fraction * plan.cfg.tolerance
    residuals = torch.cat([r["residual"] for r in adv.runs]) if adv.runs else torch.empty(0)
    reached, total = int((residuals <= bound).sum()), residuals.numel()
    if total == 0:
        return
    fraction, floor = reached / total, plan.estimator.min_fraction_adversarial
    if fraction < floor or reached == 0:
        notes.append(f"STIR_adv: not measured: {reached} of {total} adversarial X' reached the IRI bound "
                     f"{bound:g} (min_fraction_adversarial={floor:g}); the constrained objective pushes m2 away "
                     "only there, so over these X' STIR_adv would equal STIR by construction (reach the bound: "
                     "inversion.continue_steps, docs/estimator.md)")
        adv.values = [math.nan] * len(adv.values)
        adv.debiased = [math.nan] * len(adv.debiased)
        adv.primes, adv.ref_primes = [], []  # nothing to calibrate
    elif reached < total:
        notes.append(f"STIR_adv: {reached} of {total} adversarial X' reached the IRI bound {bound:g}; the others are "
                     "arbitrary IRIs (not pushed), so STIR_adv is an upper bound of the worst case")


def _fake_relu(ref: nn.Module, target: nn.Module, names: Tuple[str, str], plan: Plan, notes: List[str],
               adversarial: bool) -> Dict[str, Any]:
    """Which ReLUs the inversions faked in each model they differentiated (``stir.models.fake_relu.describe``):
    the reference always, the target when adversarial IRIs pushed it. Said in the notes too whenever
    FakeReLU was asked for (its spec is not "off"), so a rule that fakes nothing in a model is visible."""
    spec = plan.cfg.fake_relu_spec
    applied = {"reference": describe(ref, spec)}
    if adversarial:
        applied["target"] = describe(target, spec)
    for role, name in (("reference", names[0]), ("target", names[1])) if spec != "off" else ():
        if role in applied:
            d = applied[role]
            notes.append(f"FakeReLU on {name} ({role}): " + (f"{len(d['sites'])} ReLU(s), {d['rule']}" if d["applied"]
                                                             else f"none ({d['rule']})"))
    return applied


def _inversions(ref: nn.Module, target: nn.Module, tap_ref: str, tap_target: str, plan: Plan,
                adversarial: bool) -> Dict[str, List[InversionResult]]:
    """{"arbitrary": k runs, "adversarial": k runs, "ceiling": [1 run]} as the estimator asks.

    Each kind's k draws in one call (one batch where it fits; draw j from seed ``inversion.seed + j``).
    The ceiling's independent draw is a separate call (seed ``inversion.seed + k``), so that the k
    draws are optimised exactly as without it.
    """
    est, draws = plan.estimator, list(plan.draw_images)
    out: Dict[str, List[InversionResult]] = {}
    if est.arbitrary:  # target is only measured (m2_distance): the engine's cache key ignores it
        out["arbitrary"] = invert_draws(ref, draws, tap_ref, plan.cfg, m2=target, tap2=tap_target, run=plan.run)
    if adversarial:
        out["adversarial"] = invert_adversarial_draws(ref, target, draws, tap_ref, tap_target, plan.cfg, run=plan.run)
    if est.calibration.ceiling == "independent":
        ceiling_cfg = replace(plan.cfg, seed=plan.cfg.seed + est.k)
        out["ceiling"] = invert_draws(ref, [plan.images], tap_ref, ceiling_cfg, run=plan.run)
    return out


def _target_representations(target: nn.Module, tap_target: str, plan: Plan, target_rep: Optional[Tensor]) -> List[Tensor]:
    """tgt(X_j) (n, d_tgt) of every draw: computed once for a fixed X, once per draw when resampled."""
    if plan.resampled:
        return [observe(target, x, tap_target, plan.batch_size)[0] for x in plan.draw_images]
    rep = target_rep if target_rep is not None else observe(target, plan.images, tap_target, plan.batch_size)[0]
    return [rep] * plan.k


def _measure_draw(ref: nn.Module, target: nn.Module, tap_ref: str, tap_target: str, target_rep: Tensor,
                  run: InversionResult, fn: Measure, plan: Plan, label: str, notes: List[str],
                  collected: _Kind) -> None:
    """S_r(tgt(X), tgt(X')) of one draw (NaN when its X' are refused), its agreement on x', its curve."""
    target_prime, target_pred = observe(target, run.x_prime, tap_target, plan.batch_size)  # (n, d_tgt), (n,)
    ref_prime, ref_pred = observe(ref, run.x_prime, tap_ref, plan.batch_size)  # (n, d_ref), (n,)
    value = measure_value(fn, target_rep, target_prime, plan.measure, label, notes)
    collected.values.append(refuse_failed(value, run, plan, label, notes))
    if plan.measure == DEBIASED_BESIDE:  # Murphy et al.'s debiased estimate of the same value, no floor at n
        debiased = _debiased(target_rep, target_prime)
        collected.debiased.append(debiased if math.isfinite(collected.values[-1]) else math.nan)
    collected.agreement.append((ref_pred == target_pred).double().mean().item())
    collected.curves.append(curve(target, tap_target, target_rep, run, fn, plan, final=value))
    collected.runs.append(summary(run))
    collected.primes.append(target_prime)
    collected.ref_primes.append(ref_prime)


def _debiased(x: Tensor, y: Tensor) -> float:
    try:
        return float(similarity.get("linear_cka_debiased")(x, y))
    except ValueError:  # undefined on these rows (n < 4, a constant representation): its reason is in the value's note
        return math.nan


def _ceiling_representation(ref: nn.Module, tap_ref: str, runs: Optional[List[InversionResult]],
                            plan: Plan) -> Optional[Tensor]:
    """ref(X'') (n, d_ref) of the ceiling's independent draw; None when it was not made."""
    return None if runs is None else observe(ref, runs[0].x_prime, tap_ref, plan.batch_size)[0]


def _reference_representations(ref: nn.Module, tap_ref: str, plan: Plan) -> List[Tensor]:
    """ref(X_j) (n, d_ref) of every draw: computed once for a fixed X, once per draw when resampled."""
    if plan.resampled:
        return [observe(ref, x, tap_ref, plan.batch_size)[0] for x in plan.draw_images]
    return [observe(ref, plan.images, tap_ref, plan.batch_size)[0]] * plan.k


def _calibrations(plan: Plan, target_rep: Tensor, ref_rep: Tensor, kinds: Dict[str, _Kind],
                  ceiling_rep: Optional[Tensor], notes: List[str]) -> Dict[str, Calibration]:
    """{"stir" | "stir_adv": Calibration} of every kind measured on draws (``stir.measure.calibration``).

    Resampled images (one X per draw) have no single X to resample rows of: their values are not
    calibrated, and a note says so.
    """
    measured = {kind: c for kind, c in kinds.items() if c.primes}
    if not measured:
        return {}
    if plan.resampled:
        notes.append("calibration: not computed with resample_images=true (no single X to resample rows of)")
        return {}
    out = {}
    for kind, c in measured.items():
        cal = calibrate(plan.measure, target_rep, c.primes, c.values, ref_rep, c.ref_primes, ceiling_rep,
                        plan.estimator.calibration)
        notes.extend(calibration_notes(_LABEL[kind], cal))
        out[_STAT[kind]] = cal
    return out
