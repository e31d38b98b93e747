"""The plain similarity S_r(m1(X), m2(X)) of two models at their taps, over all n images."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

from torch import Tensor, nn

from stir import similarity
from stir.inversion import ExecutionConfig
from stir.measure.observe import check_models, measure_value, observe
from stir.measure.plan import DEFAULT_TAP, SIMILARITY, Estimator, Images, Plan, make_plan, similarity_parts
from stir.measure.results import SimilarityResult
from stir.measure.undefined import nonfinite_models, undefined_similarity
from stir.models.identity import content_identity
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
    tap2 = tap2 or tap1
    plan = make_plan(images, Estimator(measure=measure, k=1, iri="arbitrary"), run)
    ids = tuple(ids) if ids is not None else (content_identity(m1), content_identity(m2))
    broken = nonfinite_models(plan, [(names[0], m1), (names[1], m2)])
    if broken is not None:  # no number from a model that is not finite (stir.measure.undefined)
        return undefined_similarity(plan, names, ids, (tap1, tap2), broken)

    def compute() -> SimilarityResult:
        check_models(plan.images, [(names[0], m1, tap1), (names[1], m2, tap2)])
        rep1 = observe(m1, plan.images, tap1, plan.batch_size)[0]
        rep2 = observe(m2, plan.images, tap2, plan.batch_size)[0]
        return measure_similarity(plan, names, ids, (tap1, tap2), rep1, rep2)

    if store is None:
        return compute()
    result = store.cached(SIMILARITY, similarity_parts(plan, ids, (tap1, tap2)), compute,
                          SimilarityResult.from_dict, record)
    # The stored result may have been computed with the pair the other way round (a symmetric key):
    # names, identities and taps follow the order asked for, not the stored one.
    return replace(result, ref=names[0], target=names[1], ref_id=ids[0], target_id=ids[1], tap_ref=tap1,
                   tap_target=tap2)


def measure_similarity(plan: Plan, names: Tuple[str, str], ids: Tuple[str, str], taps: Tuple[str, str],
                       rep1: Tensor, rep2: Tensor) -> SimilarityResult:
    """S_r(rep1, rep2) as a ``SimilarityResult`` (NaN with the reason when undefined)."""
    notes: List[str] = []
    value = measure_value(similarity.get(plan.measure), rep1, rep2, plan.measure, "similarity", notes)
    return SimilarityResult(names[0], names[1], ids[0], ids[1], taps[0], taps[1], plan.measure, plan.n, value, notes)
