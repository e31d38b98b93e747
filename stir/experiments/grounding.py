"""Experiment kind ``grounding``: Ding et al. 2021's tests of which measure tracks function, with STIR.

Probe images: ``n_probe`` held-out images with labels (half train the linear probes, half score
them); the measures see the first ``n`` of them (measures are O(n^2 d) or worse). Seed models
``models`` at the taps of ``layers`` give the depth and PC-deletion tests; ``robustness_models``
(every pair, at the penultimate layer) the robustness axis: F = |robust accuracy difference| (the
models' own test/robust_acc) and the prediction disagreement on adversarial examples (each model's
PGD examples of the probe images under its recipe's eval_attack, both sets pooled). STIR enters the
depth test (pairs of two different models) and the robustness tests as 1 - STIR in each direction
(``Context.direction`` on the n images of ``split``, arbitrary IRIs, the evaluation's estimator and
store; ``stir``).

Store: one entry per seed test (all measures: the probes are trained once), one per (robustness
test, measure), so an interrupted run resumes where it stopped.
"""
from __future__ import annotations

import itertools
import logging
import math
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from stir.attacks.pgd import pgd_l2
from stir.config.validate import ConfigError, check_choice
from stir.experiments.context import Context
from stir.experiments.grounding_config import GroundingConfig  # noqa: F401  (the kind's config, torch-free)
from stir.experiments.judging import digest, flat_representations, taps_of
from stir.experiments.registry import Kind, Unit, register
from stir.judging.grounding import GroundingTest, Point, depth_test, dissimilarity, pc_deletion_test
from stir.judging.layer_matching import MAX_ASSIGNMENT_DIM, check_measures, check_seed_models
from stir.models import frozen
from stir.reporting import Figure, Report, Table
from stir.reporting.scatter import plot_scatter_grid
from stir.zoo import Model

log = logging.getLogger(__name__)
KIND = "grounding"
PENULTIMATE = "penultimate"
STIR_NAMES = ("1-STIR(m2|m1)", "1-STIR(m1|m2)")


def _check(cfg: GroundingConfig) -> None:
    check_seed_models(cfg.models)
    check_measures(cfg.measures)
    check_choice("experiment.pc_order", cfg.pc_order, ("top", "bottom"))
    robust = list(cfg.robustness_models)
    if robust and len(set(robust)) < 3:
        raise ConfigError(f"experiment.robustness_models={robust}: the robustness axis needs at least 3 distinct models "
                          "(3 pairs for a rank correlation); pass [] to skip it")


class _Data:
    """Probe images, labels and representations of one run, computed once and on demand."""

    def __init__(self, ctx: Context, cfg: GroundingConfig):
        self.ctx, self.cfg = ctx, cfg
        self.models = [ctx.model(name) for name in check_seed_models(cfg.models)]
        self.measures = check_measures(cfg.measures)
        self.taps = taps_of(ctx.layers, self.models[0])
        self.images, self.labels = ctx.labelled_images(self.models[0], "holdout", cfg.n_probe)
        self._reps: Dict[str, Dict[str, torch.Tensor]] = {}
        self.adversarial_predictions: Dict[Tuple[str, str], torch.Tensor] = {}  # (attacked, judged) -> (n,)

    def reps(self, model: Model, taps=None) -> Dict[str, torch.Tensor]:
        taps = list(taps or self.taps)
        have = self._reps.setdefault(model.label, {})
        missing = [t for t in taps if t not in have]
        if missing:
            have.update(flat_representations(model, self.images, missing, self.ctx.run.eval_batch_size))
        return {t: have[t] for t in taps}

    def seed_reps(self) -> Dict[str, torch.Tensor]:
        return {f"{m.label}/{t}": r for m in self.models for t, r in self.reps(m).items()}

    def parts(self, test: str, measures, models: List[Model]) -> Dict[str, Any]:
        cfg = self.cfg
        return dict(test=test, measures=measures, models=[self.ctx.identity(m) for m in models], taps=self.taps,
                    images=digest(self.images), n=self.ctx.images_spec.n,
                    ks=list(cfg.pc_ks) if test == "pc_deletion" else None,
                    pc_order=cfg.pc_order if test == "pc_deletion" else None, max_assignment_dim=MAX_ASSIGNMENT_DIM)


