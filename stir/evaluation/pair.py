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

Efficiency: arbitrary IRIs of m1 depend only on (m1, tap1, X, seed, settings); the k draws are
requested together as ``invert_draws(m1, [X_1..X_k], tap1, cfg, m2=m2, tap2=tap2)`` (one batch where
it fits), whose per-draw cache keys ignore m2 (m2 is only measured), so with ``inversion.cache_dir``
set one inversion per draw serves every target. The targets'
representations of X are computed once per call, not per draw. Every measurement runs under
``torch.no_grad()`` with both models frozen in eval mode (``stir.models.frozen``); the inversions
manage their own gradients. Devices and dtypes follow the images; models must already live there.

Undefined values (e.g. a constant representation: the measure raises ValueError) are NaN with a
reason in ``notes``; every other error propagates.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, Optional, Sequence, Tuple

import torch
from torch import nn

from stir.evaluation.direction import _direction, evaluate_direction
from stir.evaluation.keys import (
    DEFAULT_TAP, DIRECTION, SIMILARITY, Images, Plan, direction_key, computed, identities, lookup, make_plan, plan_for, similarity_key,
)
from stir.evaluation.observe import check_models, observe
from stir.evaluation.results import DIRECTIONS, DirectionResult, PairResult, SimilarityResult, Stat
from stir.evaluation.similarity import _similarity, evaluate_similarity
from stir.evaluation.store import ResultStore
from stir.inversion import InversionConfig
from stir.inversion.config import ControversialConfig
from stir.models import frozen

log = logging.getLogger(__name__)

__all__ = [  # the pair API, and the per-direction and similarity functions it combines
    "DEFAULT_TAP", "DIRECTIONS", "Plan", "direction_key", "evaluate_direction", "evaluate_pair",
    "evaluate_similarity", "identities", "make_plan", "similarity_key",
]


def evaluate_pair(
    m1: nn.Module,
    m2: nn.Module,
    images: Images,
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
    plan = plan_for(images, measure, k, iri, inversion, difficulty)
    ids = identities(ids, m1, m2)
    # Each direction as (ref, target) indices into the pair: "m2|m1" = IRIs of model 0, measured on model 1.
    roles = {"m2|m1": (0, 1), "m1|m2": (1, 0)}
    models, taps = (m1, m2), (tap1, tap2)

    keys = {d: direction_key(plan, (ids[r], ids[t]), (taps[r], taps[t])) for d, (r, t) in roles.items() if d in directions}
    sim_key = similarity_key(plan, ids, taps)
    sim = lookup(store, SIMILARITY, sim_key, SimilarityResult.from_dict)
    # By key, in order: a self pair (same identity and tap) has one key for both directions.
    by_key = {key: lookup(store, DIRECTION, key, DirectionResult.from_dict) for key in dict.fromkeys(keys.values())}

    if sim is None or any(v is None for v in by_key.values()):
        check_models(plan.images, [(names[0], m1, tap1), (names[1], m2, tap2)])
        with frozen(m1, m2), torch.no_grad():
            reps = [observe(m, plan.images, tap, plan.batch_size)[0] for m, tap in zip(models, taps)]  # (n, d_i) once
        if sim is None:
            sim = computed(store, SIMILARITY, sim_key, SimilarityResult.from_dict, record,
                           lambda: _similarity(plan, names, ids, taps, reps[0], reps[1]))
        for d in directions:
            if by_key[keys[d]] is None:
                r, t = roles[d]
                by_key[keys[d]] = computed(
                    store, DIRECTION, keys[d], DirectionResult.from_dict, record,
                    lambda: _direction(models[r], models[t], taps[r], taps[t], plan, (names[r], names[t]),
                                       (ids[r], ids[t]), tgt_rep=None if plan.resampled else reps[t]))
    return _combine(plan, names, ids, taps, sim, {d: by_key[keys[d]] for d in directions})


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
