"""Experiment kind ``layer_matching``: Kornblith et al. 2019, section 6.1 / table 2, with STIR.

Seed models (``experiment.models``, at least two, one architecture and recipe) are read at the taps
of ``layers`` on the same n images of ``split``. Every measure of ``layer_matching.measures`` ([] =
all registered, and rbf_cka_0.8 as in the paper) gets a grid per ordered pair and its matching
accuracy (``stir.evaluation.layer_matching``); one store entry per measure. STIR
(``layer_matching.stir``) needs arbitrary IRIs of every tap of every model (``evaluate_direction``
with the session's inversion settings and store; the inversion cache shares them across targets):
one unit of work per reference model.
"""
from __future__ import annotations

import logging
from functools import partial
from typing import Any, Callable, Dict, List

import numpy as np

from stir.evaluation.experiments.judging import digest, flat_representations, stored, taps_of
from stir.evaluation.experiments.registry import register
from stir.evaluation.experiments.report import Report
from stir.evaluation.layer_matching import (
    KORNBLITH_TABLE2, MAX_ASSIGNMENT_DIM, LayerMatchingResult, check_measures, check_seed_models, layer_matching,
)
from stir.evaluation.pair import evaluate_direction
from stir.evaluation.session import Session
from stir.reporting import plot_iri_grid, plot_matrix

log = logging.getLogger(__name__)
KIND = "layer_matching"
STIR_NAMES = ("STIR(m2|m1)", "STIR(m1|m2)", "STIR(mean)")


def _setup(session: Session):
    models = check_seed_models(session.cfg.experiment.models)
    taps = taps_of(session, models[0])
    return models, taps, session.images(models[0])


def measure_all(session: Session) -> Dict[str, LayerMatchingResult]:
    """Every measure's layer matching over every ordered pair (one stored entry per measure)."""
    models, taps, images = _setup(session)
    measures = check_measures(session.cfg.layer_matching.measures)
    reps: Dict[str, Any] = {}

    def representations() -> Dict[str, List]:
        if not reps:
            for m in models:
                by_tap = flat_representations(session.network(m), images, taps, session.cfg.inversion.eval_batch_size)
                reps[m] = [by_tap[t] for t in taps]
        return reps

    ids = [session.model(m).identity for m in models]
    out = {}
    for measure in measures:
        parts = dict(models=ids, taps=taps, images=digest(images), measure=measure, max_assignment_dim=MAX_ASSIGNMENT_DIM)
        log.info("layer matching: %s", measure)
        out[measure] = stored(session.store, KIND, parts,
                              lambda: layer_matching(representations(), taps, [measure])[measure],
                              LayerMatchingResult.from_dict, session.record(*models))
    return out


def stir_row(session: Session, ref: str) -> Dict[str, np.ndarray]:
    """STIR(target at j | ref at i) for every target and every (i, j): {target: (L, L)}."""
    models, taps, images = _setup(session)
    cfg = session.cfg
    grids = {}
    for target in models:
        if target == ref:
            continue
        grid = np.full((len(taps), len(taps)), np.nan)
        record = session.record(ref, target)
        for i, tap_ref in enumerate(taps):
            for j, tap_tgt in enumerate(taps):
                d = evaluate_direction(
                    session.network(ref), session.network(target), images, tap_ref, tap_tgt, measure=cfg.measure,
                    k=cfg.k, iri="arbitrary", inversion=cfg.inversion, names=(ref, target),
                    ids=(session.model(ref).identity, session.model(target).identity), store=session.store,
                    record=record)
                grid[i, j] = d.stir.mean
        grids[target] = grid
    return grids


def stir_results(session: Session) -> Dict[str, LayerMatchingResult]:
    """STIR's three layer-matching results from every reference's grids."""
    models, taps, _ = _setup(session)
    d = {ref: stir_row(session, ref) for ref in models}  # d[ref][tgt][i, j] = STIR(tgt_j | ref_i)
    pairs = [(a, b) for a in models for b in models if a != b]
    forward = [d[a][b] for a, b in pairs]  # rows = layers of a: IRIs of a_i measured at b_j
    backward = [d[b][a].T for a, b in pairs]  # IRIs of b_j measured at a_i
    grids = {STIR_NAMES[0]: forward, STIR_NAMES[1]: backward,
             STIR_NAMES[2]: [(f + g) / 2 for f, g in zip(forward, backward)]}
    note = f"inner measure {session.cfg.measure}, k={session.cfg.k}, n={session.cfg.n}, inversion steps {session.cfg.inversion.steps}"
    return {name: LayerMatchingResult(name, taps, pairs, [g.tolist() for g in gs], False, [note]) for name, gs in grids.items()}


def run(session: Session) -> Report:
    cfg = session.cfg
    models, taps, images = _setup(session)
    report = Report(cfg.experiment.description or cfg.experiment.name)
    results = measure_all(session)
    if cfg.layer_matching.stir:
        results.update(stir_results(session))
    rows, display = [], []
    for name, res in results.items():
        paper = KORNBLITH_TABLE2.get(name)
        row = {"measure": name, "accuracy": res.accuracy, "undefined_layers": res.undefined,
               "pairs": len(res.pairs), "layers": len(taps), "kornblith_2019": paper,
               **{f"acc@{t}": a for t, a in zip(taps, res.per_layer)}}
        rows.append(row)
        display.append({"measure": name, "accuracy": f"{res.accuracy:.1%}" if res.accuracy == res.accuracy else "undefined",
                        "undefined (pair, layer)": res.undefined,
                        "Kornblith et al. 2019": f"{paper:.1%}" if paper is not None else "-"})
        path = session.out / f"grid_{name.replace('|', '_given_').replace('(', '_').replace(')', '')}.png"
        report.figures[f"grid_{name}"] = plot_matrix(
            res.mean_grid, taps, taps, path, f"{name}: mean over {len(res.pairs)} ordered seed pairs (accuracy {res.accuracy:.0%})",
            row_axis="layer i of model a", col_axis="layer j of model b", value_label=name, vmin=None, vmax=None)
        report.summary[f"accuracy/{name}"] = res.accuracy
    report.tables["layer_matching"] = (rows, None)
    report.display["layer_matching"] = display
    report.figures["images"] = plot_iri_grid(
        images[: cfg.iri_grid_images].cpu(), {}, session.out / "images.png",
        f"The first {min(cfg.iri_grid_images, images.shape[0])} of the n={images.shape[0]} images X ({cfg.split} split, seed {cfg.image_seed})",
        max_images=cfg.iri_grid_images, original_label="X")
    report.tables["setup"] = ([{"models": ", ".join(models), "taps": ", ".join(taps), "n": images.shape[0],
                                "split": cfg.split, "image_seed": cfg.image_seed, "images_sha256": digest(images)}], None)
    return report


def units(session: Session) -> List[Callable[[], Any]]:
    models, _, _ = _setup(session)
    out: List[Callable[[], Any]] = [partial(measure_all, session)]
    if session.cfg.layer_matching.stir:
        out += [partial(stir_row, session, ref) for ref in models]
    return out


register("layer_matching", run, units)
