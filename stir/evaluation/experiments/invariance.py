"""Experiment kind ``invariance``: G-EED (Kvinge et al. 2022) of every model at every tap.

For each model of ``experiment.models`` (and an untrained twin of the first, ``invariance.random_init``):
invariance and equivariance G-EED (``stir.invariance.measure_geed``) per transformation of
``invariance.transforms``, distance and Gaussian noise level, on the n images of ``split``. Seed
models are pooled by their zoo name without a trailing ``_s<seed>`` (vanilla, vanilla_s1 -> vanilla),
so intervals run over images and seeds. One store entry per model.

Questions it answers (summary): is the flip-augmented model flip-invariant at the penultimate
layer (compared with the untrained twin)?; vanilla vs AT; in-distribution vs noisy inputs.
"""
from __future__ import annotations

import logging
import re
from functools import partial
from typing import Any, Callable, Dict, List

from stir.evaluation.experiments.judging import RANDOM_INIT, digest, random_init, stored, taps_of
from stir.evaluation.experiments.registry import register
from stir.evaluation.experiments.report import Report
from stir.evaluation.session import Session
from stir.invariance import GEEDResult, get_transforms, measure_geed, pool
from stir.invariance.geed import DISTANCES
from stir.reporting import plot_layerwise

log = logging.getLogger(__name__)
KIND = "geed"


def group_of(name: str) -> str:
    """Seed models share a group: the zoo name without a trailing _s<digits>."""
    return re.sub(r"_s\d+$", "", name)


def _check(session: Session) -> List[str]:
    cfg = session.cfg.invariance
    get_transforms(cfg.transforms)  # unknown: ValueError listing the choices
    bad = [d for d in cfg.distances if d not in DISTANCES]
    if bad or not cfg.distances:
        raise ValueError(f"invariance.distances: unknown {bad}; choose from {list(DISTANCES)}")
    models = list(session.cfg.experiment.models)
    if not models:
        raise ValueError("experiment=invariance needs experiment.models (zoo names)")
    return models


def measure_model(session: Session, name: str) -> GEEDResult:
    """G-EED of one model (``random-init`` = the untrained twin of the first model), stored."""
    cfg, inv = session.cfg, session.cfg.invariance
    models = _check(session)
    source = models[0] if name == RANDOM_INIT else name
    net = random_init(session, source) if name == RANDOM_INIT else session.network(name)
    images = session.images(models[0])
    taps = taps_of(session, source)
    identity = f"{RANDOM_INIT}:{session.model(source).identity}" if name == RANDOM_INIT else session.model(name).identity
    parts = dict(model=identity, taps=taps, transforms=list(inv.transforms), distances=list(inv.distances),
                 noise=[float(s) for s in inv.noise], images=digest(images), noise_seed=cfg.image_seed)
    log.info("G-EED of %s at %d taps, %d transformations, noise %s", name, len(taps), len(inv.transforms), list(inv.noise))
    return stored(session.store, KIND, parts, lambda: measure_geed(
        net, images, taps, inv.transforms, distances=inv.distances, noise_levels=inv.noise,
        noise_seed=cfg.image_seed, name=name, batch_size=cfg.inversion.eval_batch_size),
        GEEDResult.from_dict, session.record(source))


def _names(session: Session) -> List[str]:
    models = _check(session)
    return models + ([RANDOM_INIT] if session.cfg.invariance.random_init else [])


def run(session: Session) -> Report:
    cfg, inv = session.cfg, session.cfg.invariance
    report = Report(cfg.experiment.description or cfg.experiment.name)
    results = {name: measure_model(session, name) for name in _names(session)}
    groups: Dict[str, List[GEEDResult]] = {}
    for name, result in results.items():
        groups.setdefault(group_of(name), []).append(result)
    pooled = {g: pool(rs, g) for g, rs in groups.items()}

    rows = []
    for g, result in pooled.items():
        for row in result.rows:
            iv = row.interval
            rows.append({"group": g, "models": len(groups[g]), "tap": row.tap, "depth": row.depth,
                         "transform": row.transform, "kind": row.kind, "distance": row.distance,
                         "noise": row.noise, "geed": iv.mean, "ci_low": iv.low, "ci_high": iv.high, "count": iv.count})
    report.tables["geed"] = (rows, None)

    last = taps_of(session, _check(session)[0])[-1]
    for kind in ("invariance", "equivariance"):
        table = []
        for g, result in pooled.items():
            cells = {}
            for t in inv.transforms:
                r = result.get(last if kind == "invariance" else _last_spatial(result), t, kind, "euclidean", 0.0)
                if r is not None:
                    iv = r.interval
                    cells[t] = f"{iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}]"
            if cells:
                table.append({"group": g, "tap": last if kind == "invariance" else _last_spatial(result), **cells})
        report.display[f"zoo_{kind}"] = table
        report.tables[f"zoo_{kind}"] = (table, None)

    noise_rows = []
    for g, result in pooled.items():
        for sigma in inv.noise:
            r = result.get(last, inv.transforms[0], "invariance", "euclidean", float(sigma))
            if r is not None:
                iv = r.interval
                noise_rows.append({"group": g, "tap": last, "transform": inv.transforms[0], "noise": sigma,
                                   "geed": f"{iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}]"})
    report.display["noise"] = noise_rows
    report.tables["noise"] = (noise_rows, None)

    for name, result in results.items():  # one plot per model: invariance G-EED over depth
        _plot(report, session, result, "invariance", f"geed_model_{name}", f"invariance G-EED of {name}")
    for g, result in pooled.items():
        for kind in ("invariance", "equivariance"):
            _plot(report, session, result, kind, f"geed_{kind}_{g}", f"{kind} G-EED of {g} ({len(groups[g])} model(s))")
    for g, result in pooled.items():
        for t in inv.transforms:
            r = result.get(last, t, "invariance", "euclidean", 0.0)
            if r is not None:
                report.summary[f"{g}/{t}/{last}"] = r.interval.mean
    return report


def _plot(report: Report, session: Session, result: GEEDResult, kind: str, name: str, title: str) -> None:
    """G-EED against relative depth, a line per transformation (euclidean, clean images), 95% bars."""
    series, depths, errors = {}, {}, {}
    for t in session.cfg.invariance.transforms:
        pts = [r for r in result.rows if (r.transform, r.kind, r.distance, r.noise) == (t, kind, "euclidean", 0.0)]
        if pts:
            series[t] = [r.interval.mean for r in pts]
            depths[t] = [r.depth for r in pts]
            errors[t] = [(r.interval.high - r.interval.low) / 2 for r in pts]
    if series:
        report.figures[name] = plot_layerwise(
            depths, series, session.out / f"{name}.png", f"{title}, euclidean / ||f(x)||, n={session.cfg.n}",
            errors=errors, xlabel="relative depth (tap)", ylabel=f"{kind} G-EED")


def _last_spatial(result: GEEDResult) -> str:
    """The deepest tap that has equivariance rows (a spatial map)."""
    rows = [r for r in result.rows if r.kind == "equivariance"]
    return max(rows, key=lambda r: r.depth).tap if rows else ""


def units(session: Session) -> List[Callable[[], Any]]:
    return [partial(measure_model, session, name) for name in _names(session)]


register("invariance", run, units)
