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
from typing import Any, Dict, List, Optional, Tuple

from torch import Tensor, nn

from stir.inversion import ExecutionConfig
from stir.measure.plan import Estimator, Images, Plan, make_plan
from stir.measure.observe import check_models
from stir.measure.undefined import NonFiniteOnImagesError, nonfinite_models
from stir.models.behaviour import (PROBE_N, Fingerprint, Fingerprints, check_batch, difference, fingerprint_vjp,
                                   forward_part, probe_batch_size, probe_behaviour, probe_images, probe_key, probe_taps,
                                   remember_variant, run_probe_key, tiled, variant_identity)
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
    each model's fingerprint at its tap and the logits on the probe (the synthetic batch and the first
    images of X), read at once at the run's batch size with its input gradient and, for a few of its
    images, one image at a time (``BatchCoupledError`` when they differ), matched against the fingerprints its static identity had
    before (the store's, after the shipped ones; the inversion cache folder's without a store): the
    first keeps ``ids``, another gets its variant's identity and one line says why."""
    registry = store.fingerprints() if store is not None else Fingerprints(
        Path(plan.run.cache_dir) / "fingerprints" if plan.run.cache_dir else None)
    batch = run_batch(plan.run, plan.n * plan.k, plan.n)
    return tuple(behaviour_id(model, name, static, plan.images, tap, registry, batch)
                 for model, name, static, tap in zip(models, names, ids, taps))


def full_batch(run: ExecutionConfig, rows: int, readings: int) -> int:
    """The largest batch the run reads a model at: an inversion's (``execution.batch_size``; automatic: at
    most 128 rows of the n x k, in even chunks, as on the CPU) or a reading pass's (``execution.eval_batch``,
    at most the n images)."""
    inversion = run.batch_size if run.batch_size is not None else -(-rows // -(-rows // 128))
    return max(inversion, min(run.eval_batch_size, readings))


def run_batch(run: ExecutionConfig, rows: int, readings: int) -> int:
    """The batch the probe reads a model at: the run's largest (``full_batch``), bounded (``probe_batch_size``)."""
    return probe_batch_size(full_batch(run, rows, readings))


def check_run_batch(plan: Plan, models: Tuple[nn.Module, nn.Module], names: Tuple[str, str],
                    taps: Tuple[str, str]) -> None:
    """Before a measurement (a store miss): each model read at the run's full batch (``check_batch``) where
    that is above the probe's cap; the probe read it at every batch up to the cap already."""
    rows = full_batch(plan.run, plan.n * plan.k, plan.n)
    if rows <= probe_batch_size(rows):
        return
    probe = probe_images(plan.images)
    for model, name, tap in zip(models, names, taps):
        check_batch(model, name, probe, tap, rows)


def behaviour_id(model: nn.Module, name: str, static: str, images: Tensor, tap: str, registry: Fingerprints,
                 batch: int = PROBE_N) -> str:
    """The identity ``model`` is keyed by: ``static`` while it computes what it computed when
    ``static`` was first probed (``registry``) on the synthetic batch and on these ``images``' first
    ones, else its behaviour variant's (``behaviour_ids``); ``batch``: the largest batch the run reads."""
    probe = probe_images(images)  # (PROBE_N + RUN_IMAGES, c, h, w)
    read = probe_taps(model, [tap])
    synthetic, whole = probe_key(probe, read), run_probe_key(images, read)
    seen = _SEEN.get(model, {}).get((static, whole, registry.key))
    if seen is not None and same_as_seen(model, probe, read, batch, seen[1]):
        return seen[0]
    try:
        found = probe_behaviour(model, name, probe, read, batch)
    except (RuntimeError, AssertionError, IndexError, TypeError):  # a model that cannot take these images, ...
        check_models(images, [(name, model, tap)])  # ... said in one line as a measurement would say it
        raise
    # the synthetic images' forward sketch (what the shipped fingerprints hold), then the whole probe
    j0, why0 = registry.variant(static, synthetic, forward_part(found, PROBE_N))
    j1, why1 = registry.variant(static, whole, found)
    why = why0 or why1
    if why is not None:
        where = "on the probe batch" if why0 else "on the run's images or in its input gradient"
        log.warning("model %r computes otherwise than when its identity %s... was first measured (%s %s: a module "
                    "global, an environment variable, a hook, a custom backward or bytecode changed what it "
                    "computes): its results are measured again, as behaviour variant %d.%d", name, static[:12], why,
                    where, j0, j1)
    variant = None if (j0, j1) == (0, 0) else f"{whole}|{j0}.{j1}"
    remember_variant(model, content_identity(model) if variant else None, variant)
    identity = static if variant is None else variant_identity(static, whole, f"{j0}.{j1}")
    _SEEN.setdefault(model, {})[(static, whole, registry.key)] = (identity, found)
    return identity


def same_as_seen(model: nn.Module, probe: Tensor, read: List[str], batch: int, seen: Fingerprint) -> bool:
    """A module probed before in this process: one read of the probe tiled to the run's batch, with its
    input gradient (``fingerprint_vjp``), gives what the full probe found then, row by row (not: probed
    again, its batch coupling checked again against its images read alone)."""
    rows = max(batch, probe.shape[0])
    return difference(fingerprint_vjp(model, probe, read, rows), {tap: tiled(v, rows) for tap, v in seen.items()}) is None


# What each module's last full probe found, per (static identity, probe, fingerprint folders): a later
# call reads the probe batch once (not once more per image) and reuses the identity when it matches.
_SEEN: "weakref.WeakKeyDictionary[nn.Module, Dict[Tuple[str, str, str], Tuple[str, Fingerprint]]]" = \
    weakref.WeakKeyDictionary()
