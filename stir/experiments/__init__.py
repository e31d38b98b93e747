"""The ``evaluate.py`` application: the only code that sees the Hydra config.

One module per experiment kind, each with a runner that returns a ``Report`` (tables, figures as
data, summary keys) and its units of work, registered by name (``kinds()`` lists them; the table
of docs/presets.md is built from the declarations), each with its config dataclass beside it in
``<module>_config`` (no torch), and what they share: ``schema`` (the common config, what every kind's
has, ``KIND_CONFIGS``; no torch), ``config`` (the checks), ``context`` (models,
images, store, estimator), ``rows`` (typed results -> rows, notes, summary keys), ``examples`` (the
X' a measurement made), ``judging`` (taps and representations for the judging kinds), ``registry``.
Conventions: m1 = reference (the model whose IRIs are made), m2 = target; in a matrix, row i is the
reference and column j the target, entry = STIR(m_j | m_i).
"""
from __future__ import annotations

import hashlib
import json
import logging
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence, Tuple

from stir.experiments.registry import Unit, get, kinds
from stir.progress import Progress

if TYPE_CHECKING:  # the package stays light: stir.experiments.schema and .commands are read without torch
    from stir.experiments.context import Context
    from stir.reporting import Report

log = logging.getLogger(__name__)


def estimator_notes(ctx: Context) -> list:
    """What the report must say about the estimator when it is not the published one."""
    inversion = ctx.estimator.inversion
    notes = []
    if inversion.mode == "fast":
        notes.append("inversion.mode=fast: a different estimator from the published STIR procedure; its values "
                     "differ from faithful mode on the same models and images (docs: the estimator)")
    elif inversion.mode == "iri":
        notes.append(f"inversion.mode=iri: the IRI solver (each image stopped at r1 <= {inversion.target:g}, at most "
                     f"{inversion.steps} steps), a different estimator from the published STIR procedure "
                     "(docs: the estimator)")
    elif inversion.steps != 1000:
        notes.append(f"inversion: {inversion.steps} faithful steps, not the original code's default 1000 (see the "
                     "convergence table for how far the value had settled)")
    if inversion.fake_relu is not None and inversion.fake_relu_spec != ("published" if inversion.mode == "faithful" else "off"):
        notes.append(f"inversion.fake_relu={inversion.fake_relu}: not the mode's published setting (each model's "
                     "record says which ReLUs were faked)")
    calibration = ctx.estimator.calibration
    if calibration.interval == "half_sampling" and calibration.resamples > 0:
        notes.append("intervals: calibration.interval=half_sampling, the reading the shipped results were measured "
                     "under and served with (nothing new is measured under it); it errs wide (94-100% coverage, up to "
                     "2.5 times the true width from k = 2: docs/benchmarks/calibration.md), so a claim not resolved "
                     "here may be resolved at the calibrated calibration.interval=jackknife_corrected (the default; "
                     "measured anew)")
    return notes


def model_notes(ctx: Context) -> list:
    """What the report must say about its models: those served by the shipped zoo (their weights file
    and its sha256), those evaluated from an unfinished run (allow_unfinished=true) and those that are
    not finite (allow_nonfinite=true), in label order."""
    notes = []
    for label, model in sorted(ctx.zoo.resolved().items()):
        if model.record.get("source") == "shipped":
            notes.append(f"model {label}: the shipped {model.record['shipped_file']} (sha256 "
                         f"{model.record['shipped_sha256'][:12]}...; no finished run folder of its recipe here)")
        if "unfinished" in model.record:
            notes.append(f"model {label}: {model.record['unfinished']}")
        if "nonfinite" in model.record:
            notes.append(f"model {label} is not finite ({model.record['nonfinite']}): every number of it is NaN "
                         "(allow_nonfinite=true)")
    return notes


def store_notes(ctx: Context) -> list:
    """What the report must say about results it did not compute here: those copied from the shipped
    results (``zoo/store``, computed where their records say)."""
    store = ctx.store
    if not store.shipped_hits:
        return []
    return [f"results: {store.shipped_hits} of the {store.hits} served from the store came from the shipped results "
            f"{store.shipped.parent.name}/{store.shipped.name} (computed on the host and at the time their records state; "
            "zoo.shipped_results=false computes them here)"]


