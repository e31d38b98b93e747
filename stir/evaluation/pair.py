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
    difficulty(m2|m1)      = mean_i ||x_i - x_c,i||_2, x_c the adversarial IRIs above (appendix C)

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

import itertools
import logging
import math
from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from stir import similarity
from stir.evaluation.results import DIRECTIONS, IRI_KINDS, DirectionResult, PairResult, SimilarityResult, Stat
from stir.evaluation.store import ResultStore
from stir.inversion import InversionConfig, InversionResult, invert, invert_adversarial, model_fingerprint
from stir.inversion.cache import tensor_digest
from stir.inversion.objectives import ADVERSARIAL_OBJECTIVE, resolve_forward
from stir.models import frozen, representation, representations, tap_names

log = logging.getLogger(__name__)

DEFAULT_TAP = "penultimate"
LOGITS = "logits"
DIRECTION, SIMILARITY = "direction", "similarity"  # the store's kinds

# InversionConfig fields that cannot change a reported number: where/how fast it runs, logging.
# channels_last changes x' only at the level of floating-point rounding (as in the inversion cache).
_NOT_RESULT_SETTINGS = frozenset({"cache_dir", "progress", "warn_below", "batch_size", "channels_last"})


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
    names: Tuple[str, str] = ("ref", "target"),
    ids: Optional[Tuple[str, str]] = None,
    store: Optional[ResultStore] = None,
    record: Optional[Dict[str, Any]] = None,
) -> DirectionResult:
    """STIR(tgt|ref) (eq. 6), STIR_adv(tgt|ref) (eq. 7), agreement on ref's IRIs, difficulty, quality.

    Args:
        m_ref, m_tgt: models taking (n, c, h, w) images in [0, 1], on the images' device.
        images: X, (n, c, h, w) in [0, 1].
        tap_ref, tap_tgt: where each model is read (``stir.models.tap_names``); tap_tgt defaults to tap_ref.
        measure: a ``stir.similarity`` name.  k: seed draws (seeds ``inversion.seed + j``).
        iri: "arbitrary" (STIR, agreement) | "adversarial" (STIR_adv, difficulty) | "both".
        inversion: the engine's settings (default ``InversionConfig()``); set ``cache_dir`` to reuse
            the reference's arbitrary IRIs across targets.
        names: display names.  ids: identities for the store key (default ``model_fingerprint``).
        store: if given, the result is looked up first and saved the moment it is computed.
        record: provenance stored beside the result (resolved config, checkpoint paths, ...).
    """
    tap_tgt = tap_tgt or tap_ref
    plan = _plan(images, measure, k, iri, inversion)
    ids = identities(ids, m_ref, m_tgt)
    key = direction_key(plan, ids, (tap_ref, tap_tgt))
    result = _lookup(store, DIRECTION, key, DirectionResult.from_dict)
    if result is None:
        _check_models(images, [(names[0], m_ref, tap_ref), (names[1], m_tgt, tap_tgt)])
        result = _computed(store, DIRECTION, key, DirectionResult.from_dict, record,
                           lambda: _direction(m_ref, m_tgt, tap_ref, tap_tgt, plan, names, ids))
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
        _check_models(images, [(names[0], m1, tap1), (names[1], m2, tap2)])
        with frozen(m1, m2), torch.no_grad():
            rep1 = _observe(m1, images, tap1, plan.batch_size)[0]
            rep2 = _observe(m2, images, tap2, plan.batch_size)[0]
        result = _computed(store, SIMILARITY, key, SimilarityResult.from_dict, record,
                           lambda: _similarity(plan, names, ids, (tap1, tap2), rep1, rep2))
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
    plan = _plan(images, measure, k, iri, inversion)
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
        _check_models(images, [(names[0], m1, tap1), (names[1], m2, tap2)])
        with frozen(m1, m2), torch.no_grad():
            reps = [_observe(m, images, tap, plan.batch_size)[0] for m, tap in zip(models, taps)]  # (n, d_i) once
        if sim is None:
            sim = _computed(store, SIMILARITY, sim_key, SimilarityResult.from_dict, record,
                            lambda: _similarity(plan, names, ids, taps, reps[0], reps[1]))
        for d in directions:
            if by_key[keys[d]] is None:
                r, t = roles[d]
                by_key[keys[d]] = _computed(
                    store, DIRECTION, keys[d], DirectionResult.from_dict, record,
                    lambda: _direction(models[r], models[t], taps[r], taps[t], plan, (names[r], names[t]),
                                       (ids[r], ids[t]), tgt_rep=reps[t]))
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

    images: Tensor  # (n, c, h, w) in [0, 1]
    digest: str  # sha256 of the images' dtype, shape and bytes
    measure: str
    k: int
    iri: str
    cfg: InversionConfig
    inversion: Dict[str, Any]

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
    def settings(self) -> Dict[str, Any]:
        return {"inversion": self.inversion, "seed": self.cfg.seed,
                "seeds": [self.cfg.seed + j for j in range(self.k)], "measure": self.measure}


