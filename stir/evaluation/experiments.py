"""The comparisons ``evaluate.py`` runs: one pair, a list of pairs, a matrix, incremental chains.

Each runner measures through ``stir.evaluation`` (results stored as they finish, reused on rerun)
and returns a ``Report``: tables (numeric rows for CSV, formatted rows for reading), figures and
headline numbers. Conventions: m1 = reference (the model whose IRIs are made), m2 = target; in a
matrix, row i is the reference and column j the target, entry = STIR(m_j | m_i).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from stir.evaluation.layers import evaluate_layers
from stir.evaluation.pair import evaluate_direction, evaluate_pair, evaluate_similarity
from stir.evaluation.results import PairResult, Stat
from stir.evaluation.session import Session
from stir.inversion import invert, invert_adversarial
from stir.reporting import mean_std, plot_incremental, plot_iri_grid, plot_layerwise, plot_matrix_pair

log = logging.getLogger(__name__)

Rows = List[Dict[str, Any]]


@dataclass
class Report:
    title: str
    tables: Dict[str, Tuple[Rows, Optional[List[str]]]] = field(default_factory=dict)  # name -> (rows, columns)
    display: Dict[str, Rows] = field(default_factory=dict)  # name -> formatted rows (terminal, Markdown)
    figures: Dict[str, Path] = field(default_factory=dict)
    summary: Dict[str, float] = field(default_factory=dict)


def _ms(stat: Optional[Stat]) -> str:
    return mean_std(stat.mean, stat.std) if stat is not None else "-"


def _mean(stat: Optional[Stat]) -> float:
    """A stat's mean; NaN when it was not computed (another IRI kind or direction)."""
    return stat.mean if stat is not None else math.nan


def _std(stat: Optional[Stat]) -> float:
    return stat.std if stat is not None else math.nan


def pair_display(result: PairResult) -> Dict[str, Any]:
    """One readable row: the paper's table 1 columns, both directions, mean ± std over k draws."""
    return {
        "m1 (ref)": result.ref, "m2 (target)": result.target,
        "taps": result.tap_ref if result.tap_ref == result.tap_target else f"{result.tap_ref} / {result.tap_target}",
        "STIR(m2|m1)": _ms(result.stir_m2_given_m1), "STIR(m1|m2)": _ms(result.stir_m1_given_m2),
        "STIR_adv(m2|m1)": _ms(result.stir_adv_m2_given_m1), "STIR_adv(m1|m2)": _ms(result.stir_adv_m1_given_m2),
        result.measure: f"{result.similarity:.3f}",
        "agree on m1 IRIs": _ms(result.agreement_on_m1_iris), "agree on m2 IRIs": _ms(result.agreement_on_m2_iris),
        "difficulty(m2|m1)": _ms(result.difficulty_m2_given_m1), "difficulty(m1|m2)": _ms(result.difficulty_m1_given_m2),
        "notes": "; ".join(result.notes),
    }


def _pair(session: Session, ref: str, target: str, tap: str) -> PairResult:
    cfg = session.cfg
    return evaluate_pair(
        session.network(ref), session.network(target), session.images(ref), tap, tap,
        measure=cfg.measure, k=cfg.k, iri=cfg.iri, inversion=cfg.inversion, names=(ref, target),
        ids=(session.model(ref).identity, session.model(target).identity), store=session.store,
        record=session.record(ref, target),
    )


def _layers(session: Session, ref: str, target: str):
    cfg = session.cfg
    taps = None if cfg.layers == "all" else list(cfg.layers)
    return evaluate_layers(
        session.network(ref), session.network(target), session.images(ref), taps=taps, measure=cfg.measure,
        k=cfg.k, iri=cfg.iri, inversion=cfg.inversion, names=(ref, target),
        ids=(session.model(ref).identity, session.model(target).identity), store=session.store,
        record=session.record(ref, target),
    )


