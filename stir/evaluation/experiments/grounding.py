"""Experiment kind ``grounding``: Ding et al. 2021's tests of which measure tracks function, with STIR.

Probe images: ``grounding.n_probe`` held-out images with labels (half train the linear probes,
half score them); the measures see the first ``n`` of them (measures are O(n^2 d) or worse).
Seed models ``experiment.models`` at the taps of ``layers`` give the depth and PC-deletion tests;
``grounding.robustness_models`` (every pair, at the penultimate layer) the robustness axis: F = |robust accuracy difference| (the models' own
test/robust_acc) and the prediction disagreement on adversarial examples (each model's PGD
examples of the probe images under its recipe's eval_attack, both sets pooled). STIR enters the
depth test (pairs of two different models) and the robustness tests as 1 - STIR in each direction
(``evaluate_direction`` on the n images of ``split``, arbitrary IRIs, the session's inversion
settings and store; ``grounding.stir``).

Store: one entry per seed test (all measures: the probes are trained once), one per (robustness
test, measure), so an interrupted run resumes where it stopped.
"""
from __future__ import annotations

import itertools
import logging
import math
from functools import partial
from typing import Any, Callable, Dict, List, Tuple

import torch

from stir.attacks.pgd import pgd_l2
from stir.evaluation.experiments.judging import digest, flat_representations, labelled_images, stored, taps_of
from stir.evaluation.experiments.registry import register
from stir.evaluation.experiments.report import Report
from stir.evaluation.grounding import (
    GroundingTest, Point, depth_test, dissimilarity, pc_deletion_test,
)
from stir.evaluation.layer_matching import MAX_ASSIGNMENT_DIM, check_measures, check_seed_models
from stir.evaluation.pair import evaluate_direction
from stir.evaluation.session import Session
from stir.models import frozen
from stir.reporting.scatter import plot_scatter_grid

log = logging.getLogger(__name__)
KIND = "grounding"
PENULTIMATE = "penultimate"
STIR_NAMES = ("1-STIR(m2|m1)", "1-STIR(m1|m2)")


class _Data:
    """Probe images, labels and representations of one session, computed once and on demand."""

    def __init__(self, session: Session):
        self.session = session
        cfg = session.cfg
        self.models = check_seed_models(cfg.experiment.models)
        self.measures = check_measures(cfg.grounding.measures)
        robust = list(cfg.grounding.robustness_models)
        if robust and len(set(robust)) < 3:
            raise ValueError(f"grounding.robustness_models={robust}: the robustness axis needs at least 3 distinct models "
                             "(3 pairs for a rank correlation); pass [] to skip it")
        self.taps = taps_of(session, self.models[0])
        self.images, self.labels = labelled_images(session, self.models[0], "holdout", cfg.grounding.n_probe)
        self._reps: Dict[str, Dict[str, torch.Tensor]] = {}
        self.adversarial_predictions: Dict[Tuple[str, str], torch.Tensor] = {}  # (attacked, judged) -> (n,)

    def reps(self, model: str, taps=None) -> Dict[str, torch.Tensor]:
        taps = list(taps or self.taps)
        have = self._reps.setdefault(model, {})
        missing = [t for t in taps if t not in have]
        if missing:
            have.update(flat_representations(self.session.network(model), self.images, missing,
                                             self.session.cfg.inversion.eval_batch_size))
        return {t: have[t] for t in taps}

    def seed_reps(self) -> Dict[str, torch.Tensor]:
        return {f"{m}/{t}": r for m in self.models for t, r in self.reps(m).items()}

    def parts(self, test: str, measures, models: List[str]) -> Dict[str, Any]:
        g = self.session.cfg.grounding
        return dict(test=test, measures=measures, models=[self.session.model(m).identity for m in models],
                    taps=self.taps, images=digest(self.images), n=self.session.cfg.n, ks=list(g.pc_ks) if test == "pc_deletion" else None,
                    pc_order=g.pc_order if test == "pc_deletion" else None,
                    max_assignment_dim=MAX_ASSIGNMENT_DIM)