def seed_tests(ctx: Context, cfg: GroundingConfig, data: Optional[_Data] = None) -> List[GroundingTest]:
    """The depth and PC-deletion tests, every measure (one stored entry per test: probes computed once)."""
    data = data or _Data(ctx, cfg)
    out = []
    m = min(ctx.images_spec.n, data.labels.shape[0])  # the measures see the first n probe images
    for test, make in (("depth", lambda: depth_test(data.seed_reps(), data.labels, data.measures, m)),
                       ("pc_deletion", lambda: pc_deletion_test(data.seed_reps(), data.labels, cfg.pc_ks, data.measures,
                                                                  m, cfg.pc_order))):
        log.info("grounding %s: %d measures", test, len(data.measures))
        out.append(ctx.store.cached(KIND, data.parts(test, data.measures, data.models), make, GroundingTest.from_dict,
                                    ctx.record(*data.models)))
    if cfg.stir:
        _add_depth_stir(ctx, data, out[0])
    return out


def _add_depth_stir(ctx: Context, data: _Data, depth: GroundingTest) -> None:
    """1 - STIR in both directions for every depth pair of two *different* models (a_i, b_j).

    STIR(b_j | a_i): arbitrary IRIs of model a's tap i (the n images of ``split``, not the probe
    images), measured at model b's tap j; one stored direction each (the inversion cache shares
    every reference's IRIs across targets). Pairs within one model get no STIR.
    """
    by_label = {m.label: m for m in data.models}
    images = ctx.images(data.models[0])
    for point in depth.points:
        first, second = point.label.split(" vs ")
        (a, tap_a), (b, tap_b) = first.rsplit("/", 1), second.rsplit("/", 1)
        if a == b:
            continue
        for name, (ref, tap_ref, tgt, tap_target) in zip(STIR_NAMES, ((a, tap_a, b, tap_b), (b, tap_b, a, tap_a))):
            d = ctx.direction(by_label[ref], by_label[tgt], tap_ref, tap_target, images=images, iri="arbitrary")
            point.dissimilarity[name] = 1.0 - d.stir.mean
    depth.notes.append(f"1-STIR: {STIR_NAMES[0]} with m1 = the first representation of a pair, on the "
                       f"n={ctx.images_spec.n} images of split {ctx.images_spec.split!r} (the other measures: the probe "
                       "images); pairs of two models only")


def _merge(tests: List[GroundingTest]) -> GroundingTest:
    """One test from per-measure entries (same points, one dissimilarity each)."""
    first = tests[0]
    merged = GroundingTest(first.test, first.functional, [Point(p.label, p.functional, dict(p.dissimilarity)) for p in first.points],
                           list(first.notes))
    for t in tests[1:]:
        for p, q in zip(merged.points, t.points):
            if p.label != q.label:
                raise ValueError(f"stored {t.test} entries disagree on their points ({p.label} vs {q.label}); delete the store")
            p.dissimilarity.update(q.dissimilarity)
    return merged


def _adversarial_examples(ctx: Context, data: _Data, model: Model) -> torch.Tensor:
    """``model``'s PGD examples of the probe images under its recipe's eval_attack: (n, c, h, w)."""
    if model.train is None:
        raise ValueError(f"{model.label!r} was not trained by this project: it has no eval_attack recipe for the "
                         "adversarial-disagreement test; name zoo models in experiment.robustness_models")
    gen = torch.Generator(device=data.images.device).manual_seed(ctx.images_spec.seed)
    return pgd_l2(model.module, data.images, data.labels.to(data.images.device), model.train.eval_attack, generator=gen)


def robustness_tests(ctx: Context, cfg: GroundingConfig, data: Optional[_Data] = None) -> List[GroundingTest]:
    """|robust accuracy difference| and adversarial disagreement over every pair of robustness models."""
    data = data or _Data(ctx, cfg)
    models = [ctx.model(name) for name in cfg.robustness_models]
    measures = list(data.measures) + (list(STIR_NAMES) if cfg.stir else [])

    def compute(measure: str) -> Tuple[GroundingTest, GroundingTest]:
        pairs = list(itertools.combinations(models, 2))
        robust = {m.label: m.metrics.get("test/robust_acc", math.nan) for m in models}
        preds = _disagreement_inputs(ctx, data, models)
        rob = GroundingTest("robust_accuracy", "|robust accuracy difference| (test/robust_acc of each model)")
        dis = GroundingTest("adversarial_disagreement", "prediction disagreement on both models' PGD examples")
        for a, b in pairs:
            d = _pair_dissimilarity(ctx, data, a, b, measure)
            label = f"{a.label} vs {b.label}"
            rob.points.append(Point(label, abs(robust[a.label] - robust[b.label]), {measure: d}))
            both = torch.cat([(preds[(a.label, a.label)] != preds[(a.label, b.label)]),
                              (preds[(b.label, b.label)] != preds[(b.label, a.label)])]).double().mean().item()
            dis.points.append(Point(label, both, {measure: d}))
        return rob, dis

    out: Dict[str, List[GroundingTest]] = {"robust_accuracy": [], "adversarial_disagreement": []}
    inversion = {"steps": ctx.estimator.inversion.steps, "seed": ctx.estimator.inversion.seed, "measure": ctx.estimator.measure}
    for measure in measures:
        log.info("grounding robustness: %s", measure)
        parts = dict(data.parts("robustness", measure, models), n=ctx.images_spec.n, k=ctx.estimator.k, inversion=inversion)
        for i, name in enumerate(("robust_accuracy", "adversarial_disagreement")):
            result = ctx.store.cached(KIND, {**parts, "test": name}, lambda i=i: compute(measure)[i],
                                      GroundingTest.from_dict, ctx.record(*models))
            out[name].append(result)
    return [_merge(tests) for tests in out.values()]


