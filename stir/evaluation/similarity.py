"""The plain similarity S_r(m1(X), m2(X)) of two models at their taps, over all n images."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor, nn

from stir import similarity
from stir.evaluation.keys import DEFAULT_TAP, SIMILARITY, Images, Plan, computed, identities, lookup, plan_for, similarity_key
from stir.evaluation.observe import check_models, measure_value, observe
from stir.evaluation.results import SimilarityResult
from stir.evaluation.store import ResultStore
from stir.models import frozen

def evaluate_similarity(
    m1: nn.Module,
    m2: nn.Module,
    images: Images,
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
    plan = plan_for(images, measure, 1, "arbitrary", None)
    ids = identities(ids, m1, m2)
    key = similarity_key(plan, ids, (tap1, tap2))
    result = lookup(store, SIMILARITY, key, SimilarityResult.from_dict)
    if result is None:
        check_models(plan.images, [(names[0], m1, tap1), (names[1], m2, tap2)])
        with frozen(m1, m2), torch.no_grad():
            rep1 = observe(m1, plan.images, tap1, plan.batch_size)[0]
            rep2 = observe(m2, plan.images, tap2, plan.batch_size)[0]
        result = computed(store, SIMILARITY, key, SimilarityResult.from_dict, record,
                          lambda: _similarity(plan, names, ids, (tap1, tap2), rep1, rep2))
    return replace(result, ref=names[0], target=names[1])


def _similarity(plan: Plan, names, ids, taps, rep1: Tensor, rep2: Tensor) -> SimilarityResult:
    notes: List[str] = []
    value = measure_value(similarity.get(plan.measure), rep1, rep2, plan.measure, "similarity", notes)
    return SimilarityResult(names[0], names[1], ids[0], ids[1], taps[0], taps[1], plan.measure, plan.n, value, notes)
