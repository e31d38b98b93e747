"""The plain similarity S_r(m1(X), m2(X)) of two models at their taps, over all n images."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Dict, List, Optional, Tuple

from torch import Tensor, nn

from stir import similarity
from stir.inversion import ExecutionConfig
from stir.measure.call import Call, open_call
from stir.measure.observe import check_models, measure_value, observe
from stir.measure.plan import DEFAULT_TAP, SIMILARITY, Estimator, Images, Plan, similarity_parts
from stir.measure.results import SimilarityResult
from stir.measure.undefined import undefined_similarity
from stir.store import ResultStore


def evaluate_similarity(
    m1: nn.Module,
    m2: nn.Module,
    images: Images,
    tap1: str = DEFAULT_TAP,
    tap2: Optional[str] = None,
    measure: str = "linear_cka",
    *,
    run: Optional[ExecutionConfig] = None,
    names: Tuple[str, str] = ("m1", "m2"),
    ids: Optional[Tuple[str, str]] = None,
    store: Optional[ResultStore] = None,
    record: Optional[Dict[str, Any]] = None,
) -> SimilarityResult:
    """Plain similarity S_r(m1(X), m2(X)) at (tap1, tap2) over all n images, both models in eval mode.

    Identical representations give the measure's identity value exactly (1, or 0 for a distance).
    """
    taps = (tap1, tap2 or tap1)
    call = open_call(m1, m2, images, Estimator(measure=measure, k=1, iri="arbitrary"), run, names, ids, store, record,
                     taps=taps)
    return similarity_of(call, (m1, m2), taps)


def similarity_of(call: Call, models: Tuple[nn.Module, nn.Module], taps: Tuple[str, str],
                  reps: Optional[Callable[[], Tuple[Tensor, Tensor]]] = None) -> SimilarityResult:
    """``S_r(models[0](X), models[1](X))`` of ``call``: the stored result, or measured (and stored).

    ``reps``: a function giving both representations of X ((n, d1), (n, d2)) when the caller computes
    them for other results too and has checked both models (``evaluate_pair``).
    """
    plan, names, ids = call.plan, call.names, call.ids
    if call.broken is not None:  # no number from a model that is not finite (stir.measure.undefined)
        return undefined_similarity(plan, names, ids, taps, call.broken)

    def compute() -> SimilarityResult:
        if reps is not None:
            return measure_similarity(plan, names, ids, taps, *reps())
        check_models(plan.images, [(names[0], models[0], taps[0]), (names[1], models[1], taps[1])])
        rep1 = observe(models[0], plan.images, taps[0], plan.batch_size)[0]
        rep2 = observe(models[1], plan.images, taps[1], plan.batch_size)[0]
        return measure_similarity(plan, names, ids, taps, rep1, rep2)

    if call.store is None:
        return compute()
    result = call.store.cached(SIMILARITY, similarity_parts(plan, ids, taps), compute, SimilarityResult.from_dict,
                               call.record)
    # The stored result may have been computed with the pair the other way round (a symmetric key):
    # names, identities and taps follow the order asked for, not the stored one.
    return replace(result, ref=names[0], target=names[1], ref_id=ids[0], target_id=ids[1], tap_ref=taps[0],
                   tap_target=taps[1])


def measure_similarity(plan: Plan, names: Tuple[str, str], ids: Tuple[str, str], taps: Tuple[str, str],
                       rep1: Tensor, rep2: Tensor) -> SimilarityResult:
    """S_r(rep1, rep2) as a ``SimilarityResult`` (NaN with the reason when undefined)."""
    notes: List[str] = []
    value = measure_value(similarity.get(plan.measure), rep1, rep2, plan.measure, "similarity", notes)
    return SimilarityResult(names[0], names[1], ids[0], ids[1], taps[0], taps[1], plan.measure, plan.n, value, notes)
