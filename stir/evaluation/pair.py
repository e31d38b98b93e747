"""STIR between two networks: both directions, adversarial IRIs, plain similarity, agreement, difficulty.

Nanda et al., ICML 2022, "Measuring Representational Robustness of Neural Networks Through Shared
Invariances". For a reference m1 read at tap1, a target m2 read at tap2, images X (n, c, h, w) in
[0, 1], a similarity S_r (``stir.similarity``; default linear CKA) and k seed draws j = 0..k-1:

    STIR(m2|m1)     = 1/k sum_j S_r(m2(X), m2(X'_j))                                  (eq. 6)
                      X'_j: arbitrary IRIs of m1 at tap1 from seed ``inversion.seed + j``
    STIR_adv(m2|m1) = the same with X'_j adversarial IRIs: m1 at tap1 matched, m2 at tap2
                      pushed away (controversial stimuli)                             (eq. 7)
    S_r(m1(X), m2(X))                                    plain similarity, once over all n images
    agreement on m1's IRIs = mean_i [argmax m1(x'_i) == argmax m2(x'_i)], x' arbitrary IRIs of m1
    difficulty(m2|m1)      = mean over the images that get there of the smallest ||x_c - x||_2 that
                             makes x_c controversial, walking from x (appendix C, eq. 8;
                             ``stir.inversion.controversial``), with the fraction that got there

Convergence: every STIR value is also recorded along the inversion budget (``convergence``): at
each step t of ``inversion.snapshot_steps`` the best iterates so far give S_r(m2(X), m2(X'_t)),
with the median residual and the fraction of IRIs at t, so a user sees whether the value has
settled. Draws whose reference residuals are not finite, or with fewer IRIs than
``inversion.min_fraction_iri``, give NaN with the reason: a STIR of failed inversions is not STIR.

Images: ``images`` is X (n, c, h, w), fixed for the k draws (the default: the paper's tables report
CKA +- 0.000 over draws, which only a fixed X gives), or a sequence of k such tensors, one per draw
(eq. 6 read literally: X resampled for each draw; ``resample_images=true`` in evaluate.py).

Argument order: S_r(m2(X), m2(X')), i.e. the representation of the original images first; it
matters only for asymmetric measures (``stir.similarity.is_symmetric``). Mean and std are over the
k draws (``Stat``). The other direction, STIR(m1|m2), inverts m2 and measures on m1.

Units of work (and of the ``ResultStore``): one *direction* "target given reference"
(``evaluate_direction``: STIR, STIR_adv, agreement, difficulty, IRI quality) and the plain
*similarity* (``evaluate_similarity``, no direction). ``evaluate_pair`` combines two directions and
the similarity; a zoo matrix calls ``evaluate_direction`` once per ordered pair.

Efficiency: arbitrary IRIs of m1 depend only on (m1, tap1, X, seed, settings); they are requested as
``invert(m1, X, tap1, cfg_j, m2=m2, tap2=tap2)``, whose cache key ignores m2 (m2 is only measured),
so with ``inversion.cache_dir`` set one inversion per draw serves every target. The targets'
representations of X are computed once per call, not per draw. Every measurement runs under
``torch.no_grad()`` with both models frozen in eval mode (``stir.models.frozen``); the inversions
manage their own gradients. Devices and dtypes follow the images; models must already live there.

Undefined values (e.g. a constant representation: the measure raises ValueError) are NaN with a
reason in ``notes``; every other error propagates.
"""
from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn

from stir import similarity
from stir.evaluation.results import DIRECTIONS, IRI_KINDS, DirectionResult, PairResult, SimilarityResult, Stat
from stir.evaluation.store import ResultStore
from stir.inversion import InversionConfig, InversionResult, invert, invert_adversarial, model_fingerprint
from stir.inversion.cache import tensor_digest
from stir.inversion.config import ControversialConfig
from stir.inversion.controversial import controversial_perturbation
from stir.inversion.objectives import resolve_forward
from stir.models import frozen, representation, representations, tap_names

log = logging.getLogger(__name__)

