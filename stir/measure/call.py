"""What every ``evaluate_*`` call shares, opened once: the checked plan, the two models' display names
and identities, whether one of them is not finite, the store and the provenance record.

``evaluate_direction``, ``evaluate_similarity``, ``evaluate_pair`` and ``evaluate_layers`` take the same
arguments (two models, images, an estimator, how the work runs, names, identities, a store, a record);
``open_call`` turns them into one ``Call``, and each measurement is a function of a ``Call``
(``stir.measure.direction.direction_of``, ``stir.measure.similarity.similarity_of``). A pair is the
similarity and two directions of one ``Call`` (the second direction reads it ``reversed()``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from torch import nn

from stir.inversion import ExecutionConfig
from stir.measure.plan import Estimator, Images, Plan, make_plan
from stir.measure.undefined import nonfinite_models
from stir.models.identity import content_identity
from stir.store import ResultStore


@dataclass(frozen=True)
class Call:
    """One evaluate_* call's checked inputs, in the order (reference, target) / (m1, m2)."""

    plan: Plan
    names: Tuple[str, str]  # display names: tables, notes, logs
    ids: Tuple[str, str]  # content identities: what the store keys hold
    broken: Optional[str]  # why no number can be made (a model is not finite), else None
    store: Optional[ResultStore] = None  # given: each result is looked up first, saved once computed
    record: Optional[Dict[str, Any]] = None  # provenance stored beside each result

    def reversed(self) -> "Call":
        """The same call with the two models' roles exchanged (the other direction of a pair)."""
        return Call(self.plan, self.names[::-1], self.ids[::-1], self.broken, self.store, self.record)


def open_call(m1: nn.Module, m2: nn.Module, images: Images, estimator: Optional[Estimator] = None,
              run: Optional[ExecutionConfig] = None, names: Tuple[str, str] = ("m1", "m2"),
              ids: Optional[Tuple[str, str]] = None, store: Optional[ResultStore] = None,
              record: Optional[Dict[str, Any]] = None) -> Call:
    """Check the images and settings (``make_plan``), hash the models unless ``ids`` are given, and
    probe both for non-finite weights or outputs (``stir.measure.undefined``)."""
    plan = make_plan(images, estimator, run)
    ids = tuple(ids) if ids is not None else (content_identity(m1), content_identity(m2))
    broken = nonfinite_models(plan, [(names[0], m1), (names[1], m2)])
    return Call(plan, tuple(names), ids, broken, store, record)
