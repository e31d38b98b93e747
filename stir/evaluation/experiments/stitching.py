"""Experiment kind ``stitching``: model stitching at every corresponding tap, beside STIR.

For each pair (A, B) of ``experiment.pairs``, both directions (A's front with B's back, and B's
front with A's back), every corresponding tap (``layers.taps``: ``all`` or a list of the front model's
taps; paired by relative depth as in ``stir.evaluation.layers``) and every stitching layer kind of
``stitching.kinds``: the test accuracy of the stitched network, mean and spread over
``stitching.seeds``, the back model's own accuracy and the gap (``stir.stitching.stitch``).

Beside it, the STIR of the same taps and the same direction: stitching A -> B asks whether B's back
can use A's representation, i.e. whether B's representation is (nearly) a simple function of A's;
STIR(B|A) asks whether B represents alike what A represents alike, which holds exactly when B's
representation is a function of A's. So the row "A -> B" carries STIR(B|A) (``evaluate_direction``
with A the reference, through the session's store, settings and images).

S is fitted on the back model's training split and tested on its test split (the first
``stitching.test_images`` of the fixed-order split); both models must share a data set.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Dict, List, Tuple


from stir.data import StirDataModule
from stir.evaluation.experiments.registry import register
from stir.evaluation.experiments.report import Report
from stir.evaluation.layers import layer_pairs
from stir.evaluation.pair import evaluate_direction
from stir.evaluation.results import DirectionResult, Stat
from stir.evaluation.session import Session
from stir.reporting import mean_std, plot_layerwise
from stir.stitching import KINDS, StitchResult, StitchSettings, accuracy, data_identity, stitch_seeds

log = logging.getLogger(__name__)

ARROW = "->"


@dataclass
class Row:
    """One (direction, tap pair, kind): the seeds' results and the STIR of the same direction and taps."""

    front: str
    back: str
    tap_front: str
    tap_back: str
    depth: float
    kind: str
    runs: List[StitchResult]
    stir: DirectionResult

    def stat(self, name: str) -> Stat:
        return Stat.from_values([getattr(r, name) for r in self.runs])


@dataclass
class _Context:
    """What every unit of one run shares: the data of each back model and the models' accuracies."""

    session: Session
    data: Dict[Any, Dict[str, Any]] = field(default_factory=dict)
    acc: Dict[Tuple[str, Any], float] = field(default_factory=dict)

    def splits(self, name: str) -> Dict[str, Any]:
        """{"train": (images, labels), "test": (images, labels), "identity": digests} of model ``name``'s data."""
        cfg = self.session.data_config(name)
        key = (cfg.name, cfg.source, cfg.train_size, cfg.holdout_size, cfg.data_seed, self.session.cfg.stitching.test_images)
        if key not in self.data:
            dm = StirDataModule(cfg)
            dm.setup()
            device = self.session.device
            train = tuple(t.to(device) for t in dm.split_tensors("train"))
            test_x, test_y = dm.split_tensors("test")
            n_test = self.session.cfg.stitching.test_images or test_x.shape[0]
            if n_test > test_x.shape[0]:
                raise ValueError(f"stitching.test_images={n_test} but the test split has {test_x.shape[0]} images")
            test = (test_x[:n_test].to(device), test_y[:n_test].to(device))
            self.data[key] = {"train": train, "test": test, "identity": data_identity(train, test), "key": key}
        return self.data[key]

    def accuracy(self, name: str) -> float:
        """Model ``name``'s accuracy on its stitching test images."""
        data = self.splits(name)
        if (name, data["key"]) not in self.acc:
            self.acc[(name, data["key"])] = accuracy(self.session.network(name), *data["test"], self.session.cfg.stitching.eval_batch_size)
        return self.acc[(name, data["key"])]


def _settings(session: Session) -> StitchSettings:
    s = session.cfg.stitching
    return StitchSettings(epochs=s.epochs, batch_size=s.batch_size, lr=s.lr, train_images=s.train_images, init=s.init)


def _check(session: Session) -> None:
    s = session.cfg.stitching
    unknown = [k for k in s.kinds if k not in KINDS]
    if unknown or not s.kinds:
        raise ValueError(f"stitching.kinds={list(s.kinds)}: each must be one of {list(KINDS)}")
    if not s.seeds:
        raise ValueError("stitching.seeds=[] names no stitching seed")
    _settings(session).check()
    if not session.cfg.experiment.pairs:
        raise ValueError(f"experiment {session.cfg.experiment.name!r} of kind 'stitching' lists no pairs")


def _taps(session: Session, front: str, back: str) -> List[Tuple[str, str, float]]:
    layers = session.cfg.layers  # taps and count; stitching reads spatial maps whole, so reduce is not used
    taps = ["penultimate"] if layers.taps == "penultimate" else layers.taps if isinstance(layers.taps, str) else list(layers.taps)
    return layer_pairs(session.network(front), session.network(back), taps, count=layers.count)