def _disagreement_inputs(ctx: Context, data: _Data, models: List[Model]) -> Dict[Tuple[str, str], torch.Tensor]:
    """preds[(attacked, judged)] (n,): model ``judged``'s predictions on ``attacked``'s PGD examples."""
    preds = data.adversarial_predictions
    for a in models:
        if (a.label, a.label) in preds:
            continue
        x_adv = _adversarial_examples(ctx, data, a)
        for b in models:
            with frozen(b.module), torch.no_grad():
                preds[(a.label, b.label)] = b.module(x_adv).argmax(dim=1).cpu()
    return preds


def _pair_dissimilarity(ctx: Context, data: _Data, a: Model, b: Model, measure: str) -> float:
    if measure in STIR_NAMES:
        ref, tgt = (a, b) if measure == STIR_NAMES[0] else (b, a)
        return 1.0 - ctx.direction(ref, tgt, iri="arbitrary").stir.mean
    m = ctx.images_spec.n
    x, y = data.reps(a, [PENULTIMATE])[PENULTIMATE][:m], data.reps(b, [PENULTIMATE])[PENULTIMATE][:m]
    return dissimilarity(measure, x, y)


def run(ctx: Context, cfg: GroundingConfig) -> Report:
    data = _Data(ctx, cfg)
    tests = seed_tests(ctx, cfg, data)
    if cfg.robustness_models:
        tests += robustness_tests(ctx, cfg, data)
    report = Report(cfg.description or cfg.name)
    measures = list(dict.fromkeys(m for t in tests for m in t.measures()))
    numeric, display = [], []
    for measure in measures:
        row, shown = {"measure": measure}, {"measure": measure}
        for t in tests:
            if measure not in t.measures():
                shown[t.test] = "-"
                continue
            c = t.correlation(measure, cfg.n_boot, ctx.images_spec.seed)
            row.update({f"{t.test}_rho": c.rho, f"{t.test}_low": c.low, f"{t.test}_high": c.high, f"{t.test}_points": c.count})
            shown[t.test] = f"{c.rho:+.2f} [{c.low:+.2f}, {c.high:+.2f}] (m={c.count})" if c.count >= 3 else "undefined"
            report.summary[f"rho/{t.test}/{measure}"] = c.rho
        numeric.append(row)
        display.append(shown)
    report.tables["grounding"] = Table(numeric, display=display)
    for t in tests:
        panels = {}
        for measure in t.measures():
            pts = [p for p in t.points if measure in p.dissimilarity]
            c = t.correlation(measure, cfg.n_boot, ctx.images_spec.seed)
            panels[measure] = ([p.dissimilarity[measure] for p in pts], [p.functional for p in pts],
                               f"rho {c.rho:+.2f} [{c.low:+.2f}, {c.high:+.2f}]")
        report.figures[f"scatter_{t.test}"] = Figure(plot_scatter_grid, dict(
            panels=panels, title=f"Grounding, {t.test}: dissimilarity vs {t.functional}",
            xlabel="dissimilarity", ylabel="functional difference"))
        report.tables[f"points_{t.test}"] = Table([{"pair": p.label, "functional": p.functional, **p.dissimilarity}
                                                   for p in t.points])
    report.tables["notes"] = Table([{"test": t.test, "note": n} for t in tests for n in t.notes])
    return report


def units(ctx: Context, cfg: GroundingConfig) -> List[Unit]:
    out = [Unit("grounding: the depth and PC-deletion tests of every measure", partial(seed_tests, ctx, cfg))]
    if cfg.robustness_models:
        out.append(Unit("grounding: the robustness tests", partial(robustness_tests, ctx, cfg)))
    return out


register(Kind("grounding", GroundingConfig, run, units, _check))