def run(ctx: Context, experiment: Any) -> Report:
    """Run the experiment (its kind's runner) and return its report, the estimator's and the models' notes first.

    An experiment of several units measures them one by one first, under a progress bar (unit i of N,
    what it measures: ``stir.progress``), into the store; the runner then assembles the report from
    the store, as after a sharded run.
    """
    kind = get(experiment.kind)
    units = kind.units(ctx, experiment)
    if len(units) > 1:
        measure_units(list(enumerate(units, 1)), len(units), experiment.name, ctx.run.progress)
    report = kind.run(ctx, experiment)
    name_models(report, list(ctx.zoo.resolved().values()))
    report.notes = estimator_notes(ctx) + model_notes(ctx) + store_notes(ctx) + report.notes
    return report


def name_models(report: Report, models: Sequence[Any]) -> None:
    """Every report names its models: the ``models`` table (source, recipe, accuracy, dtype, flag) shown
    after the headline tables and in ``record.json``, and a note for each barely trained one."""
    from stir.reporting.models import flagged, models_table

    if not models:
        return
    table = models_table(models)
    report.models = table.rows
    report.tables = {**{k: v for k, v in report.tables.items() if v.headline is not None}, "models": table,
                     **{k: v for k, v in report.tables.items() if v.headline is None and k != "models"}}
    report.notes = flagged(models) + report.notes


def publication(ctx: Context, experiment: Any) -> Dict[str, Any]:
    """What the report of ``experiment`` is published under: its folder's name (the kind's
    ``report_name``), the settings and model identities its folder hash is taken of, the W&B config
    and tags, and whether anything new was measured (every result from the store: no second W&B run)."""
    from stir.reporting import slug
    from stir.reporting.index import models_settings, report_settings

    models = ctx.zoo.resolved()
    estimator = ctx.estimator
    name = slug(get(experiment.kind).report_name(ctx, experiment))
    identities = {label: m.identity for label, m in models.items()}
    return {"name": name, "latest": latest_link(name, ctx.config), "exact": exact_link(name, ctx.config, identities),
            "settings": models_settings(report_settings(ctx.config), identities),
            "config": {**ctx.config, "models": {label: m.record for label, m in models.items()}},
            "tags": [experiment.kind, estimator.measure, estimator.iri],
            "nothing_new": ctx.store.misses == 0 and ctx.store.hits > 0}


def latest_link(name: str, config: Dict[str, Any]) -> str:
    """The name of the link to the latest report of ``name`` at its zoo profile: ``<name>`` at the
    default profile (full, the paper's sizes), ``<name>@<profile>`` at another
    (``pair_vanilla_vs_vanilla_s1@laptop``): a link never mixes profiles, so a cpu run of a pair never
    takes the laptop run's link."""
    from stir.experiments.schema import ZooConfig
    from stir.reporting import slug

    profile = (config.get("zoo") or {}).get("profile")
    return name if not profile or profile == ZooConfig().profile else f"{name}@{slug(str(profile))}"


def exact_link(name: str, config: Dict[str, Any], identities: Dict[str, str]) -> Optional[str]:
    """The name of the link to the latest report of ``name`` on exactly these models:
    ``<latest_link>.<6 hex digits of their identities>`` (``pair_vanilla_vs_vanilla_s1@laptop.3f09a1``).
    The profile link follows the labels, which another zoo file, run folder or a label that slugs
    alike (unicode becomes ``-``) may give to other models; this one never moves to other models.
    None for a report of no model."""
    if not identities:
        return None
    digest = hashlib.sha256(json.dumps(sorted(identities.items())).encode()).hexdigest()[:6]
    return f"{latest_link(name, config)}.{digest}"


def measure_units(numbered: Sequence[Tuple[int, Unit]], of: int, name: str, progress: bool) -> None:
    """Call each (i, unit), saying which (unit i of N: what it measures) on the bar or in the log."""
    with Progress(len(numbered), name, "unit", enabled=progress) as bar:
        for i, unit in numbered:
            line = f"{name}: unit {i} of {of}: {unit.what}"
            if progress:
                bar.describe(line)
            else:
                log.info("%s", line)
            unit()
            bar.update(1)


def run_shard(ctx: Context, experiment: Any, shard: int, shards: int) -> int:
    """Compute units shard, shard + shards, ... of the experiment into the store; how many were taken.

    Shards write to the same results store (one atomic file per measurement, computed under its
    lock), so they may run at the same time on different devices; a run without shards then
    assembles the report from the store without recomputing anything.
    """
    every = list(enumerate(get(experiment.kind).units(ctx, experiment), 1))
    mine = every[shard::shards]
    measure_units(mine, len(every), f"{experiment.name} (shard {shard} of {shards})", ctx.run.progress)
    return len(mine)


__all__ = ["Context", "estimator_notes", "exact_link", "kinds", "latest_link", "model_notes", "publication", "run", "run_shard"]


def __getattr__(name: str):
    if name == "Context":
        from stir.experiments.context import Context

        return Context
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
