"""One direction, "target given reference": STIR(tgt|ref) (eq. 6), STIR_adv (eq. 7), agreement on
the reference's IRIs, controversial-stimulus difficulty, IRI quality and the convergence record.

The unit of work (and of the ``ResultStore``) that a pair runs twice and a matrix once per ordered
pair. Arbitrary IRIs of the reference depend only on (ref, tap, X, seed, settings): they are
requested for all k draws at once as ``invert_draws(ref, [X_1..X_k], tap, cfg, m2=tgt, tap2=...)``,
whose per-draw cache keys ignore the target, so with ``inversion.cache_dir`` one inversion per draw
serves every target.
"""
from __future__ import annotations

import logging
import math
from dataclasses import replace
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor, nn

from stir import similarity
from stir.evaluation.convergence import convergence_record, curve, pool_quality, refuse_failed, summary
from stir.evaluation.keys import DEFAULT_TAP, DIRECTION, Images, Plan, computed, direction_key, identities, lookup, plan_for
from stir.evaluation.observe import check_models, measure_value, observe
from stir.evaluation.results import DirectionResult, Stat
from stir.evaluation.store import ResultStore
from stir.inversion import InversionConfig, invert_adversarial_draws, invert_draws
from stir.inversion.config import ControversialConfig
from stir.inversion.controversial import controversial_perturbation
from stir.models import frozen

log = logging.getLogger(__name__)

def evaluate_direction(
    m_ref: nn.Module,
    m_tgt: nn.Module,
    images: Images,
    tap_ref: str = DEFAULT_TAP,
    tap_tgt: Optional[str] = None,
    *,
    measure: str = "linear_cka",
    k: int = 5,
    iri: str = "both",
    inversion: Optional[InversionConfig] = None,
    difficulty: Optional[ControversialConfig] = None,
    names: Tuple[str, str] = ("ref", "target"),
    ids: Optional[Tuple[str, str]] = None,
    store: Optional[ResultStore] = None,
    record: Optional[Dict[str, Any]] = None,
) -> DirectionResult:
    """STIR(tgt|ref) (eq. 6), STIR_adv(tgt|ref) (eq. 7), agreement on ref's IRIs, difficulty, quality.

    Args:
        m_ref, m_tgt: models taking (n, c, h, w) images in [0, 1], on the images' device.
        images: X, (n, c, h, w) in [0, 1]; or k such tensors, one per draw (X resampled per draw).
        tap_ref, tap_tgt: where each model is read (``stir.models.tap_names``); tap_tgt defaults to tap_ref.
        measure: a ``stir.similarity`` name.  k: seed draws (seeds ``inversion.seed + j``).
        iri: "arbitrary" (STIR, agreement) | "adversarial" (STIR_adv, difficulty) | "both".
        inversion: the engine's settings (default ``InversionConfig()``: the published procedure); set
            ``cache_dir`` to reuse the reference's arbitrary IRIs across targets.
        difficulty: how controversial-stimulus difficulty is measured (default ``ControversialConfig()``).
        names: display names.  ids: identities for the store key (default ``model_fingerprint``).
        store: if given, the result is looked up first and saved the moment it is computed.
        record: provenance stored beside the result (resolved config, checkpoint paths, ...).
    """
    tap_tgt = tap_tgt or tap_ref
    plan = plan_for(images, measure, k, iri, inversion, difficulty)
    ids = identities(ids, m_ref, m_tgt)
    key = direction_key(plan, ids, (tap_ref, tap_tgt))
    result = lookup(store, DIRECTION, key, DirectionResult.from_dict)
    if result is None:
        check_models(plan.images, [(names[0], m_ref, tap_ref), (names[1], m_tgt, tap_tgt)])
        result = computed(store, DIRECTION, key, DirectionResult.from_dict, record,
                          lambda: _direction(m_ref, m_tgt, tap_ref, tap_tgt, plan, names, ids))
    return replace(result, ref=names[0], target=names[1])


