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

Every STIR and STIR_adv value carries its calibration (``stir.measure.calibration``): the floor
S_r(m2(X), m2(X)[pi]) (no shared invariance at this n), the ceiling (the same procedure with m2 = m1,
an independent seed draw), the normalised value and a bootstrap interval over images and draws.

Convergence: every STIR value is also recorded along the inversion budget (``convergence``): at
each step t of ``inversion.snapshot_steps`` the best iterates so far give S_r(m2(X), m2(X'_t)),
with the median residual and the fraction of IRIs at t, so a user sees whether the value has
settled. Draws whose reference residuals are not finite, or with fewer IRIs than
``Estimator.min_fraction_iri``, give NaN with the reason: a STIR of failed inversions is not STIR.

Images: ``images`` is X (n, c, h, w), fixed for the k draws (the default: the paper's tables report
CKA +- 0.000 over draws, which only a fixed X gives), or a sequence of k such tensors, one per draw
(eq. 6 read literally: X resampled for each draw; ``resample_images=true`` in evaluate.py).

Argument order: S_r(m2(X), m2(X')), i.e. the representation of the original images first; it
matters only for asymmetric measures (``stir.similarity.is_symmetric``). The other direction,
STIR(m1|m2), inverts m2 and measures on m1.

Units of work (and of the results store): one *direction* "target given reference"
(``evaluate_direction``) and the plain *similarity* (``evaluate_similarity``, no direction).
``evaluate_pair`` combines two directions and the similarity; a zoo matrix calls
``evaluate_direction`` once per ordered pair, and both share store entries with a pair. Every
measurement runs without gradient with both models frozen in eval mode (``stir.models.frozen``);
the inversions manage their own gradients. Devices and dtypes follow the images; models must
already live there. Undefined values (e.g. a constant representation) are NaN with a reason in
``notes``; every other error propagates. A model that is not finite (a NaN or infinity in a weight,
a buffer or its outputs) gives NaN for every number, agreement and difficulty included, with the
reason (``stir.measure.undefined``).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, Optional, Sequence, Tuple

from torch import nn

from stir.inversion import ExecutionConfig
from stir.measure.direction import measure_direction
from stir.measure.observe import check_models, observe
from stir.measure.plan import (
    DEFAULT_TAP, DIRECTION, SIMILARITY, Estimator, Images, direction_parts, make_plan, similarity_parts,
)
from stir.measure.results import DIRECTIONS, DirectionResult, PairResult, SimilarityResult
from stir.measure.similarity import measure_similarity
from stir.measure.undefined import nonfinite_models, undefined_direction, undefined_similarity
from stir.models.identity import content_identity
from stir.store import ResultStore

# Each direction as (reference, target) indices into the pair: "m2|m1" = IRIs of model 0, measured on model 1.
ROLES = {"m2|m1": (0, 1), "m1|m2": (1, 0)}


def evaluate_pair(
    m1: nn.Module,
    m2: nn.Module,
    images: Images,
    tap1: str = DEFAULT_TAP,
    tap2: Optional[str] = None,
    estimator: Optional[Estimator] = None,
    *,
    run: Optional[ExecutionConfig] = None,
    names: Tuple[str, str] = ("m1", "m2"),
    ids: Optional[Tuple[str, str]] = None,
    store: Optional[ResultStore] = None,
    directions: Sequence[str] = DIRECTIONS,
    record: Optional[Dict[str, Any]] = None,
) -> PairResult:
    """Both directions (``evaluate_direction``) and the plain similarity of m1 (reference) and m2.

    ``directions`` picks "m2|m1" (IRIs of m1, measured on m2) and/or "m1|m2". Arguments as in
    ``evaluate_direction``. Each direction and the similarity are separate store entries: a pair
    evaluation reuses (and feeds) the entries of a matrix evaluation with the same settings. The
    representations of X are computed once per call, and only when something is missing.
    """
    tap2 = tap2 or tap1
    unknown = [d for d in directions if d not in DIRECTIONS]
    if unknown or not directions:
        raise ValueError(f"directions must be a non-empty subset of {DIRECTIONS}, got {list(directions)}")
    plan = make_plan(images, estimator, run)
    ids = tuple(ids) if ids is not None else (content_identity(m1), content_identity(m2))
    models, taps = (m1, m2), (tap1, tap2)
    broken = nonfinite_models(plan, [(names[0], m1), (names[1], m2)])
    if broken is not None:  # no number from a model that is not finite (stir.measure.undefined)
        return PairResult(similarity=undefined_similarity(plan, names, ids, taps, broken), directions={
            d: undefined_direction(plan, (names[ROLES[d][0]], names[ROLES[d][1]]), (ids[ROLES[d][0]], ids[ROLES[d][1]]),
                                   (taps[ROLES[d][0]], taps[ROLES[d][1]]), broken) for d in directions})
    reps = {}

    def representations():  # (n, d_i) of both models on X, once, for whatever is computed
        if not reps:
            check_models(plan.images, [(names[0], m1, tap1), (names[1], m2, tap2)],
                         differentiated=[names[ROLES[d][0]] for d in directions])  # each direction inverts its ref
            reps.update({i: observe(models[i], plan.images, taps[i], plan.batch_size)[0] for i in (0, 1)})
        return reps

    def direction(d: str) -> DirectionResult:
        r, t = ROLES[d]
        compute = lambda: measure_direction(  # noqa: E731
            models[r], models[t], taps[r], taps[t], plan, (names[r], names[t]), (ids[r], ids[t]),
            tgt_rep=None if plan.resampled else representations()[t])
        if store is None:
            return compute()
        return store.cached(DIRECTION, direction_parts(plan, (ids[r], ids[t]), (taps[r], taps[t])), compute,
                            DirectionResult.from_dict, record)

    def similarity() -> SimilarityResult:
        compute = lambda: measure_similarity(plan, names, ids, taps, representations()[0], representations()[1])  # noqa: E731
        if store is None:
            return compute()
        return store.cached(SIMILARITY, similarity_parts(plan, ids, taps), compute, SimilarityResult.from_dict, record)

    sim = similarity()
    found = {d: direction(d) for d in directions}
    # A symmetric measure's stored result may be of the pair the other way round: its identities and
    # taps follow the order asked for too, not only its names.
    sim = replace(sim, ref_id=ids[0], target_id=ids[1], tap_ref=taps[0], tap_target=taps[1])
    return PairResult(similarity=_named(sim, names), directions={
        d: _named(found[d], (names[ROLES[d][0]], names[ROLES[d][1]])) for d in directions})


def _named(result, names: Tuple[str, str]):
    """A stored result under this call's display names (the store keeps the names it was made with)."""
    return replace(result, ref=names[0], target=names[1])
