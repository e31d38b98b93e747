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

from typing import Any, Dict, Optional, Sequence, Tuple

from torch import nn

from stir.inversion import ExecutionConfig
from stir.measure.call import open_call
from stir.measure.direction import direction_of
from stir.measure.observe import check_models, observe
from stir.measure.plan import DEFAULT_TAP, Estimator, Images
from stir.measure.results import DIRECTIONS, PairResult
from stir.measure.similarity import similarity_of
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
    unknown = [d for d in directions if d not in DIRECTIONS]
    if unknown or not directions:
        raise ValueError(f"directions must be a non-empty subset of {DIRECTIONS}, got {list(directions)}")
    models, taps = (m1, m2), (tap1, tap2 or tap1)
    call = open_call(m1, m2, images, estimator, run, names, ids, store, record, taps=taps)
    reps = {}

    def representations():  # (n, d_i) of both models on X, once, for whatever is computed
        if not reps:
            check_models(call.plan.images, [(names[0], m1, taps[0]), (names[1], m2, taps[1])],
                         differentiated=[names[ROLES[d][0]] for d in directions])  # each direction inverts its ref
            reps.update({i: observe(models[i], call.plan.images, taps[i], call.plan.batch_size)[0] for i in (0, 1)})
        return reps[0], reps[1]

    sim = similarity_of(call, models, taps, reps=representations)
    found = {}
    for d in directions:  # "m1|m2" is the same call with the roles exchanged
        r, t = ROLES[d]
        found[d] = direction_of(call if d == "m2|m1" else call.reversed(), (models[r], models[t]), (taps[r], taps[t]),
                                target_rep=lambda t=t: representations()[t])
    return PairResult(similarity=sim, directions=found)