def make_plan(
    images: Tensor, measure: str = "linear_cka", k: int = 5, iri: str = "both", inversion: Optional[InversionConfig] = None
) -> Plan:
    """Validate the arguments and resolve the settings (what ``evaluate_*`` do first)."""
    return _plan(images, measure, k, iri, inversion)


def direction_key(plan: Plan, ids: Tuple[str, str], taps: Tuple[str, str]) -> str:
    """Store key of the direction (target ids[1] at taps[1]) given (reference ids[0] at taps[0])."""
    return ResultStore.key(
        kind=DIRECTION, ref=[ids[0], taps[0]], target=[ids[1], taps[1]], images=plan.digest, n=plan.n,
        measure=plan.measure, k=plan.k, iri=plan.iri, inversion=plan.inversion,
    )


def similarity_key(plan: Plan, ids: Tuple[str, str], taps: Tuple[str, str]) -> str:
    """Store key of S_r(m1(X), m2(X)); for a symmetric measure the order of the models is ignored."""
    models = [[ids[0], taps[0]], [ids[1], taps[1]]]
    if similarity.is_symmetric(plan.measure):
        models = sorted(models)
    return ResultStore.key(kind=SIMILARITY, models=models, images=plan.digest, n=plan.n, measure=plan.measure)


def _plan(images: Tensor, measure: str, k: int, iri: str, inversion: Optional[InversionConfig]) -> Plan:
    if not isinstance(images, Tensor) or images.dim() != 4 or images.shape[0] == 0:
        raise ValueError(f"images must be a non-empty (n, c, h, w) tensor, got {getattr(images, 'shape', type(images))}")
    if not images.dtype.is_floating_point:
        raise ValueError(f"images must be floating point in [0, 1], got dtype {images.dtype}")
    lo, hi = images.min().item(), images.max().item()
    if lo < 0 or hi > 1:
        raise ValueError(f"images must lie in [0, 1] (models normalise internally), got range [{lo:.3g}, {hi:.3g}]")
    similarity.get(measure)  # unknown name: ValueError listing the valid ones
    if iri not in IRI_KINDS:
        raise ValueError(f"iri must be one of {IRI_KINDS}, got {iri!r}")
    if int(k) != k or k < 1:
        raise ValueError(f"k (seed draws) must be a positive integer, got {k!r}")
    cfg = inversion or InversionConfig()
    settings = {f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name not in _NOT_RESULT_SETTINGS}
    settings.update(steps=cfg.num_steps, precision=_precision_name(cfg, images.device), betas=list(cfg.betas))
    if iri == "arbitrary":
        del settings["adversarial_weight"]  # read by adversarial IRIs only
    else:
        settings["adversarial_objective"] = ADVERSARIAL_OBJECTIVE
    images = images.detach()
    return Plan(images, tensor_digest(images), measure, int(k), iri, cfg, settings)


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
    """One direction, tgt given ref, over k draws; ``tgt_rep`` = tgt(X) (n, d) if already computed."""
    log.info("STIR(%s|%s) at (%s, %s): %s IRIs, k=%d, n=%d", names[1], names[0], tap_ref, tap_tgt,
             plan.iri, plan.k, plan.n)
    images, fn = plan.images, similarity.get(plan.measure)
    if tgt_rep is None:
        with frozen(m_tgt), torch.no_grad():
            tgt_rep = _observe(m_tgt, images, tap_tgt, plan.batch_size)[0]  # tgt(X): (n, d_tgt), once
    notes: List[str] = []
    stir, agreement, arbitrary_runs = [], [], []
    stir_adv, difficulty, adversarial_runs = [], [], []
    # Adversarial IRIs of a model against itself (same identity and tap) are undefined: the push
    # term cancels the match term exactly, the objective is 0 and x' never leaves its seed.
    self_pair = (m_ref is m_tgt or ids[0] == ids[1]) and tap_ref == tap_tgt
    for j in range(plan.k):
        cfg_j = replace(plan.cfg, seed=plan.cfg.seed + j)  # draw j: X'_j from seed base + j
        label = f"draw {j} (seed {cfg_j.seed})"
        if plan.arbitrary:
            # m_tgt is only measured (m2_distance): the engine's cache key ignores it.
            run = invert(m_ref, images, tap_ref, cfg_j, m2=m_tgt, tap2=tap_tgt)
            value, agree = _stir_draw(m_ref, m_tgt, tap_ref, tap_tgt, tgt_rep, run.x_prime, fn, plan, f"STIR {label}", notes)
            stir.append(value)
            agreement.append(agree)
            arbitrary_runs.append(_summary(run))  # not the run: its x' (n, c, h, w) is done with
        if plan.adversarial and not self_pair:
            run = invert_adversarial(m_ref, m_tgt, images, tap_ref, tap_tgt, cfg_j)
            value, _ = _stir_draw(m_ref, m_tgt, tap_ref, tap_tgt, tgt_rep, run.x_prime, fn, plan, f"STIR_adv {label}", notes)
            stir_adv.append(value)
            difficulty.append(run.l2_to_original.mean().item())  # mean_i ||x_i - x_c,i||_2
            adversarial_runs.append(_summary(run))
    if plan.adversarial and self_pair:
        notes.append("STIR_adv and difficulty: undefined for a model against itself at the same tap "
                     "(adversarial IRIs would match and push away the same representation)")
        stir_adv = difficulty = [math.nan] * plan.k

    quality = {}
    if arbitrary_runs:
        quality["arbitrary"] = _quality(arbitrary_runs)
    if adversarial_runs:
        quality["adversarial"] = _quality(adversarial_runs)
    for kind, q in quality.items():  # X' that are not IRIs still count in STIR: say how many
        if q["fraction_iri"] < plan.cfg.warn_below:
            notes.append(f"{kind} IRIs: only {q['fraction_iri']:.0%} within tolerance {plan.cfg.tolerance:g} "
                         f"(median residual {q['median_residual']:.3g}); raise inversion.steps for a cleaner STIR")
    return DirectionResult(
        ref=names[0], target=names[1], ref_id=ids[0], target_id=ids[1], tap_ref=tap_ref, tap_target=tap_tgt,
        measure=plan.measure, n=plan.n, k=plan.k, iri=plan.iri,
        stir=Stat.from_values(stir) if plan.arbitrary else None,
        stir_adv=Stat.from_values(stir_adv) if plan.adversarial else None,
        agreement=Stat.from_values(agreement) if plan.arbitrary else None,
        difficulty=Stat.from_values(difficulty) if plan.adversarial else None,
        quality=quality, notes=notes, settings=plan.settings,
    )


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
            "evaluations": run.evaluations, "target_distance": None if m2 is None else m2.detach().double().cpu()}


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


def _computed(store: Optional[ResultStore], kind: str, key: str, parse: Callable[[Dict[str, Any]], Any],
              record: Optional[Dict[str, Any]], compute: Callable[[], Any]):
    """``compute()`` saved under ``key``, unless another process stored it meanwhile.

    Under the store's lock of ``key``: a second process needing the same result waits for the
    first, then reads its entry instead of computing it again.
    """
    if store is None:
        return compute()
    with store.lock(kind, key):
        entry = store.get(kind, key, validate=parse, recheck=True)
        result = None if entry is None else parse(entry["result"])
        if result is None:
            result = compute()
            _save(store, kind, key, result, record)
    return result


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
        quality={label: d.quality for label, d in directions.items()},
        notes=notes, settings=plan.settings,
    )
