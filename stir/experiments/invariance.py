"""Experiment kind ``invariance``: G-EED (Kvinge et al. 2022) of every model at every tap.

For each model of ``models`` (and an untrained twin of the first, ``random_init``): invariance and
equivariance G-EED (``stir.invariance.measure_geed``) per transformation of ``transforms``, distance
and Gaussian noise level, on the n images of ``split``. Every model source and tap form works
(``stir.models.taps``); the random-init twin needs a model this project trained. Seed
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

from stir.config.validate import ConfigError
from stir.experiments.context import Context
from stir.experiments.invariance_config import InvarianceConfig  # noqa: F401  (the kind's config, torch-free)
from stir.experiments.judging import RANDOM_INIT, digest, random_init, taps_of
from stir.experiments.registry import Kind, Unit, register
from stir.invariance import GEEDResult, get_transforms, measure_geed, pool
from stir.invariance.geed import DISTANCES
from stir.reporting import Figure, Report, Table, plot_layerwise

log = logging.getLogger(__name__)
KIND = "geed"


def _check(cfg: InvarianceConfig) -> None:
    try:
        get_transforms(cfg.transforms)  # unknown: ValueError listing the choices
    except ValueError as err:
        raise ConfigError(f"experiment.transforms: {err}") from None
    bad = [d for d in cfg.distances if d not in DISTANCES]
    if bad or not cfg.distances:
        raise ConfigError(f"experiment.distances: unknown {bad}; choose from {list(DISTANCES)}")
    if not cfg.models:
        raise ConfigError("experiment=invariance needs experiment.models (zoo names or sources)")


def group_of(name: str) -> str:
    """Seed models share a group: the zoo name without a trailing _s<digits>."""
    return re.sub(r"_s\d+$", "", name)


def measure_model(ctx: Context, cfg: InvarianceConfig, name: str) -> GEEDResult:
    """G-EED of one model (``random-init`` = the untrained twin of the first model), stored."""
    first = ctx.model(cfg.models[0])
    source = first if name == RANDOM_INIT else ctx.model(name)
    net = random_init(first, ctx.device) if name == RANDOM_INIT else source.module
    images = ctx.images(first)
    taps = taps_of(ctx.layers, source)
    identity = f"{RANDOM_INIT}:{ctx.identity(first)}" if name == RANDOM_INIT else ctx.identity(source)
    label = RANDOM_INIT if name == RANDOM_INIT else source.label
    parts = dict(model=identity, taps=taps, transforms=list(cfg.transforms), distances=list(cfg.distances),
                 noise=[float(s) for s in cfg.noise], images=digest(images), noise_seed=ctx.images_spec.seed)
    log.info("G-EED of %s at %d taps, %d transformations, noise %s", label, len(taps), len(cfg.transforms), list(cfg.noise))
    return ctx.store.cached(KIND, parts, lambda: measure_geed(
        net, images, taps, cfg.transforms, distances=cfg.distances, noise_levels=cfg.noise,
        noise_seed=ctx.images_spec.seed, name=label, batch_size=ctx.run.eval_batch_size),
        GEEDResult.from_dict, ctx.record(source))


def _names(cfg: InvarianceConfig) -> List[str]:
    return list(cfg.models) + ([RANDOM_INIT] if cfg.random_init else [])


def run(ctx: Context, cfg: InvarianceConfig) -> Report:
    report = Report(cfg.description or cfg.name)
    results = {}
    for name in _names(cfg):
        result = measure_model(ctx, cfg, name)
        results[result.model] = result
    groups: Dict[str, List[GEEDResult]] = {}
    for label, result in results.items():
        groups.setdefault(group_of(label), []).append(result)
    pooled = {g: pool(rs, g) for g, rs in groups.items()}

    numeric = []
    for g, result in pooled.items():
        for row in result.rows:
            iv = row.interval
            numeric.append({"group": g, "models": len(groups[g]), "tap": row.tap, "depth": row.depth,
                            "transform": row.transform, "kind": row.kind, "distance": row.distance,
                            "noise": row.noise, "geed": iv.mean, "ci_low": iv.low, "ci_high": iv.high, "count": iv.count})
    report.tables["geed"] = Table(numeric)

    last = taps_of(ctx.layers, ctx.model(cfg.models[0]))[-1]
    for kind in ("invariance", "equivariance"):
        table = []
        for g, result in pooled.items():
            tap = last if kind == "invariance" else _last_spatial(result)
            cells = {}
            for t in cfg.transforms:
                r = result.get(tap, t, kind, "euclidean", 0.0)
                if r is not None:
                    iv = r.interval
                    cells[t] = f"{iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}]"
            if cells:
                table.append({"group": g, "tap": tap, **cells})
        report.tables[f"zoo_{kind}"] = Table(table)

    noise_rows = []
    for g, result in pooled.items():
        for sigma in cfg.noise:
            r = result.get(last, cfg.transforms[0], "invariance", "euclidean", float(sigma))
            if r is not None:
                iv = r.interval
                noise_rows.append({"group": g, "tap": last, "transform": cfg.transforms[0], "noise": sigma,
                                   "geed": f"{iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}]"})
    report.tables["noise"] = Table(noise_rows)

    for label, result in results.items():  # one plot per model: invariance G-EED over depth
        _plot(report, ctx, cfg, result, "invariance", f"geed_model_{label}", f"invariance G-EED of {label}")
    for g, result in pooled.items():
        for kind in ("invariance", "equivariance"):
            _plot(report, ctx, cfg, result, kind, f"geed_{kind}_{g}", f"{kind} G-EED of {g} ({len(groups[g])} model(s))")
        for t in cfg.transforms:
            r = result.get(last, t, "invariance", "euclidean", 0.0)
            if r is not None:
                report.summary[f"{g}/{t}/{last}"] = r.interval.mean
    return report


def _plot(report: Report, ctx: Context, cfg: InvarianceConfig, result: GEEDResult, kind: str, name: str,
          title: str) -> None:
    """G-EED against relative depth, a line per transformation (euclidean, clean images), 95% bars."""
    series, depths, errors = {}, {}, {}
    for t in cfg.transforms:
        pts = [r for r in result.rows if (r.transform, r.kind, r.distance, r.noise) == (t, kind, "euclidean", 0.0)]
        if pts:
            series[t] = [r.interval.mean for r in pts]
            depths[t] = [r.depth for r in pts]
            errors[t] = [(r.interval.high - r.interval.low) / 2 for r in pts]
    if series:
        report.figures[name] = Figure(plot_layerwise, dict(
            depths=depths, series=series, title=f"{title}, euclidean / ||f(x)||, n={ctx.images_spec.n}",
            errors=errors, xlabel="relative depth (tap)", ylabel=f"{kind} G-EED",
            error_note="bars: half the 95% interval over images and seeds"))


def _last_spatial(result: GEEDResult) -> str:
    """The deepest tap that has equivariance rows (a spatial map)."""
    rows = [r for r in result.rows if r.kind == "equivariance"]
    return max(rows, key=lambda r: r.depth).tap if rows else ""


def units(ctx: Context, cfg: InvarianceConfig) -> List[Unit]:
    return [Unit(f"G-EED of {name} at every tap and transformation", partial(measure_model, ctx, cfg, name))
            for name in _names(cfg)]


register(Kind("invariance", InvarianceConfig, run, units, _check))
