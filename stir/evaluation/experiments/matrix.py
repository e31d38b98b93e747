"""Experiment kind ``matrix``: STIR(m_j | m_i) for every ordered pair of a list of models.

Row i is the reference (whose IRIs are made), column j the target; the diagonal is a model
against its seed twin when ``experiment.seed_twins`` names one (the paper's figures 4 and 8
compare two seeds of one configuration there), else against itself. The plain similarity fills the other panel of the heatmap. A row shares its
reference's arbitrary IRIs (the inversion cache), which makes it the unit of work a shard takes.
"""
from __future__ import annotations

import logging
from functools import partial
from typing import Any, Callable, List, Sequence

import numpy as np

from stir.evaluation.experiments import measure
from stir.evaluation.experiments.registry import register
from stir.evaluation.experiments.report import Report, convergence_rows, mean
from stir.evaluation.pair import evaluate_direction, evaluate_similarity
from stir.evaluation.session import Session
from stir.reporting import plot_matrix_pair

log = logging.getLogger(__name__)


def measure_matrix_row(session: Session, names: Sequence[str], i: int):
    """Row i of a matrix: STIR(m_j | m_i) for every j, and S(m_i, m_j) for j >= i (None below)."""
    cfg = session.cfg
    images = session.images(names[0])  # one image set for the whole matrix
    draws = session.stir_images(names[0])  # the same, or one set per draw (resample_images)
    twins = dict(cfg.experiment.seed_twins or {})
    ref, directions, similarities = names[i], [], []
    for j, target in enumerate(names):
        if i == j:
            target = twins.get(ref, ref)
        # adversarial IRIs against oneself are meaningless
        iri = "arbitrary" if target == ref else cfg.iri
        log.info("matrix: STIR(%s | %s)", target, ref)
        ids, record = (session.model(ref).identity, session.model(target).identity), session.record(ref, target)
        directions.append(evaluate_direction(
            session.network(ref), session.network(target), draws, "penultimate", "penultimate",
            measure=cfg.measure, k=cfg.k, iri=iri, inversion=cfg.inversion, difficulty=cfg.difficulty,
            names=(ref, target), ids=ids, store=session.store, record=record))
        similarities.append(None if j < i else evaluate_similarity(
            session.network(ref), session.network(target), images, "penultimate", measure=cfg.measure,
            names=(ref, target), ids=ids, store=session.store, record=record))
    return directions, similarities


def run_matrix(session: Session, names: Sequence[str], title: str) -> Report:
    """STIR(m_j|m_i) for every ordered pair (diagonal: a model against itself), CKA beside it."""
    cfg = session.cfg
    report = Report(title)
    m = len(names)
    stir, stir_adv, sim = (np.full((m, m), np.nan) for _ in range(3))
    rows, convergence = [], []
    for i in range(m):
        directions, similarities = measure_matrix_row(session, names, i)
        for j, (d, s) in enumerate(zip(directions, similarities)):
            stir[i, j], stir_adv[i, j] = mean(d.stir), mean(d.stir_adv)
            rows.append(d.to_row())
            convergence += convergence_rows(d)
            if s is not None:
                sim[i, j] = sim[j, i] = s.value
    report.tables["directions"] = (rows, None)
    report.tables["convergence"] = (convergence, None)
    for name, values in (("stir", stir), ("stir_adv", stir_adv), (cfg.measure, sim)):
        table = [{"m1 (ref) \\ m2 (target)": ref, **{t: float(values[i, j]) for j, t in enumerate(names)}}
                 for i, ref in enumerate(names)]
        report.tables[f"matrix_{name}"] = (table, None)
        report.display[f"matrix_{name}"] = [{k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in r.items()} for r in table]
    twins = dict(cfg.experiment.seed_twins or {})
    shown = list(names) + [t for n, t in twins.items() if n in names]
    accuracy = [{"model": n, **{k: round(v, 4) for k, v in session.model(n).metrics().items()}} for n in shown]
    report.tables["accuracy"] = (accuracy, None)
    report.display["accuracy"] = accuracy
    diagonal = "diagonal: each model vs its seed twin" if twins else "diagonal: each model vs itself"
    report.figures["matrix_stir"] = plot_matrix_pair(
        stir, sim, names, names, session.out / "matrix_stir.png", title,
        left_title=f"STIR(m2|m1): row m1 = reference, column m2 = target ({diagonal})", right_title=cfg.measure,
        right_value_label=cfg.measure)
    if cfg.iri in ("adversarial", "both"):
        report.figures["matrix_stir_adv"] = plot_matrix_pair(
            stir_adv, sim, names, names, session.out / "matrix_stir_adv.png", title + " (adversarial IRIs)",
            left_title="STIR_adv(m2|m1)", left_value_label="STIR_adv(m2|m1)", right_title=cfg.measure,
            right_value_label=cfg.measure)
    off = ~np.eye(m, dtype=bool)
    report.summary["mean_offdiagonal_stir"] = float(np.nanmean(stir[off])) if m > 1 else float("nan")
    report.figures["iri_examples"] = measure.iri_grid(session, names[0], names[1] if m > 1 else names[0])
    return report


def run(session: Session) -> Report:
    exp = session.cfg.experiment
    return run_matrix(session, list(exp.models), exp.description or exp.name)


def units(session: Session) -> List[Callable[[], Any]]:
    names = list(session.cfg.experiment.models)
    return [partial(measure_matrix_row, session, names, i) for i in range(len(names))]


register("matrix", run, units)