def run_pairs(session: Session, pairs: Sequence[Tuple[str, str]], title: str) -> Report:
    """Each (ref, target) pair at the penultimate tap (or per tap with layers=all / a list)."""
    report = Report(title)
    rows, display = [], []
    layerwise = session.cfg.layers != "penultimate"
    for ref, target in pairs:
        log.info("pair %s (m1) vs %s (m2)", ref, target)
        if layerwise:
            result = _layers(session, ref, target)
            rows += [{**r, "pair": f"{ref} vs {target}"} for r in result.to_rows()]
            display += [{"depth": f"{d:.2f}", **pair_display(r)} for r, d in zip(result.rows, result.depths)]
            series, errors, fits = {}, {}, {}
            for name, key in ((f"STIR({target}|{ref})", "stir_m2_given_m1"), (f"STIR({ref}|{target})", "stir_m1_given_m2")):
                stats = [getattr(r, key) for r in result.rows]
                series[name], errors[name] = [_mean(st) for st in stats], [_std(st) for st in stats]
                if key in result.fits:
                    fits[name] = (result.fits[key]["slope"], result.fits[key]["intercept"])
                    report.summary[f"slope/{name}"] = result.fits[key]["slope"]
            report.figures[f"layers_{ref}_vs_{target}"] = plot_layerwise(
                result.depths, series, session.out / f"layers_{ref}_vs_{target}.png",
                f"Layer-wise STIR ({session.cfg.measure}): {ref} vs {target}", fits=fits, errors=errors)
        else:
            result = _pair(session, ref, target, "penultimate")
            rows.append(result.to_row())
            display.append(pair_display(result))
            for name, stat in ((f"STIR({target}|{ref})", result.stir_m2_given_m1), (f"STIR({ref}|{target})", result.stir_m1_given_m2)):
                if stat is not None:
                    report.summary[name] = stat.mean
    report.tables["pairs"] = (rows, None)
    report.display["pairs"] = display
    ref, target = pairs[0]
    report.figures["iri_examples"] = iri_grid(session, ref, target)
    return report


def measure_matrix_row(session: Session, names: Sequence[str], i: int):
    """Row i of a matrix: STIR(m_j | m_i) for every j, and S(m_i, m_j) for j >= i (None below).

    A row shares its reference's arbitrary IRIs (the inversion cache), which makes it the unit of
    work that a shard takes.
    """
    cfg = session.cfg
    images = session.images(names[0])  # one image set for the whole matrix
    ref, directions, similarities = names[i], [], []
    for j, target in enumerate(names):
        iri = "arbitrary" if i == j else cfg.iri  # adversarial IRIs against oneself are meaningless
        log.info("matrix: STIR(%s | %s)", target, ref)
        ids, record = (session.model(ref).identity, session.model(target).identity), session.record(ref, target)
        directions.append(evaluate_direction(
            session.network(ref), session.network(target), images, "penultimate", "penultimate",
            measure=cfg.measure, k=cfg.k, iri=iri, inversion=cfg.inversion, names=(ref, target), ids=ids,
            store=session.store, record=record))
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
    rows = []
    for i in range(m):
        directions, similarities = measure_matrix_row(session, names, i)
        for j, (d, s) in enumerate(zip(directions, similarities)):
            stir[i, j], stir_adv[i, j] = _mean(d.stir), _mean(d.stir_adv)
            rows.append(d.to_row())
            if s is not None:
                sim[i, j] = sim[j, i] = s.value
    report.tables["directions"] = (rows, None)
    for name, values in (("stir", stir), ("stir_adv", stir_adv), (cfg.measure, sim)):
        table = [{"m1 (ref) \\ m2 (target)": ref, **{t: float(values[i, j]) for j, t in enumerate(names)}}
                 for i, ref in enumerate(names)]
        report.tables[f"matrix_{name}"] = (table, None)
        report.display[f"matrix_{name}"] = [{k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in r.items()} for r in table]
    accuracy = [{"model": n, **{k: round(v, 4) for k, v in session.model(n).metrics().items()}} for n in names]
    report.tables["accuracy"] = (accuracy, None)
    report.display["accuracy"] = accuracy
    report.figures["matrix_stir"] = plot_matrix_pair(
        stir, sim, names, names, session.out / "matrix_stir.png", title,
        left_title="STIR(m2|m1): row m1 = reference, column m2 = target", right_title=cfg.measure,
        right_value_label=cfg.measure)
    if cfg.iri in ("adversarial", "both"):
        report.figures["matrix_stir_adv"] = plot_matrix_pair(
            stir_adv, sim, names, names, session.out / "matrix_stir_adv.png", title + " (adversarial IRIs)",
            left_title="STIR_adv(m2|m1)", left_value_label="STIR_adv(m2|m1)", right_title=cfg.measure,
            right_value_label=cfg.measure)
    off = ~np.eye(m, dtype=bool)
    report.summary["mean_offdiagonal_stir"] = float(np.nanmean(stir[off])) if m > 1 else float("nan")
    report.figures["iri_examples"] = iri_grid(session, names[0], names[1] if m > 1 else names[0])
    return report


def _links(chain: Sequence[str]) -> List[Tuple[str, str]]:
    """Consecutive (m_t-1, m_t) of an incremental chain."""
    return list(zip(chain[:-1], chain[1:]))