def seed_tests(session: Session, data: _Data = None) -> List[GroundingTest]:
    """The depth and PC-deletion tests, every measure (one stored entry per test: probes computed once)."""
    data = data or _Data(session)
    ks = session.cfg.grounding.pc_ks
    out = []
    m = min(session.cfg.n, data.labels.shape[0])  # the measures see the first n probe images
    for test, make in (("depth", lambda: depth_test(data.seed_reps(), data.labels, data.measures, m)),
                       ("pc_deletion", lambda: pc_deletion_test(data.seed_reps(), data.labels, ks, data.measures, m,
                                                                  session.cfg.grounding.pc_order))):
        log.info("grounding %s: %d measures", test, len(data.measures))
        out.append(stored(session.store, KIND, data.parts(test, data.measures, data.models), make,
                          GroundingTest.from_dict, session.record(*data.models)))
    if session.cfg.grounding.stir:
        _add_depth_stir(session, data, out[0])
    return out


def _add_depth_stir(session: Session, data: _Data, depth: GroundingTest) -> None:
    """1 - STIR in both directions for every depth pair of two *different* models (a_i, b_j).

    STIR(b_j | a_i): arbitrary IRIs of model a's tap i (the n images of ``split``, not the probe
    images), measured at model b's tap j; one ``evaluate_direction`` each (stored; the inversion
    cache shares every reference's IRIs across targets). Pairs within one model get no STIR.
    """
    cfg = session.cfg
    for point in depth.points:
        first, second = point.label.split(" vs ")
        (a, tap_a), (b, tap_b) = first.rsplit("/", 1), second.rsplit("/", 1)
        if a == b:
            continue
        for name, (ref, tap_ref, tgt, tap_tgt) in zip(STIR_NAMES, ((a, tap_a, b, tap_b), (b, tap_b, a, tap_a))):
            d = evaluate_direction(
                session.network(ref), session.network(tgt), session.images(data.models[0]), tap_ref, tap_tgt,
                measure=cfg.measure, k=cfg.k, iri="arbitrary", inversion=cfg.inversion, names=(ref, tgt),
                ids=(session.model(ref).identity, session.model(tgt).identity), store=session.store,
                record=session.record(ref, tgt))
            point.dissimilarity[name] = 1.0 - d.stir.mean
    depth.notes.append(f"1-STIR: {STIR_NAMES[0]} with m1 = the first representation of a pair, on the n={cfg.n} "
                       f"images of split {cfg.split!r} (the other measures: the probe images); pairs of two models only")


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


def _adversarial_examples(session: Session, data: _Data, model: str) -> torch.Tensor:
    """``model``'s PGD examples of the probe images under its recipe's eval_attack: (n, c, h, w)."""
    attack = session.model(model).config.eval_attack
    net = session.network(model)
    gen = torch.Generator(device=data.images.device).manual_seed(session.cfg.image_seed)
    x_adv = pgd_l2(net, data.images, data.labels.to(data.images.device), attack, generator=gen)
    return x_adv


def robustness_tests(session: Session, data: _Data = None) -> List[GroundingTest]:
    """|robust accuracy difference| and adversarial disagreement over every pair of robustness models."""
    data = data or _Data(session)
    cfg = session.cfg
    models = list(cfg.grounding.robustness_models)
    measures = list(data.measures) + (list(STIR_NAMES) if cfg.grounding.stir else [])

    def compute(measure: str) -> Tuple[GroundingTest, GroundingTest]:
        pairs = list(itertools.combinations(models, 2))
        robust = {m: session.model(m).metrics().get("test/robust_acc", math.nan) for m in models}
        preds = _disagreement_inputs(session, data, models)
        rob = GroundingTest("robust_accuracy", "|robust accuracy difference| (test/robust_acc of each model)")
        dis = GroundingTest("adversarial_disagreement", "prediction disagreement on both models' PGD examples")
        for a, b in pairs:
            d = _pair_dissimilarity(session, data, a, b, measure)
            rob.points.append(Point(f"{a} vs {b}", abs(robust[a] - robust[b]), {measure: d}))
            both = torch.cat([(preds[(a, a)] != preds[(a, b)]), (preds[(b, b)] != preds[(b, a)])]).double().mean().item()
            dis.points.append(Point(f"{a} vs {b}", both, {measure: d}))
        return rob, dis

    out: Dict[str, List[GroundingTest]] = {"robust_accuracy": [], "adversarial_disagreement": []}
    for measure in measures:
        log.info("grounding robustness: %s", measure)
        parts = dict(data.parts("robustness", measure, models), n=cfg.n, k=cfg.k, inversion=_inversion_parts(cfg))
        for i, name in enumerate(("robust_accuracy", "adversarial_disagreement")):
            result = stored(session.store, KIND, {**parts, "test": name}, lambda i=i: compute(measure)[i],
                            GroundingTest.from_dict, session.record(*models))
            out[name].append(result)
    return [_merge(tests) for tests in out.values()]