def _direction(
    m_ref: nn.Module,
    m_tgt: nn.Module,
    tap_ref: str,
    tap_tgt: str,
    plan: Plan,
    names: Tuple[str, str],
    ids: Tuple[str, str],
    tgt_rep: Optional[Tensor] = None,
) -> DirectionResult:
    """One direction, tgt given ref, over k draws; ``tgt_rep`` = tgt(X) (n, d) if already computed
    (fixed X only)."""
    log.info("STIR(%s|%s) at (%s, %s): %s IRIs, k=%d, n=%d, %s mode, %d steps", names[1], names[0], tap_ref,
             tap_tgt, plan.iri, plan.k, plan.n, plan.cfg.mode, plan.cfg.num_steps)
    fn = similarity.get(plan.measure)
    notes: List[str] = []
    stir, agreement, arbitrary_runs = [], [], []
    stir_adv, adversarial_runs = [], []
    difficulty, reached = [], []
    curves: Dict[str, List[Dict[int, float]]] = {"arbitrary": [], "adversarial": []}  # per draw: step -> S_r
    # Adversarial IRIs of a model against itself (same identity and tap) are undefined: the push
    # term cancels the match term exactly, the objective is 0 and x' never leaves its seed.
    self_pair = (m_ref is m_tgt or ids[0] == ids[1]) and tap_ref == tap_tgt
    # Every draw's IRIs in one call per kind: the k draws are optimised as one batch where it fits;
    # draw j starts from the seeds of ``inversion.seed + j``.
    draws = list(plan.draw_images)
    arbitrary = invert_draws(m_ref, draws, tap_ref, plan.cfg, m2=m_tgt, tap2=tap_tgt) if plan.arbitrary else None
    adversarial = (invert_adversarial_draws(m_ref, m_tgt, draws, tap_ref, tap_tgt, plan.cfg)
                   if plan.adversarial and not self_pair else None)
    for j in range(plan.k):
        images = plan.draw_images[j]
        if tgt_rep is None or plan.resampled:
            with frozen(m_tgt), torch.no_grad():
                rep_j = observe(m_tgt, images, tap_tgt, plan.batch_size)[0]  # tgt(X_j): (n, d_tgt)
            if not plan.resampled:
                tgt_rep = rep_j  # fixed X: once for every draw
        else:
            rep_j = tgt_rep
        cfg_j = replace(plan.cfg, seed=plan.cfg.seed + j)
        label = f"draw {j} (seed {cfg_j.seed})"
        if arbitrary is not None:
            # m_tgt is only measured (m2_distance): the engine's cache key ignores it.
            run = arbitrary[j]
            value, agree = _stir_draw(m_ref, m_tgt, tap_ref, tap_tgt, rep_j, run.x_prime, fn, plan, f"STIR {label}", notes)
            stir.append(refuse_failed(value, run, plan, f"STIR {label}", notes))
            agreement.append(agree)
            curves["arbitrary"].append(curve(m_tgt, tap_tgt, rep_j, run, fn, plan, final=value))
            arbitrary_runs.append(summary(run))  # not the run: its x' (n, c, h, w) is done with
            arbitrary[j] = None
        if adversarial is not None:
            run = adversarial[j]
            value, _ = _stir_draw(m_ref, m_tgt, tap_ref, tap_tgt, rep_j, run.x_prime, fn, plan, f"STIR_adv {label}", notes)
            stir_adv.append(refuse_failed(value, run, plan, f"STIR_adv {label}", notes))
            curves["adversarial"].append(curve(m_tgt, tap_tgt, rep_j, run, fn, plan, final=value))
            adversarial_runs.append(summary(run))
            adversarial[j] = None
            walk = controversial_perturbation(m_ref, m_tgt, images, tap_ref, tap_tgt, plan.difficulty_cfg, cfg_j)
            difficulty.append(walk.delta)  # mean ||x_c - x||_2 over the images that became controversial
            reached.append(walk.fraction)
            if not walk.reached.any():
                notes.append(f"difficulty {label}: no image became controversial within {plan.difficulty_cfg.steps} "
                             f"steps of {plan.difficulty_cfg.step_size:g} (r1 <= {plan.cfg.tolerance:g} and "
                             f"r2 >= {plan.difficulty_cfg.m2_threshold:g}): m2 shares m1's invariances there")
    if plan.adversarial and self_pair:
        notes.append("STIR_adv and difficulty: undefined for a model against itself at the same tap "
                     "(adversarial IRIs would match and push away the same representation)")
        stir_adv = difficulty = [math.nan] * plan.k
        reached = [0.0] * plan.k

    quality = {}
    if arbitrary_runs:
        quality["arbitrary"] = pool_quality(arbitrary_runs)
    if adversarial_runs:
        quality["adversarial"] = pool_quality(adversarial_runs)
    for kind, q in quality.items():  # X' that are not IRIs still count in STIR: say how many
        if q["fraction_iri"] < plan.cfg.warn_below:
            notes.append(f"{kind} IRIs: only {q['fraction_iri']:.0%} within tolerance {plan.cfg.tolerance:g} "
                         f"(median residual {q['median_residual']:.3g}); raise inversion.steps for a cleaner STIR")
    runs = {"arbitrary": arbitrary_runs, "adversarial": adversarial_runs}
    convergence = {kind: convergence_record(curves[kind], runs[kind], plan.cfg) for kind in runs if curves[kind]}
    return DirectionResult(
        ref=names[0], target=names[1], ref_id=ids[0], target_id=ids[1], tap_ref=tap_ref, tap_target=tap_tgt,
        measure=plan.measure, n=plan.n, k=plan.k, iri=plan.iri,
        stir=Stat.from_values(stir) if plan.arbitrary else None,
        stir_adv=Stat.from_values(stir_adv) if plan.adversarial else None,
        agreement=Stat.from_values(agreement) if plan.arbitrary else None,
        difficulty=Stat.from_values(difficulty) if plan.adversarial else None,
        difficulty_fraction=Stat.from_values(reached) if plan.adversarial else None,
        quality=quality, convergence=convergence, notes=notes, settings=plan.settings,
    )


def _stir_draw(
    m_ref: nn.Module, m_tgt: nn.Module, tap_ref: str, tap_tgt: str, tgt_rep: Tensor, x_prime: Tensor,
    fn: Callable[[Tensor, Tensor], Tensor], plan: Plan, label: str, notes: List[str],
) -> Tuple[float, float]:
    """S_r(tgt(X), tgt(X')) and the agreement mean_i [argmax ref(x'_i) == argmax tgt(x'_i)] of one draw."""
    with frozen(m_ref, m_tgt), torch.no_grad():
        tgt_rep_prime, tgt_pred = observe(m_tgt, x_prime, tap_tgt, plan.batch_size)  # (n, d_tgt), (n,)
        _, ref_pred = observe(m_ref, x_prime, tap_ref, plan.batch_size)  # (n,)
    value = measure_value(fn, tgt_rep, tgt_rep_prime, plan.measure, label, notes)
    return value, (ref_pred == tgt_pred).double().mean().item()
