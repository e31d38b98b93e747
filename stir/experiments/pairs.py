"""Experiment kinds ``pair`` (ref vs target) and ``pairs`` (a list): both directions per pair, at the
penultimate tap or, with ``layers.taps`` all / original / a list, at every corresponding tap."""
from __future__ import annotations

import logging
import math
from functools import partial
from typing import Callable, List, Tuple

from stir.config.validate import ConfigError
from stir.experiments import at_iris_table, pair_reading, rows
from stir.experiments.config import ExperimentConfig
from stir.experiments.context import Context
from stir.experiments.examples import iri_examples
from stir.experiments.pairs_config import PairConfig, PairsConfig  # noqa: F401  (the kind's config, torch-free)
from stir.experiments.registry import Kind, Unit, register
from stir.measure import DIRECTIONS, LayerwiseResult, PairResult
from stir.reporting import Figure, Report, Table, plot_convergence, plot_layerwise
from stir.reporting.plots import interval_errors
from stir.zoo import Model

log = logging.getLogger(__name__)
NAMES = {"m2|m1": "STIR({m2}|{m1})", "m1|m2": "STIR({m1}|{m2})"}


def _check(cfg: PairsConfig) -> None:
    at_iris_table.check(cfg)
    if not cfg.pairs:
        raise ConfigError(f"experiment {cfg.name!r} of kind 'pairs' lists no pairs (experiment.pairs=[[ref,target],...])")
    if any(len(p) != 2 for p in cfg.pairs):
        raise ConfigError(f"experiment.pairs must be [ref, target] pairs, got {cfg.pairs}")


def models(ctx: Context, cfg: ExperimentConfig) -> List[Tuple[Model, Model]]:
    """The (m1, m2) of every pair: ref and target with their own options, or the list's pairs."""
    if isinstance(cfg, PairsConfig):
        return [(ctx.model(a), ctx.model(b)) for a, b in cfg.pairs]
    return [(ctx.role("ref"), ctx.role("target"))]


def _layerwise(ctx: Context) -> bool:
    return ctx.layers.taps != "penultimate"


def run(ctx: Context, cfg: ExperimentConfig) -> Report:
    pairs = models(ctx, cfg)
    title = f"{pairs[0][0].label} (m1) vs {pairs[0][1].label} (m2)" if not isinstance(cfg, PairsConfig) else (cfg.description or cfg.name)
    report = Report(title)
    numeric, display, notes, convergence = [], [], [], []
    measured, extra = [], []  # each PairResult and the cells its headline rows begin with
    for m1, m2 in pairs:
        log.info("pair %s (m1) vs %s (m2)", m1.label, m2.label)
        prefix = "" if len(pairs) == 1 else f"{m1.label}_vs_{m2.label}/"
        if _layerwise(ctx):
            result = ctx.layerwise(m1, m2)
            for pair, depth in zip(result.rows, result.depths):
                numeric.append({**rows.pair_row(pair), "depth": depth, "pair": f"{m1.label} vs {m2.label}"})
                display.append({"depth": f"{depth:.2f}", **rows.pair_display(pair)})
                notes.append(rows.pair_notes(pair))
                measured.append(pair)
                extra.append({"depth": f"{depth:.2f}"})
                convergence += rows.pair_convergence_rows(pair)
                report.summary.update({f"{m1.label}_vs_{m2.label}/{pair.similarity.tap_ref}/{k}": v
                                       for k, v in rows.pair_summary(pair).items()})
            report.figures[f"layers_{m1.label}_vs_{m2.label}"] = _layers_figure(ctx, m1, m2, result, report, "stir_normalised")
            report.figures[f"layers_raw_{m1.label}_vs_{m2.label}"] = _layers_figure(ctx, m1, m2, result, report, "stir")
        else:
            pair = ctx.pair(m1, m2)
            numeric.append(rows.pair_row(pair))
            display.append(rows.pair_display(pair))
            notes.append(rows.pair_notes(pair))
            measured.append(pair)
            extra.append({})
            convergence += rows.pair_convergence_rows(pair)
            report.summary.update({prefix + k: v for k, v in rows.pair_summary(pair).items()})
            report.figures[f"convergence_{m1.label}_vs_{m2.label}"] = convergence_figure(ctx, pair)
            if cfg.at_iris != "off":
                at_rows, at_notes = at_iris_table.pair_rows(ctx, m1, m2, pair, cfg)
                report.tables.setdefault("at_iris", Table([])).rows.extend(at_rows)
                report.notes += at_notes
    if "at_iris" in report.tables:
        at = report.tables["at_iris"]
        at.display = at_iris_table.worded(at.rows)
        report.notes.append(at_iris_table.note(at.rows))
    report.tables["pairs"] = Table(numeric, display=display, notes=notes, headline=rows.headline_table(measured, extra))
    report.tables["convergence"] = Table(convergence)
    if not isinstance(cfg, PairsConfig) and not _layerwise(ctx):  # one pair at one tap: in plain words (issue 69;
        # the layer-wise headline keeps a row per tap, and the paper's pairs parts keep their rendering)
        in_words(report, measured[0], ctx.estimator.calibration.interval)
    m1, m2 = pairs[0]
    figure, example_notes = iri_examples(ctx, m1, m2, ctx.images(m1))
    if figure is not None:
        report.figures["iri_examples"] = figure
    report.notes += example_notes
    return report


