"""What every ``evaluate_*`` call shares, opened once: the checked plan, the two models' display names
and identities, whether one of them is not finite, the store and the provenance record.

``evaluate_direction``, ``evaluate_similarity``, ``evaluate_pair`` and ``evaluate_layers`` take the same
arguments (two models, images, an estimator, how the work runs, names, identities, a store, a record);
``open_call`` turns them into one ``Call``, and each measurement is a function of a ``Call``
(``stir.measure.direction.direction_of``, ``stir.measure.similarity.similarity_of``). A pair is the
similarity and two directions of one ``Call`` (the second direction reads it ``reversed()``).
"""
from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from torch import Tensor, nn

from stir.inversion import ExecutionConfig
from stir.measure.plan import Estimator, Images, Plan, make_plan
from stir.measure.observe import check_models
from stir.measure.undefined import NonFiniteOnImagesError, nonfinite_models
from stir.models.behaviour import (Fingerprint, Fingerprints, check_batch_independent, difference, fingerprint,
                                   probe_batch, probe_key, probe_taps, remember_variant, variant_identity)
from stir.models.identity import content_identity
from stir.models.taps import LOGITS
from stir.store import ResultStore

log = logging.getLogger(__name__)


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
              record: Optional[Dict[str, Any]] = None, taps: Tuple[str, str] = (LOGITS, LOGITS)) -> Call:
    """Check the images and settings (``make_plan``), hash the models unless ``ids`` are given, probe
    both for non-finite weights or outputs (``stir.measure.undefined``), then for what they compute
    (``behaviour_ids``: a batch-coupled model is refused; ids become those of the behaviour seen)."""
    plan = make_plan(images, estimator, run)
    ids = tuple(ids) if ids is not None else (content_identity(m1), content_identity(m2))
    broken = nonfinite_models(plan, [(names[0], m1), (names[1], m2)], taps)
    config = (record or {}).get("config") or {}
    if broken is not None and "allow_nonfinite" in config:  # evaluate.py: say the setting as it was, not as if set
        if not config["allow_nonfinite"]:  # refused, as the load check refuses: one line, exit 2, nothing reported
            raise NonFiniteOnImagesError(f"{broken}; its load check, on noise images, passed it. Fix the model, or "
                                         f"pass allow_nonfinite=true to report every number of it as NaN")
        broken += " (allow_nonfinite=true)"
    if broken is None:
        ids = behaviour_ids(plan, (m1, m2), tuple(names), ids, taps, store)
    return Call(plan, tuple(names), ids, broken, store, record)


def behaviour_ids(plan: Plan, models: Tuple[nn.Module, nn.Module], names: Tuple[str, str], ids: Tuple[str, str],
                  taps: Tuple[str, str], store: Optional[ResultStore]) -> Tuple[str, str]:
    """The identities the store and the inversion cache key the two models by (``stir.models.behaviour``):
    each model's fingerprint at its tap and the logits on the probe batch, read at once and one image
    at a time (``BatchCoupledError`` when they differ), matched against the fingerprints its static
    identity had before (the store's, after the shipped ones; the inversion cache folder's without a
    store): the first keeps ``ids``, another gets its variant's identity and one line says why."""
    registry = store.fingerprints() if store is not None else Fingerprints(
        Path(plan.run.cache_dir) / "fingerprints" if plan.run.cache_dir else None)
    return tuple(behaviour_id(model, name, static, plan.images, tap, registry)
                 for model, name, static, tap in zip(models, names, ids, taps))


def behaviour_id(model: nn.Module, name: str, static: str, images: Tensor, tap: str, registry: Fingerprints) -> str:
    """The identity ``model`` is keyed by: ``static`` while it computes what it computed when
    ``static`` was first probed (``registry``), else its behaviour variant's (``behaviour_ids``)."""
    probe_images = probe_batch(images.shape[1:], images.device, images.dtype)
    read = probe_taps(model, [tap])
    probe = probe_key(probe_images, read)
    seen = _SEEN.get(model, {}).get((static, probe, registry.key))
    if seen is not None:  # probed before in this process: one read of the batch, compared with what it gave then
        again = fingerprint(model, probe_images, read, probe_images.shape[0])
        if difference(again, seen[1]) is None:
            return seen[0]
    try:
        found = check_batch_independent(model, name, probe_images, read)
    except (RuntimeError, AssertionError, IndexError, TypeError):  # a model that cannot take these images, ...
        check_models(images, [(name, model, tap)])  # ... said in one line as a measurement would say it
        raise
    j, why = registry.variant(static, probe, found)
    if why is not None:
        log.warning("model %r computes otherwise than when its identity %s... was first measured (%s on the probe "
                    "batch: a module global, an environment variable, a hook or bytecode changed what it computes): "
                    "its results are measured again, as behaviour variant %d", name, static[:12], why, j)
    remember_variant(model, content_identity(model) if j else None, f"{probe}|{j}" if j else None)
    identity = static if j == 0 else variant_identity(static, probe, j)
    _SEEN.setdefault(model, {})[(static, probe, registry.key)] = (identity, found)
    return identity


# What each module's last full probe found, per (static identity, probe, fingerprint folders): a later
# call reads the probe batch once (not once more per image) and reuses the identity when it matches.
_SEEN: "weakref.WeakKeyDictionary[nn.Module, Dict[Tuple[str, str, str], Tuple[str, Fingerprint]]]" = \
    weakref.WeakKeyDictionary()