def direction(ctx: _Context, front: str, back: str) -> List[Row]:
    """Every tap pair and kind of one direction (front's front, back's back), and STIR(back|front) per tap."""
    session, cfg = ctx.session, ctx.session.cfg
    _check(session)
    a, b = session.network(front), session.network(back)
    data_a, data_b = session.data_config(front), session.data_config(back)
    if (data_a.name, data_a.num_classes) != (data_b.name, data_b.num_classes):
        raise ValueError(f"cannot stitch {front} ({data_a.name}) into {back} ({data_b.name}): "
                         "stitching needs both models trained on the same data set")
    data = ctx.splits(back)
    ids = (session.model(front).identity, session.model(back).identity)
    record = session.record(front, back)
    rows = []
    for tap_a, tap_b, depth in _taps(session, front, back):
        stir = evaluate_direction(
            a, b, session.images(front), tap_a, tap_b, measure=cfg.measure, k=cfg.k, iri=cfg.iri,
            inversion=cfg.inversion, names=(front, back), ids=ids, store=session.store, record=record)
        for kind in cfg.stitching.kinds:
            runs = stitch_seeds(
                a, b, tap_a, tap_b, kind, data["train"], data["test"], seeds=cfg.stitching.seeds,
                settings=_settings(session), acc_b=ctx.accuracy(back), names=(front, back), ids=ids,
                store=session.store, record=record, data=data["identity"], eval_batch_size=cfg.stitching.eval_batch_size)
            rows.append(Row(front, back, tap_a, tap_b, depth, kind, runs, stir))
    return rows


def _directions(session: Session) -> List[Tuple[str, str]]:
    return [d for ref, target in session.cfg.experiment.pairs for d in ((ref, target), (target, ref))]


def _numeric(row: Row) -> Dict[str, Any]:
    acc, gap, init = row.stat("acc_stitched"), row.stat("gap"), row.stat("acc_init")
    stir = row.stir.stir
    return {
        "front (A)": row.front, "back (B)": row.back, "tap_front": row.tap_front, "tap_back": row.tap_back,
        "depth": row.depth, "layer": row.kind, "seeds": len(row.runs),
        "acc_stitched": acc.mean, "acc_stitched_std": acc.std, "acc_init": init.mean,
        "acc_back": row.runs[0].acc_b, "gap": gap.mean, "gap_std": gap.std,
        "stir_back_given_front": stir.mean if stir else math.nan, "stir_std": stir.std if stir else math.nan,
        "n_train": row.runs[0].n_train, "n_test": row.runs[0].n_test,
    }


def _display(row: Row) -> Dict[str, Any]:
    acc, gap = row.stat("acc_stitched"), row.stat("gap")
    stir = row.stir.stir
    return {
        "A -> B": f"{row.front} {ARROW} {row.back}", "taps": row.tap_front if row.tap_front == row.tap_back
        else f"{row.tap_front} / {row.tap_back}", "depth": f"{row.depth:.2f}", "layer": row.kind,
        "stitched acc": mean_std(acc.mean, acc.std), "before training": f"{row.stat('acc_init').mean:.3f}",
        "B alone": f"{row.runs[0].acc_b:.3f}", "gap": mean_std(gap.mean, gap.std),
        "STIR(B|A)": mean_std(stir.mean, stir.std) if stir else "-",
    }


def run(session: Session) -> Report:
    ctx = _Context(session)
    exp = session.cfg.experiment
    report = Report(exp.description or exp.name)
    rows: List[Row] = []
    for front, back in _directions(session):
        log.info("stitching %s %s %s at every corresponding tap", front, ARROW, back)
        rows += direction(ctx, front, back)
    report.tables["stitching"] = ([_numeric(r) for r in rows], None)
    report.display["stitching"] = [_display(r) for r in rows]
    models = list(dict.fromkeys(m for pair in exp.pairs for m in pair))
    accs = [{"model": m, "test accuracy": ctx.accuracy(m), "test images": ctx.splits(m)["test"][0].shape[0]} for m in models]
    report.tables["accuracy"] = (accs, None)
    for ref, target in exp.pairs:
        _figures(session, report, [r for r in rows if {r.front, r.back} == {ref, target}], ref, target)
    return report


def _figures(session: Session, report: Report, rows: List[Row], ref: str, target: str) -> None:
    gaps, gap_err, depths, stirs, stir_err, stir_depths = {}, {}, {}, {}, {}, {}
    for front, back in ((ref, target), (target, ref)):
        mine = [r for r in rows if (r.front, r.back) == (front, back)]
        for kind in session.cfg.stitching.kinds:
            series = [r for r in mine if r.kind == kind]
            name = f"{kind}: {front} {ARROW} {back}"
            gaps[name] = [r.stat("gap").mean for r in series]
            gap_err[name] = [r.stat("gap").std for r in series]
            depths[name] = [r.depth for r in series]
            if series:
                report.summary[f"mean gap/{name}"] = sum(gaps[name]) / len(series)
        first = [r for r in mine if r.kind == session.cfg.stitching.kinds[0]]
        name = f"STIR({back}|{front})"
        stirs[name] = [r.stir.stir.mean if r.stir.stir else math.nan for r in first]
        stir_err[name] = [r.stir.stir.std if r.stir.stir else math.nan for r in first]
        stir_depths[name] = [r.depth for r in first]
    title = f"{ref} vs {target}"
    report.figures[f"gap_{ref}_vs_{target}"] = plot_layerwise(
        depths, gaps, session.out / f"stitching_gap_{ref}_vs_{target}.png",
        f"Stitching: accuracy gap (B alone - stitched), {title}; mean and spread over stitching seeds",
        errors=gap_err, ylabel="accuracy gap")
    report.figures[f"stir_{ref}_vs_{target}"] = plot_layerwise(
        stir_depths, stirs, session.out / f"stitching_stir_{ref}_vs_{target}.png",
        f"STIR ({session.cfg.measure}) at the same taps, {title}", errors=stir_err)


def units(session: Session) -> List[Callable[[], Any]]:
    """One unit per direction of each pair (every tap, kind, seed and the STIR of that direction)."""
    ctx = _Context(session)
    return [partial(direction, ctx, front, back) for front, back in _directions(session)]


register("stitching", run, units)
