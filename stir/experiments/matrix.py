"""Experiment kind ``matrix``: STIR(m_j | m_i) for every ordered pair of a list of models.

Row i is the reference (whose IRIs are made), column j the target; the diagonal is a model against
its seed twin when ``seed_twins`` names one (the paper's figures 4 and 8 compare two seeds of one
configuration there), else against itself. The plain similarity fills the other panel of the
heatmap. A row shares its reference's arbitrary IRIs (the inversion cache), which makes it the unit
of work a shard takes.
"""
from __future__ import annotations

import logging
import math
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from stir.config.validate import ConfigError
from stir.experiments import at_iris_table, rows
from stir.experiments.context import Context
from stir.experiments.examples import iri_examples
from stir.experiments.matrix_config import MatrixConfig  # noqa: F401  (the kind's config, torch-free)
from stir.experiments.registry import Kind, Unit, register
from stir.measure import DirectionResult, SimilarityResult
from stir.reporting import Figure, Report, Table, plot_matrix_pair
from stir.zoo import Model

log = logging.getLogger(__name__)
CORNER = "m1 (ref) \\ m2 (target)"


def _check(cfg: MatrixConfig) -> None:
    at_iris_table.check(cfg)
    if len(cfg.models) < 2:
        raise ConfigError(f"experiment {cfg.name!r} of kind 'matrix' needs at least 2 models (experiment.models=[a,b,...])")


def measure_row(ctx: Context, cfg: MatrixConfig, i: int) -> Tuple[List[DirectionResult], List[Optional[SimilarityResult]]]:
    """Row i of a matrix: STIR(m_j | m_i) for every j, and S(m_i, m_j) for j >= i (None below)."""
    cells = [measure_cell(ctx, cfg, i, j) for j in range(len(cfg.models))]
    return [d for d, _ in cells], [s for _, s in cells]


def measure_cell(ctx: Context, cfg: MatrixConfig, i: int, j: int) -> Tuple[DirectionResult, Optional[SimilarityResult]]:
    """Cell (i, j): STIR(m_j | m_i) (the diagonal: m_i's seed twin, else m_i itself, as the target),
    and S(m_i, m_j) for j >= i (None below). Every cell's X is the first model's image set (one image
    set for the whole matrix)."""
    first = ctx.model(cfg.models[0])
    images, draws = ctx.images(first), ctx.stir_images(first)
    ref = ctx.model(cfg.models[i])
    target = ctx.model(cfg.seed_twins.get(cfg.models[i], cfg.models[i]) if i == j else cfg.models[j])
    iri = "arbitrary" if target.identity == ref.identity else None  # adversarial IRIs against oneself are meaningless
    log.info("matrix: STIR(%s | %s)", target.label, ref.label)
    return (ctx.direction(ref, target, images=draws, iri=iri),
            None if j < i else ctx.similarity(ref, target, images))


def _diagonal_label(cfg: MatrixConfig, labels: List[str], twins: Dict[str, str]) -> str:
    """What the diagonal holds: each model against its seed twin, where ``seed_twins`` names one, else
    against itself (a partial list of twins says which cells are which, never "each model vs its twin")."""
    named = [f"{label} vs {twins[n]}" for n, label in zip(cfg.models, labels) if n in twins]
    if not named:
        return "diagonal: each model vs itself"
    if len(named) == len(labels):
        return "diagonal: each model vs its seed twin"
    return f"diagonal: seed twins ({', '.join(named)}), the other models vs themselves"


