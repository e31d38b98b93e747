"""Experiment kind ``layer_matching``: Kornblith et al. 2019, section 6.1 / table 2, with STIR.

Seed models (``models``, at least two, one architecture and recipe) are read at the taps of
``layers`` on the same n images of ``split``. Every measure of ``measures`` ([] = all registered,
and rbf_cka_0.8 as in the paper) gets a grid per ordered pair and its matching accuracy
(``stir.judging.layer_matching``); one store entry per measure. STIR (``stir``) needs arbitrary IRIs
of every tap of every model (``Context.direction`` with the evaluation's estimator and store; the
inversion cache shares them across targets): one unit of work per reference model.
"""
from __future__ import annotations

import logging
from functools import partial
from typing import Any, Callable, Dict, List, Tuple

import numpy as np
from torch import Tensor

from stir.experiments.context import Context
from stir.experiments.judging import digest, flat_representations, taps_of
from stir.experiments.layer_matching_config import LayerMatchingConfig  # noqa: F401  (the kind's config, torch-free)
from stir.experiments.registry import Kind, Unit, register
from stir.judging.layer_matching import (
    KORNBLITH_TABLE2, MAX_ASSIGNMENT_DIM, LayerMatchingResult, check_measures, check_seed_models, layer_matching,
)
from stir.reporting import Figure, Report, Table, plot_iri_grid, plot_matrix
from stir.zoo import Model

log = logging.getLogger(__name__)
KIND = "layer_matching"
STIR_NAMES = ("STIR(m2|m1)", "STIR(m1|m2)", "STIR(mean)")


def _check(cfg: LayerMatchingConfig) -> None:
    check_seed_models(cfg.models)
    check_measures(cfg.measures)


def _setup(ctx: Context, cfg: LayerMatchingConfig) -> Tuple[List[Model], List[str], Tensor]:
    models = [ctx.model(name) for name in check_seed_models(cfg.models)]
    return models, taps_of(ctx.layers, models[0]), ctx.images(models[0])


def measure_all(ctx: Context, cfg: LayerMatchingConfig) -> Dict[str, LayerMatchingResult]:
    """Every measure's layer matching over every ordered pair (one stored entry per measure)."""
    models, taps, images = _setup(ctx, cfg)
    reps: Dict[str, Any] = {}

    def representations() -> Dict[str, List]:
        if not reps:
            for m in models:
                by_tap = flat_representations(m, images, taps, ctx.run.eval_batch_size)
                reps[m.label] = [by_tap[t] for t in taps]
        return reps

    ids = [ctx.identity(m) for m in models]  # probed: what each computes (stir.models.behaviour)
    out = {}
    for measure in check_measures(cfg.measures):
        parts = dict(models=ids, taps=taps, images=digest(images), measure=measure, max_assignment_dim=MAX_ASSIGNMENT_DIM)
        log.info("layer matching: %s", measure)
        out[measure] = ctx.store.cached(KIND, parts, lambda: layer_matching(representations(), taps, [measure])[measure],
                                        LayerMatchingResult.from_dict, ctx.record(*models))
    return out


def stir_row(ctx: Context, cfg: LayerMatchingConfig, ref: Model) -> Dict[str, np.ndarray]:
    """STIR(target at j | ref at i) for every target and every (i, j): {target label: (L, L)}."""
    models, taps, images = _setup(ctx, cfg)
    grids = {}
    for target in models:
        if target.label == ref.label:
            continue
        grid = np.full((len(taps), len(taps)), np.nan)
        for i, tap_ref in enumerate(taps):
            for j, tap_target in enumerate(taps):
                grid[i, j] = ctx.direction(ref, target, tap_ref, tap_target, images=images, iri="arbitrary").stir.mean
        grids[target.label] = grid
    return grids


def stir_results(ctx: Context, cfg: LayerMatchingConfig) -> Dict[str, LayerMatchingResult]:
    """STIR's three layer-matching results from every reference's grids."""
    models, taps, _ = _setup(ctx, cfg)
    d = {ref.label: stir_row(ctx, cfg, ref) for ref in models}  # d[ref][tgt][i, j] = STIR(tgt_j | ref_i)
    labels = [m.label for m in models]
    pairs = [(a, b) for a in labels for b in labels if a != b]
    forward = [d[a][b] for a, b in pairs]  # rows = layers of a: IRIs of a_i measured at b_j
    backward = [d[b][a].T for a, b in pairs]  # IRIs of b_j measured at a_i
    grids = {STIR_NAMES[0]: forward, STIR_NAMES[1]: backward,
             STIR_NAMES[2]: [(f + g) / 2 for f, g in zip(forward, backward)]}
    inversion = ctx.estimator.inversion
    note = f"inner measure {ctx.estimator.measure}, k={ctx.estimator.k}, n={ctx.images_spec.n}, inversion steps {inversion.steps}"
    return {name: LayerMatchingResult(name, taps, pairs, [g.tolist() for g in gs], False, [note]) for name, gs in grids.items()}


def run(ctx: Context, cfg: LayerMatchingConfig) -> Report:
    models, taps, images = _setup(ctx, cfg)
    report = Report(cfg.description or cfg.name)
    results = measure_all(ctx, cfg)
    if cfg.stir:
        results.update(stir_results(ctx, cfg))
    numeric, display = [], []
    for name, res in results.items():
        paper = KORNBLITH_TABLE2.get(name)
        numeric.append({"measure": name, "accuracy": res.accuracy, "undefined_layers": res.undefined,
                        "pairs": len(res.pairs), "layers": len(taps), "kornblith_2019": paper,
                        **{f"acc@{t}": a for t, a in zip(taps, res.per_layer)}})
        display.append({"measure": name, "accuracy": f"{res.accuracy:.1%}" if res.accuracy == res.accuracy else "undefined",
                        "undefined (pair, layer)": res.undefined,
                        "Kornblith et al. 2019": f"{paper:.1%}" if paper is not None else "-"})
        report.figures[f"grid_{name.replace('|', '_given_').replace('(', '_').replace(')', '')}"] = Figure(plot_matrix, dict(
            values=res.mean_grid, row_labels=taps, col_labels=taps,
            title=f"{name}: mean over {len(res.pairs)} ordered seed pairs (accuracy {res.accuracy:.0%})",
            row_axis="layer i of model a", col_axis="layer j of model b", value_label=name, vmin=None, vmax=None))
        report.summary[f"accuracy/{name}"] = res.accuracy
    report.tables["layer_matching"] = Table(numeric, display=display)
    count, spec = ctx.iri_grid_images, ctx.images_spec
    report.figures["images"] = Figure(plot_iri_grid, dict(
        originals=images[:count].cpu(), rows={}, max_images=count, original_label="X",
        title=f"The first {min(count, images.shape[0])} of the n={images.shape[0]} images X ({spec.split} split, seed {spec.seed})"))
    report.tables["setup"] = Table([{"models": ", ".join(m.label for m in models), "taps": ", ".join(taps),
                                     "n": images.shape[0], "split": spec.split, "image_seed": spec.seed,
                                     "images_sha256": digest(images)}])
    return report


def units(ctx: Context, cfg: LayerMatchingConfig) -> List[Unit]:
    out = [Unit(f"layer matching: {len(cfg.measures)} measures between every layer of {', '.join(cfg.models)}",
                partial(measure_all, ctx, cfg))]
    if cfg.stir:
        out += [Unit(f"layer matching: STIR from every layer of {name}", partial(stir_row, ctx, cfg, ctx.model(name)))
                for name in check_seed_models(cfg.models)]
    return out


register(Kind("layer_matching", LayerMatchingConfig, run, units, _check))