def _disagreement_inputs(session: Session, data: _Data, models: List[str]) -> Dict[Tuple[str, str], torch.Tensor]:
    """preds[(attacked, judged)] (n,): model ``judged``'s predictions on ``attacked``'s PGD examples."""
    preds = data.adversarial_predictions
    for a in models:
        if (a, a) in preds:
            continue
        x_adv = _adversarial_examples(session, data, a)
        for b in models:
            net = session.network(b)
            with frozen(net), torch.no_grad():
                preds[(a, b)] = net(x_adv).argmax(dim=1).cpu()
    return preds


def _inversion_parts(cfg) -> Dict[str, Any]:
    inv = cfg.inversion
    return {"steps": inv.steps, "seed": inv.seed, "measure": cfg.measure}


def _pair_dissimilarity(session: Session, data: _Data, a: str, b: str, measure: str) -> float:
    if measure in STIR_NAMES:
        ref, tgt = (a, b) if measure == STIR_NAMES[0] else (b, a)
        cfg = session.cfg
        d = evaluate_direction(
            session.network(ref), session.network(tgt), session.images(ref), PENULTIMATE, PENULTIMATE,
            measure=cfg.measure, k=cfg.k, iri="arbitrary", inversion=cfg.inversion, names=(ref, tgt),
            ids=(session.model(ref).identity, session.model(tgt).identity), store=session.store,
            record=session.record(ref, tgt))
        return 1.0 - d.stir.mean
    m = session.cfg.n
    x, y = data.reps(a, [PENULTIMATE])[PENULTIMATE][:m], data.reps(b, [PENULTIMATE])[PENULTIMATE][:m]
    return dissimilarity(measure, x, y)


def run(session: Session) -> Report:
    cfg = session.cfg
    data = _Data(session)
    tests = seed_tests(session, data)
    if cfg.grounding.robustness_models:
        tests += robustness_tests(session, data)
    report = Report(cfg.experiment.description or cfg.experiment.name)
    measures = list(dict.fromkeys(m for t in tests for m in t.measures()))
    numeric, display = [], []
    for measure in measures:
        row, shown = {"measure": measure}, {"measure": measure}
        for t in tests:
            if measure not in t.measures():
                shown[t.test] = "-"
                continue
            c = t.correlation(measure, cfg.grounding.n_boot, cfg.image_seed)
            row.update({f"{t.test}_rho": c.rho, f"{t.test}_low": c.low, f"{t.test}_high": c.high, f"{t.test}_points": c.count})
            shown[t.test] = f"{c.rho:+.2f} [{c.low:+.2f}, {c.high:+.2f}] (m={c.count})" if c.count >= 3 else "undefined"
            report.summary[f"rho/{t.test}/{measure}"] = c.rho
        numeric.append(row)
        display.append(shown)
    report.tables["grounding"] = (numeric, None)
    report.display["grounding"] = display
    for t in tests:
        panels = {}
        for measure in t.measures():
            pts = [p for p in t.points if measure in p.dissimilarity]
            c = t.correlation(measure, cfg.grounding.n_boot, cfg.image_seed)
            panels[measure] = ([p.dissimilarity[measure] for p in pts], [p.functional for p in pts],
                               f"rho {c.rho:+.2f} [{c.low:+.2f}, {c.high:+.2f}]")
        report.figures[f"scatter_{t.test}"] = plot_scatter_grid(
            panels, session.out / f"scatter_{t.test}.png", f"Grounding, {t.test}: dissimilarity vs {t.functional}",
            xlabel="dissimilarity", ylabel="functional difference")
        report.tables[f"points_{t.test}"] = ([{"pair": p.label, "functional": p.functional, **p.dissimilarity} for p in t.points], None)
    notes = [{"test": t.test, "note": n} for t in tests for n in t.notes]
    report.tables["notes"] = (notes, None)
    return report


def units(session: Session) -> List[Callable[[], Any]]:
    out: List[Callable[[], Any]] = [partial(seed_tests, session)]
    if session.cfg.grounding.robustness_models:
        out.append(partial(robustness_tests, session))
    return out


register("grounding", run, units)