def in_words(report: Report, pair: PairResult, interval_reading: str) -> None:
    """A pair's report opens in plain words (``stir.experiments.pair_reading``): what was measured and
    how to read it, the worded headline with a sentence for each disagreement, the tables titled, and
    the convergence rows of one set of X' shown once. ``report`` holds the tables ``pairs`` and
    ``convergence`` (and ``at_iris`` where read); ``interval_reading`` is calibration.interval."""
    at_rows = report.tables["at_iris"].rows if "at_iris" in report.tables else []
    report.opening = pair_reading.opening(pair, at_rows, interval_reading)
    table = report.tables["pairs"]
    table.headline = pair_reading.headline(pair, at_rows)
    table.title = "STIR both ways"
    table.after, table.legend = pair_reading.disagreements(pair, at_rows), pair_reading.LEGEND
    convergence = report.tables["convergence"]
    convergence.display = pair_reading.convergence_display(convergence.rows)
    convergence.title = "STIR along the inversion budget (convergence)"
    if "at_iris" in report.tables:
        report.tables["at_iris"].title = "STIR at IRIs beside the published reading (at_iris)"


def convergence_figure(ctx: Context, pair: PairResult) -> Figure:
    """STIR and m1's residual along the inversion budget, both directions and IRI kinds."""
    steps, stir, residual, errors = {}, {}, {}, {}
    for direction, d in rows.ordered(pair.directions, DIRECTIONS):
        m1, m2 = (pair.ref, pair.target)
        base = NAMES[direction].format(m1=m1, m2=m2)
        for kind, record in rows.ordered(d.convergence, rows.KINDS):  # fixed order: fresh or from the store
            name = base if kind == "arbitrary" else base.replace("STIR", "STIR_adv", 1)
            steps[name], stir[name], errors[name] = record["steps"], record["stir"], record["stir_std"]
            residual[name] = record["median_residual"]
    cfg = ctx.estimator.inversion
    return Figure(plot_convergence, dict(steps=steps, stir=stir, residual=residual, errors=errors,
                                         tolerance=cfg.tolerance, error_note=f"bars: ± 1 std over the k={ctx.estimator.k} "
                                                                             "seed draws",
                                         title=f"STIR along the inversion budget ({cfg.mode} mode): {pair.ref} vs {pair.target}"))


def _layers_figure(ctx: Context, m1: Model, m2: Model, result: LayerwiseResult, report: Report,
                   reading: str) -> Figure:
    """STIR against relative depth, both directions, error bars = the calibration interval: the
    normalised values (``reading="stir_normalised"``: each tap against its own floor and ceiling,
    what a depth claim rests on) or the raw ones ("stir"), each with its least-squares slope."""
    normalised = reading == "stir_normalised"
    series, errors, fits = {}, {}, {}
    for direction in DIRECTIONS:
        stats = [row.stat(direction, "stir") for row in result.rows]
        if any(s is None for s in stats):
            continue
        name = NAMES[direction].format(m1=m1.label, m2=m2.label)
        cals = [row.get(direction).calibration.get("stir") for row in result.rows]
        if normalised:
            values = [c.normalised if c else math.nan for c in cals]
            low, high = [c.normalised_low if c else math.nan for c in cals], [c.normalised_high if c else math.nan for c in cals]
        else:
            values = [s.mean for s in stats]
            low, high = [c.low if c else math.nan for c in cals], [c.high if c else math.nan for c in cals]
        series[name] = values
        errors[name] = interval_errors(values, low, high)
        fit = result.fits.get(direction, {}).get(reading)
        if fit is not None:
            fits[name] = (fit["slope"], fit["intercept"])
            report.summary[f"slope/{m1.label}_vs_{m2.label}/{reading}_{rows.SLUGS[direction]}"] = fit["slope"]
    what = "normalised STIR ((S - floor) / (ceiling - its floor), per tap)" if normalised else "raw STIR (not floor-corrected)"
    return Figure(plot_layerwise, dict(
        depths=result.depths, series=series, fits=fits, errors=errors, ylabel="normalised STIR" if normalised else "STIR",
        title=f"Layer-wise {what}, {ctx.estimator.measure}: {m1.label} vs {m2.label}",
        error_note=f"bars: {ctx.estimator.calibration.confidence:.0%} interval over images and draws "
                   f"({ctx.estimator.calibration.interval}), not training seeds"))


def units(ctx: Context, cfg: ExperimentConfig) -> List[Unit]:
    """One unit per pair (all its taps: they share nothing with other pairs)."""
    one, what = (ctx.layerwise, "layer-wise STIR") if _layerwise(ctx) else (ctx.pair, "STIR")
    return [Unit(f"{what} of {m1.label} (m1) vs {m2.label} (m2), both directions", partial(one, m1, m2))
            for m1, m2 in models(ctx, cfg)]


def _pair_name(ctx, cfg) -> str:
    return f"pair_{ctx.role('ref').label}_vs_{ctx.role('target').label}"


register(Kind("pair", PairConfig, run, units, at_iris_table.check, report_name=_pair_name, nonfinite=True))
register(Kind("pairs", PairsConfig, run, units, _check, nonfinite=True))