def run(ctx: Context, cfg: MatrixConfig) -> Report:
    """STIR(m_j|m_i) for every ordered pair (diagonal: a model against its twin or itself), CKA beside it."""
    report = Report(cfg.description or cfg.name)
    models = [ctx.model(name) for name in cfg.models]
    labels = [m.label for m in models]
    m = len(models)
    stir, stir_adv, sim, normalised = (np.full((m, m), np.nan) for _ in range(4))
    numeric, display, notes, convergence = [], [], [], []
    measured = []  # every DirectionResult, for the headline
    for i in range(m):
        directions, similarities = measure_row(ctx, cfg, i)
        for j, (d, s) in enumerate(zip(directions, similarities)):
            stir[i, j] = d.stir.mean if d.stir else math.nan
            stir_adv[i, j] = d.stir_adv.mean if d.stir_adv else math.nan
            numeric.append(rows.direction_row(d))
            display.append(rows.direction_display(d))
            notes.append(rows.direction_notes(d))
            measured.append(d)
            convergence += rows.convergence_rows(d)
            if s is not None:
                sim[i, j] = sim[j, i] = s.value
            for key in ("stir", "stir_adv", "agreement", "difficulty"):
                stat = getattr(d, key)
                if stat is not None and math.isfinite(stat.mean):
                    report.summary[f"matrix/{labels[i]}/{d.target}/{key}"] = stat.mean
            cal = d.calibration.get("stir")
            if cal is not None and math.isfinite(cal.floor):
                report.summary[f"matrix/{labels[i]}/{d.target}/stir_floor"] = cal.floor
            if cal is not None and math.isfinite(cal.normalised):  # against that cell's own floor and ceiling
                normalised[i, j] = cal.normalised
                report.summary[f"matrix/{labels[i]}/{d.target}/stir_normalised"] = cal.normalised
    report.tables["directions"] = Table(numeric, display=display, notes=notes,
                                        headline=rows.direction_headline_table(measured))
    if cfg.at_iris != "off":  # STIR at IRIs beside each off-diagonal direction (stir.experiments.at_iris_table)
        at_rows = []
        for i, j in ((i, j) for i in range(m) for j in range(m) if i != j):
            r, at_notes = at_iris_table.row(ctx, models[i], models[j], measured[i * m + j], ctx.images(models[0]), cfg)
            at_rows.append(r)
            report.notes += at_notes
        report.tables["at_iris"] = Table(at_rows, display=at_iris_table.worded(at_rows))
        report.notes.append(at_iris_table.note(at_rows))
    report.tables["convergence"] = Table(convergence)
    for name, values in (("stir", stir), ("stir_normalised", normalised), ("stir_adv", stir_adv), (ctx.estimator.measure, sim)):
        table = [{CORNER: ref, **{t: float(values[i, j]) for j, t in enumerate(labels)}} for i, ref in enumerate(labels)]
        shown = [{k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in r.items()} for r in table]
        report.tables[f"matrix_{name}"] = Table(table, display=shown)
    shown = labels + [ctx.model(t).label for n, t in cfg.seed_twins.items() if n in cfg.models]
    accuracy = [{"model": label, **{k: round(v, 4) for k, v in ctx.zoo.resolved()[label].metrics.items()}} for label in shown]
    report.tables["accuracy"] = Table(accuracy)
    diagonal = _diagonal_label(cfg, labels, {n: ctx.model(t).label for n, t in cfg.seed_twins.items()})
    measure = ctx.estimator.measure
    report.figures["matrix_stir"] = Figure(plot_matrix_pair, dict(
        left=stir, right=sim, row_labels=labels, col_labels=labels, title=report.title,
        left_title=f"STIR(m2|m1): row m1 = reference, column m2 = target ({diagonal})", right_title=measure,
        right_value_label=measure))
    if ctx.estimator.adversarial:
        report.figures["matrix_stir_adv"] = Figure(plot_matrix_pair, dict(
            left=stir_adv, right=sim, row_labels=labels, col_labels=labels, title=report.title + " (adversarial IRIs)",
            left_title="STIR_adv(m2|m1)", left_value_label="STIR_adv(m2|m1)", right_title=measure,
            right_value_label=measure))
    off = ~np.eye(m, dtype=bool)
    report.summary["mean_offdiagonal_stir"] = float(np.nanmean(stir[off])) if m > 1 else float("nan")
    figure, example_notes = iri_examples(ctx, models[0], models[1] if m > 1 else models[0], ctx.images(models[0]))
    if figure is not None:
        report.figures["iri_examples"] = figure
    report.notes += example_notes
    return report


def units(ctx: Context, cfg: MatrixConfig) -> List[Unit]:
    return [Unit(f"matrix row {name}: STIR(every model | {name}) from {name}'s IRIs", partial(measure_row, ctx, cfg, i))
            for i, name in enumerate(cfg.models)]


register(Kind("matrix", MatrixConfig, run, units, _check, nonfinite=True))