def run_incremental(session: Session, chains: Dict[str, Sequence[str]], title: str) -> Report:
    """For each chain m_1, m_2, ... (growing training sets): STIR(m_t|m_t-1) and STIR(m_t-1|m_t)."""
    report = Report(title)
    rows, display, sizes, series, errors = [], [], {}, {}, {}
    for label, chain in chains.items():
        fwd, bwd, xs = [], [], []
        for prev, cur in _links(chain):
            result = _pair(session, prev, cur, "penultimate")  # m1 = m_t-1, m2 = m_t
            size = session.data_config(cur).train_size or float("nan")
            rows.append({"chain": label, "train_size": size, **result.to_row()})
            display.append({"chain": label, "train_size": size, **pair_display(result)})
            xs.append(size)
            fwd.append(result.stir_m2_given_m1)
            bwd.append(result.stir_m1_given_m2)
        for name, stats in ((f"{label}: STIR(m_t|m_t-1)", fwd), (f"{label}: STIR(m_t-1|m_t)", bwd)):
            sizes[name] = xs
            series[name], errors[name] = [_mean(s) for s in stats], [_std(s) for s in stats]
    report.tables["incremental"] = (rows, None)
    report.display["incremental"] = display
    report.figures["incremental"] = plot_incremental(sizes, series, session.out / "incremental.png", title, errors=errors)
    return report


def iri_grid(session: Session, ref: str, target: str) -> Path:
    """A few originals beside m1's and m2's arbitrary IRIs and the adversarial IRIs of the pair."""
    cfg = session.cfg
    x = session.images(ref)[: cfg.iri_grid_images]
    m1, m2 = session.network(ref), session.network(target)
    rows = {
        f"IRIs of {ref}": invert(m1, x, "penultimate", cfg.inversion).x_prime,
        f"IRIs of {target}": invert(m2, x, "penultimate", cfg.inversion).x_prime,
    }
    if cfg.iri in ("adversarial", "both") and ref != target:
        rows[f"adversarial: {ref} matched, {target} pushed"] = invert_adversarial(m1, m2, x, "penultimate", "penultimate", cfg.inversion).x_prime
    return plot_iri_grid(x.cpu(), {k: v.cpu() for k, v in rows.items()}, session.out / "iri_examples.png",
                         f"Example IRIs (penultimate): {ref} and {target}", max_images=cfg.iri_grid_images)


def run(session: Session) -> Report:
    cfg = session.cfg
    exp = cfg.experiment
    title = exp.description or exp.name
    if exp.kind == "pair":
        return run_pairs(session, [(cfg.ref, cfg.target)], f"{cfg.ref} (m1) vs {cfg.target} (m2)")
    if exp.kind == "pairs":
        return run_pairs(session, [tuple(p) for p in exp.pairs], title)
    if exp.kind == "matrix":
        return run_matrix(session, list(exp.models), title)
    if exp.kind == "incremental":
        return run_incremental(session, {k: list(v) for k, v in exp.chains.items()}, title)
    raise ValueError(f"experiment.kind={exp.kind!r}; choose one of pair, pairs, matrix, incremental")


def work_units(session: Session) -> List[Callable[[], Any]]:
    """The experiment's independent measurements, in a fixed order: a pair, a matrix row, a link.

    ``run`` computes them all (reading what the store holds); ``run_shard`` computes every
    ``shards``-th one, so that several processes (one per GPU) can share an experiment's work.
    """
    cfg, exp = session.cfg, session.cfg.experiment
    if exp.kind in ("pair", "pairs"):
        pairs = [(cfg.ref, cfg.target)] if exp.kind == "pair" else [tuple(p) for p in exp.pairs]
        if cfg.layers != "penultimate":
            return [partial(_layers, session, ref, target) for ref, target in pairs]
        return [partial(_pair, session, ref, target, "penultimate") for ref, target in pairs]
    if exp.kind == "matrix":
        return [partial(measure_matrix_row, session, list(exp.models), i) for i in range(len(exp.models))]
    if exp.kind == "incremental":
        return [partial(_pair, session, a, b, "penultimate") for chain in exp.chains.values() for a, b in _links(list(chain))]
    raise ValueError(f"experiment.kind={exp.kind!r}; choose one of pair, pairs, matrix, incremental")


def run_shard(session: Session, shard: int, shards: int) -> int:
    """Compute units shard, shard + shards, ... of the experiment into the store; how many were taken.

    Shards write to the same results store (one atomic file per measurement), so they may run at
    the same time on different devices; a run without shards then assembles the report from the
    store without recomputing anything.
    """
    units = work_units(session)[shard::shards]
    for unit in units:
        unit()
    return len(units)