DEFAULT_TAP = "penultimate"
LOGITS = "logits"
DIRECTION, SIMILARITY = "direction", "similarity"  # the store's kinds

# InversionConfig fields that cannot change a reported number: where/how fast it runs, logging.
# channels_last changes x' only at the level of floating-point rounding (as in the inversion cache).
_NOT_RESULT_SETTINGS = frozenset({"cache_dir", "progress", "warn_below", "batch_size", "channels_last"})

Images = Union[Tensor, Sequence[Tensor]]  # X fixed for every draw, or one X per draw (k tensors)


# ----------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------


def evaluate_direction(
    m_ref: nn.Module,
    m_tgt: nn.Module,
    images: Tensor,
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
    plan = _plan(images, measure, k, iri, inversion, difficulty)
    ids = identities(ids, m_ref, m_tgt)
    key = direction_key(plan, ids, (tap_ref, tap_tgt))
    result = _lookup(store, DIRECTION, key, DirectionResult.from_dict)
    if result is None:
        _check_models(plan.images, [(names[0], m_ref, tap_ref), (names[1], m_tgt, tap_tgt)])
        result = _direction(m_ref, m_tgt, tap_ref, tap_tgt, plan, names, ids)
        _save(store, DIRECTION, key, result, record)
    return replace(result, ref=names[0], target=names[1])


def evaluate_similarity(
    m1: nn.Module,
    m2: nn.Module,
    images: Tensor,
    tap1: str = DEFAULT_TAP,
    tap2: Optional[str] = None,
    *,
    measure: str = "linear_cka",
    names: Tuple[str, str] = ("m1", "m2"),
    ids: Optional[Tuple[str, str]] = None,
    store: Optional[ResultStore] = None,
    record: Optional[Dict[str, Any]] = None,
) -> SimilarityResult:
    """Plain similarity S_r(m1(X), m2(X)) at (tap1, tap2) over all n images, both models in eval mode.

    Identical representations give the measure's identity value exactly (1, or 0 for a distance).
    """
    tap2 = tap2 or tap1
    plan = _plan(images, measure, 1, "arbitrary", None)
    ids = identities(ids, m1, m2)
    key = similarity_key(plan, ids, (tap1, tap2))
    result = _lookup(store, SIMILARITY, key, SimilarityResult.from_dict)
    if result is None:
        _check_models(plan.images, [(names[0], m1, tap1), (names[1], m2, tap2)])
        with frozen(m1, m2), torch.no_grad():
            rep1 = _observe(m1, plan.images, tap1, plan.batch_size)[0]
            rep2 = _observe(m2, plan.images, tap2, plan.batch_size)[0]
        result = _similarity(plan, names, ids, (tap1, tap2), rep1, rep2)
        _save(store, SIMILARITY, key, result, record)
    return replace(result, ref=names[0], target=names[1])


def evaluate_pair(
    m1: nn.Module,
    m2: nn.Module,
    images: Tensor,
    tap1: str = DEFAULT_TAP,
    tap2: Optional[str] = None,
    *,
    measure: str = "linear_cka",
    k: int = 5,
    iri: str = "both",
    inversion: Optional[InversionConfig] = None,
    difficulty: Optional[ControversialConfig] = None,
    names: Tuple[str, str] = ("m1", "m2"),
    ids: Optional[Tuple[str, str]] = None,
    store: Optional[ResultStore] = None,
    directions: Sequence[str] = DIRECTIONS,
    record: Optional[Dict[str, Any]] = None,
) -> PairResult:
    """Both directions (``evaluate_direction``) and the plain similarity of m1 (reference) and m2.

    ``directions`` picks "m2|m1" (IRIs of m1, measured on m2) and/or "m1|m2"; fields of a
    direction not requested are None. Arguments as in ``evaluate_direction``. Each direction and
    the similarity are separate store entries: a pair evaluation reuses (and feeds) the entries of
    a matrix evaluation with the same settings. Representations of X are computed once per call.
    """
    tap2 = tap2 or tap1
    unknown = [d for d in directions if d not in DIRECTIONS]
    if unknown or not directions:
        raise ValueError(f"directions must be a non-empty subset of {DIRECTIONS}, got {list(directions)}")
    plan = _plan(images, measure, k, iri, inversion, difficulty)
    ids = identities(ids, m1, m2)
    # Each direction as (ref, target) indices into the pair: "m2|m1" = IRIs of model 0, measured on model 1.
    roles = {"m2|m1": (0, 1), "m1|m2": (1, 0)}
    models, taps = (m1, m2), (tap1, tap2)

    keys = {d: direction_key(plan, (ids[r], ids[t]), (taps[r], taps[t])) for d, (r, t) in roles.items() if d in directions}
    sim_key = similarity_key(plan, ids, taps)
    sim = _lookup(store, SIMILARITY, sim_key, SimilarityResult.from_dict)
    # By key, in order: a self pair (same identity and tap) has one key for both directions.
    by_key = {key: _lookup(store, DIRECTION, key, DirectionResult.from_dict) for key in dict.fromkeys(keys.values())}

    if sim is None or any(v is None for v in by_key.values()):
        _check_models(plan.images, [(names[0], m1, tap1), (names[1], m2, tap2)])
        with frozen(m1, m2), torch.no_grad():
            reps = [_observe(m, plan.images, tap, plan.batch_size)[0] for m, tap in zip(models, taps)]  # (n, d_i) once
        if sim is None:
            sim = _similarity(plan, names, ids, taps, reps[0], reps[1])
            _save(store, SIMILARITY, sim_key, sim, record)
        for d in directions:
            if by_key[keys[d]] is None:
                r, t = roles[d]
                by_key[keys[d]] = _direction(models[r], models[t], taps[r], taps[t], plan, (names[r], names[t]),
                                             (ids[r], ids[t]), tgt_rep=None if plan.resampled else reps[t])
                _save(store, DIRECTION, keys[d], by_key[keys[d]], record)
    return _combine(plan, names, ids, taps, sim, {d: by_key[keys[d]] for d in directions})


# ----------------------------------------------------------------------------------------------
# Keys
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """The checked, resolved settings shared by every measurement of one call.

    ``inversion`` holds the InversionConfig fields that can change a result (``steps`` and
    ``precision`` resolved; ``seed`` = the base seed), the part of the settings in every key.
    """

    images: Tensor  # (n, c, h, w) in [0, 1]: X (of draw 0 when resampled), the plain similarity's images
    draw_images: Tuple[Tensor, ...]  # X of each draw j: k times ``images``, or the k resampled sets
    digest: str  # sha256 of the images' dtype, shape and bytes (every draw's when resampled)
    measure: str
    k: int
    iri: str
    cfg: InversionConfig
    inversion: Dict[str, Any]
    difficulty_cfg: ControversialConfig
    resampled: bool

    @property
    def n(self) -> int:
        return self.images.shape[0]

    @property
    def batch_size(self) -> int:
        return self.cfg.batch_size

    @property
    def arbitrary(self) -> bool:
        return self.iri in ("arbitrary", "both")

    @property
    def adversarial(self) -> bool:
        return self.iri in ("adversarial", "both")

    @property
    def difficulty(self) -> Dict[str, Any]:
        return dataclasses.asdict(self.difficulty_cfg)

    @property
    def settings(self) -> Dict[str, Any]:
        settings = {"inversion": self.inversion, "seed": self.cfg.seed,
                    "seeds": [self.cfg.seed + j for j in range(self.k)], "measure": self.measure,
                    "resample_images": self.resampled}
        if self.adversarial:
            settings["difficulty"] = self.difficulty
        return settings


def make_plan(
    images: Images, measure: str = "linear_cka", k: int = 5, iri: str = "both",
    inversion: Optional[InversionConfig] = None, difficulty: Optional[ControversialConfig] = None,
) -> Plan:
    """Validate the arguments and resolve the settings (what ``evaluate_*`` do first)."""
    return _plan(images, measure, k, iri, inversion, difficulty)


def direction_key(plan: Plan, ids: Tuple[str, str], taps: Tuple[str, str]) -> str:
    """Store key of the direction (target ids[1] at taps[1]) given (reference ids[0] at taps[0])."""
    extra = {"difficulty": plan.difficulty} if plan.adversarial else {}
    return ResultStore.key(
        kind=DIRECTION, ref=[ids[0], taps[0]], target=[ids[1], taps[1]], images=plan.digest, n=plan.n,
        measure=plan.measure, k=plan.k, iri=plan.iri, inversion=plan.inversion, **extra,
    )


def similarity_key(plan: Plan, ids: Tuple[str, str], taps: Tuple[str, str]) -> str:
    """Store key of S_r(m1(X), m2(X)); for a symmetric measure the order of the models is ignored."""
    models = [[ids[0], taps[0]], [ids[1], taps[1]]]
    if similarity.is_symmetric(plan.measure):
        models = sorted(models)
    return ResultStore.key(kind=SIMILARITY, models=models, images=plan.digest, n=plan.n, measure=plan.measure)


def _check_images(images: Tensor) -> None:
    if not isinstance(images, Tensor) or images.dim() != 4 or images.shape[0] == 0:
        raise ValueError(f"images must be a non-empty (n, c, h, w) tensor, got {getattr(images, 'shape', type(images))}")
    if not images.dtype.is_floating_point:
        raise ValueError(f"images must be floating point in [0, 1], got dtype {images.dtype}")
    lo, hi = images.min().item(), images.max().item()
    if lo < 0 or hi > 1:
        raise ValueError(f"images must lie in [0, 1] (models normalise internally), got range [{lo:.3g}, {hi:.3g}]")


def _plan(images: Images, measure: str, k: int, iri: str, inversion: Optional[InversionConfig],
          difficulty: Optional[ControversialConfig] = None) -> Plan:
    resampled = not isinstance(images, Tensor)
    sets = [x.detach() for x in images] if resampled else [images]
    for x in sets:
        _check_images(x)
    if resampled and (len(sets) != k or len({tuple(x.shape) for x in sets}) != 1):
        raise ValueError(f"resampled images must be k={k} tensors of one shape, got {[tuple(x.shape) for x in sets]}")
    similarity.get(measure)  # unknown name: ValueError listing the valid ones
    if iri not in IRI_KINDS:
        raise ValueError(f"iri must be one of {IRI_KINDS}, got {iri!r}")
    if int(k) != k or k < 1:
        raise ValueError(f"k (seed draws) must be a positive integer, got {k!r}")
    cfg = inversion or InversionConfig()
    settings = {f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name not in _NOT_RESULT_SETTINGS}
    settings.update(steps=cfg.num_steps, precision=_precision_name(cfg, sets[0].device), betas=list(cfg.betas),
                    fake_relu=cfg.use_fake_relu, record_steps=list(cfg.snapshot_steps))
    if iri == "arbitrary":
        del settings["adversarial_weight"], settings["adversarial_objective"]  # read by adversarial IRIs only
    digest = tensor_digest(torch.stack(sets)) if resampled else tensor_digest(sets[0])
    draws = tuple(sets) if resampled else (sets[0],) * int(k)
    return Plan(sets[0], draws, digest, measure, int(k), iri, cfg, settings, difficulty or ControversialConfig(), resampled)


def _precision_name(cfg: InversionConfig, device: torch.device) -> str:
    """The precision the engine will use ("auto" depends on the device)."""
    amp = resolve_forward(cfg.precision, cfg.channels_last, device).amp_dtype
    return {None: "32", torch.bfloat16: "bf16", torch.float16: "16"}[amp]


# ----------------------------------------------------------------------------------------------
# The measurements
# ----------------------------------------------------------------------------------------------


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
    for j in range(plan.k):
        images = plan.draw_images[j]
        if tgt_rep is None or plan.resampled:
            with frozen(m_tgt), torch.no_grad():
                rep_j = _observe(m_tgt, images, tap_tgt, plan.batch_size)[0]  # tgt(X_j): (n, d_tgt)
            if not plan.resampled:
                tgt_rep = rep_j  # fixed X: once for every draw
        else:
            rep_j = tgt_rep
        cfg_j = replace(plan.cfg, seed=plan.cfg.seed + j)  # draw j: X'_j from seed base + j
        label = f"draw {j} (seed {cfg_j.seed})"
        if plan.arbitrary:
            # m_tgt is only measured (m2_distance): the engine's cache key ignores it.
            run = invert(m_ref, images, tap_ref, cfg_j, m2=m_tgt, tap2=tap_tgt)
            value, agree = _stir_draw(m_ref, m_tgt, tap_ref, tap_tgt, rep_j, run.x_prime, fn, plan, f"STIR {label}", notes)
            stir.append(_refuse_failed(value, run, plan, f"STIR {label}", notes))
            agreement.append(agree)
            curves["arbitrary"].append(_curve(m_tgt, tap_tgt, rep_j, run, fn, plan))
            arbitrary_runs.append(_summary(run))  # not the run: its x' (n, c, h, w) is done with
        if plan.adversarial and not self_pair:
            run = invert_adversarial(m_ref, m_tgt, images, tap_ref, tap_tgt, cfg_j)
            value, _ = _stir_draw(m_ref, m_tgt, tap_ref, tap_tgt, rep_j, run.x_prime, fn, plan, f"STIR_adv {label}", notes)
            stir_adv.append(_refuse_failed(value, run, plan, f"STIR_adv {label}", notes))
            curves["adversarial"].append(_curve(m_tgt, tap_tgt, rep_j, run, fn, plan))
            adversarial_runs.append(_summary(run))
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
        quality["arbitrary"] = _quality(arbitrary_runs)
    if adversarial_runs:
        quality["adversarial"] = _quality(adversarial_runs)
    for kind, q in quality.items():  # X' that are not IRIs still count in STIR: say how many
        if q["fraction_iri"] < plan.cfg.warn_below:
            notes.append(f"{kind} IRIs: only {q['fraction_iri']:.0%} within tolerance {plan.cfg.tolerance:g} "
                         f"(median residual {q['median_residual']:.3g}); raise inversion.steps for a cleaner STIR")
    runs = {"arbitrary": arbitrary_runs, "adversarial": adversarial_runs}
    convergence = {kind: _convergence(curves[kind], runs[kind], plan.cfg) for kind in runs if curves[kind]}
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


def _refuse_failed(value: float, run: InversionResult, plan: Plan, label: str, notes: List[str]) -> float:
    """NaN (with the reason) when the draw's X' are not IRIs: non-finite residuals, or too few IRIs."""
    if not bool(torch.isfinite(run.residual).all()):
        notes.append(f"{label}: NaN because the reference's residuals are not finite (the model outputs NaN/Inf)")
        return math.nan
    if run.fraction_iri < plan.cfg.min_fraction_iri:
        notes.append(f"{label}: NaN because only {run.fraction_iri:.0%} of X' are IRIs, below "
                     f"inversion.min_fraction_iri={plan.cfg.min_fraction_iri:g}")
        return math.nan
    return value


def _curve(m_tgt: nn.Module, tap_tgt: str, tgt_rep: Tensor, run: InversionResult,
           fn: Callable[[Tensor, Tensor], Tensor], plan: Plan) -> Dict[int, float]:
    """S_r(tgt(X), tgt(X'_t)) at every snapshot step t of one draw (the last one is x' itself)."""
    curve = {}
    with frozen(m_tgt), torch.no_grad():
        for t, x in run.snapshots.items():
            rep = _observe(m_tgt, x, tap_tgt, plan.batch_size)[0]
            try:
                curve[t] = float(fn(tgt_rep, rep))
            except ValueError:  # undefined at this step (e.g. constant): the final value's note says why
                curve[t] = math.nan
    return curve


def _convergence(curves: List[Dict[int, float]], runs: List[Dict[str, Any]], cfg: InversionConfig) -> Dict[str, List[float]]:
    """STIR (mean, std over draws), median residual and fraction of IRIs at every snapshot step."""
    steps = sorted(curves[0])
    record: Dict[str, List[float]] = {"steps": [float(t) for t in steps], "stir": [], "stir_std": [],
                                      "median_residual": [], "fraction_iri": []}
    for t in steps:
        stat = Stat.from_values([c[t] for c in curves])
        residual = torch.cat([r["snapshot_residual"][t] for r in runs])  # (n * k,)
        record["stir"].append(stat.mean)
        record["stir_std"].append(stat.std)
        record["median_residual"].append(residual.quantile(0.5).item())
        record["fraction_iri"].append((residual <= cfg.tolerance).double().mean().item())
    return record


def _stir_draw(
    m_ref: nn.Module, m_tgt: nn.Module, tap_ref: str, tap_tgt: str, tgt_rep: Tensor, x_prime: Tensor,
    fn: Callable[[Tensor, Tensor], Tensor], plan: Plan, label: str, notes: List[str],
) -> Tuple[float, float]:
    """S_r(tgt(X), tgt(X')) and the agreement mean_i [argmax ref(x'_i) == argmax tgt(x'_i)] of one draw."""
    with frozen(m_ref, m_tgt), torch.no_grad():
        tgt_rep_prime, tgt_pred = _observe(m_tgt, x_prime, tap_tgt, plan.batch_size)  # (n, d_tgt), (n,)
        _, ref_pred = _observe(m_ref, x_prime, tap_ref, plan.batch_size)  # (n,)
    value = _measure(fn, tgt_rep, tgt_rep_prime, plan.measure, label, notes)
    return value, (ref_pred == tgt_pred).double().mean().item()


def _similarity(plan: Plan, names, ids, taps, rep1: Tensor, rep2: Tensor) -> SimilarityResult:
    notes: List[str] = []
    value = _measure(similarity.get(plan.measure), rep1, rep2, plan.measure, "similarity", notes)
    return SimilarityResult(names[0], names[1], ids[0], ids[1], taps[0], taps[1], plan.measure, plan.n, value, notes)


def _measure(fn, x: Tensor, y: Tensor, measure: str, label: str, notes: List[str]) -> float:
    """fn(x, y) for x (n, d1), y (n, d2) as a float; NaN + a note when undefined on this data.

    Identical inputs give the measure's identity value exactly (1; 0 for a distance) instead of
    1 - 1e-16: rounding in the normalisation would otherwise make "a model with itself" inexact.
    """
    try:
        value = float(fn(x, y))
    except ValueError as err:  # constant representation, NaN/Inf, too few samples: undefined here
        notes.append(f"{label}: {measure} undefined ({err})")
        return math.nan
    if not math.isfinite(value):
        notes.append(f"{label}: {measure} returned {value}")
        return math.nan
    if x.shape == y.shape and torch.equal(x, y):
        return 0.0 if similarity.is_distance(measure) else 1.0
    return value


def _summary(run: InversionResult) -> Dict[str, Any]:
    """What IRI quality needs from one draw: residual (n,), target distance (n,) or None, cost."""
    m2 = run.m2_distance
    return {"residual": run.residual.detach().double().cpu(), "fraction_iri": run.fraction_iri,
            "evaluations": run.evaluations, "target_distance": None if m2 is None else m2.detach().double().cpu(),
            "snapshot_residual": {t: r.detach().double().cpu() for t, r in run.snapshot_residual.items()}}


def _quality(runs: List[Dict[str, Any]]) -> Dict[str, float]:
    """IRI quality over k draws (``_summary`` each): medians pooled over the n * k inversions,
    the fraction within tolerance per draw (mean, std), model evaluations spent."""
    fractions = Stat.from_values([r["fraction_iri"] for r in runs])
    quality = {
        "median_residual": torch.cat([r["residual"] for r in runs]).quantile(0.5).item(),  # over (n * k,)
        "fraction_iri": fractions.mean,
        "fraction_iri_std": fractions.std,
        "evaluations": float(sum(r["evaluations"] for r in runs)),
    }
    if all(r["target_distance"] is not None for r in runs):
        quality["median_target_distance"] = torch.cat([r["target_distance"] for r in runs]).quantile(0.5).item()
    return quality


def _observe(model: nn.Module, x: Tensor, tap: str, batch_size: int) -> Tuple[Tensor, Tensor]:
    """The representation at ``tap`` (n, d) and the predicted class argmax of the output (n,).

    Call under ``torch.no_grad()`` with the model frozen; runs in chunks of ``batch_size`` images.
    """
    has_logits_tap = LOGITS in tap_names(model)
    reps, preds = [], []
    for s in range(0, x.shape[0], batch_size):
        chunk = x[s:s + batch_size]
        if has_logits_tap:  # one forward pass reads both
            out = representations(model, chunk, [tap, LOGITS])
            rep, logits = out[tap], out[LOGITS]
        else:
            rep, logits = representation(model, chunk, tap), model(chunk)
        reps.append(rep)
        preds.append(logits.flatten(1).argmax(dim=1))
    return torch.cat(reps), torch.cat(preds)


def _check_models(images: Tensor, models: List[Tuple[str, nn.Module, str]]) -> None:
    """Fail early and clearly: each model must live on the images' device, know its tap and take
    one image of this shape (an unknown tap raises stir.models' ValueError listing the valid taps)."""
    one = images[:1].detach()
    for name, model, tap in models:
        device = next((t.device for t in itertools.chain(model.parameters(), model.buffers())), None)
        if device is not None and device != images.device:
            raise ValueError(f"model {name!r} is on {device} but the images are on {images.device}; move it there")
        with frozen(model), torch.no_grad():
            try:
                _observe(model, one, tap, 1)
            except RuntimeError as err:  # shape / dtype mismatch inside the network
                raise ValueError(
                    f"model {name!r} cannot take images of shape {tuple(images.shape[1:])} "
                    f"(dtype {images.dtype}): {err}"
                ) from err


# ----------------------------------------------------------------------------------------------
# Store and combination
# ----------------------------------------------------------------------------------------------


def identities(ids: Optional[Sequence[str]], m1: nn.Module, m2: nn.Module) -> Tuple[str, str]:
    """The two models' identities in store keys: ``ids`` when given, else their content hashes."""
    return tuple(ids) if ids is not None else (model_fingerprint(m1), model_fingerprint(m2))


def _lookup(store: Optional[ResultStore], kind: str, key: str, parse: Callable[[Dict[str, Any]], Any]):
    if store is None:
        return None
    entry = store.get(kind, key, validate=parse)
    return None if entry is None else parse(entry["result"])


def _save(store: Optional[ResultStore], kind: str, key: str, result, record: Optional[Dict[str, Any]]) -> None:
    if store is not None:
        store.put(kind, key, result.to_dict(), record)


def _combine(plan: Plan, names, ids, taps, sim: SimilarityResult, directions: Dict[str, DirectionResult]) -> PairResult:
    """PairResult from the plain similarity and the requested directions ("m2|m1", "m1|m2")."""
    d21, d12 = directions.get("m2|m1"), directions.get("m1|m2")

    def pick(d: Optional[DirectionResult], name: str) -> Optional[Stat]:
        return None if d is None else getattr(d, name)

    notes = [f"similarity: {n}" for n in sim.notes]
    for label, d in directions.items():
        notes += [f"{label}: {n}" for n in d.notes]
    return PairResult(
        ref=names[0], target=names[1], ref_id=ids[0], target_id=ids[1], tap_ref=taps[0], tap_target=taps[1],
        measure=plan.measure, n=plan.n, k=plan.k, iri=plan.iri, similarity=sim.value,
        stir_m2_given_m1=pick(d21, "stir"), stir_m1_given_m2=pick(d12, "stir"),
        stir_adv_m2_given_m1=pick(d21, "stir_adv"), stir_adv_m1_given_m2=pick(d12, "stir_adv"),
        agreement_on_m1_iris=pick(d21, "agreement"), agreement_on_m2_iris=pick(d12, "agreement"),
        difficulty_m2_given_m1=pick(d21, "difficulty"), difficulty_m1_given_m2=pick(d12, "difficulty"),
        difficulty_fraction_m2_given_m1=pick(d21, "difficulty_fraction"),
        difficulty_fraction_m1_given_m2=pick(d12, "difficulty_fraction"),
        quality={label: d.quality for label, d in directions.items()},
        convergence={label: d.convergence for label, d in directions.items()},
        notes=notes, settings=plan.settings,
    )
