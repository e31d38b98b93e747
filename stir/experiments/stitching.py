"""Experiment kind ``stitching``: model stitching at every corresponding tap, beside STIR.

For each pair (A, B) of ``pairs``, both directions (A's front with B's back, and B's front with A's
back), every corresponding tap (``layers.taps``: ``all`` or a list of the front model's taps; paired
by relative depth, ``stir.models.depth``) and every stitching layer kind of ``kinds``: the test
accuracy of the stitched network, mean and spread over ``seeds``, the back model's own accuracy and
the gap (``stir.stitching.stitch``, each seed one entry of the results store). Any model source and
tap form works (module outputs and ``NAME:input``; ``stir.models.taps.run_from``).

Beside it, the STIR of the same taps and the same direction: stitching A -> B asks whether B's back
can use A's representation, i.e. whether B's representation is (nearly) a simple function of A's;
STIR(B|A) asks whether B represents alike what A represents alike, which holds exactly when B's
representation is a function of A's. So the row "A -> B" carries STIR(B|A) (``Context.direction``
with A the reference, through the evaluation's store, estimator and images).

S is fitted on the back model's training split and tested on its test split (the first
``stitching.test_images`` of the fixed-order split); both models must share a data set.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Dict, List, Tuple

from stir.config.validate import ConfigError
from stir.data import StirDataModule
from stir.experiments.context import Context
from stir.experiments.registry import Kind, Unit, register
from stir.experiments.rows import calibration_cell, interval, normalised_cell
from stir.experiments.stitching_config import StitchingConfig  # noqa: F401  (the kind's config, torch-free)
from stir.measure import DirectionResult, Stat
from stir.models.depth import layer_pairs
from stir.reporting import Figure, Report, Table, mean_std, plot_layerwise
from stir.reporting.plots import interval_errors
from stir.stitching import KINDS, StitchResult, accuracy, data_identity, seeds_of, stitch, stitch_parts
from stir.stitching.stitch import STORE_KIND
from stir.zoo import Model

log = logging.getLogger(__name__)

ARROW = "->"


def _check(cfg: StitchingConfig) -> None:
    unknown = [k for k in cfg.kinds if k not in KINDS]
    if unknown or not cfg.kinds:
        raise ConfigError(f"experiment.kinds={list(cfg.kinds)}: each must be one of {list(KINDS)}")
    if not cfg.seeds:
        raise ConfigError("experiment.seeds=[] names no stitching seed")
    try:
        cfg.settings().check()
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if not cfg.pairs or any(len(p) != 2 for p in cfg.pairs):
        raise ConfigError(f"experiment {cfg.name!r} of kind 'stitching' needs pairs [[A, B], ...], got {cfg.pairs}")


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
class _Data:
    """What every unit of one run shares: the data of each back model and the models' accuracies."""

    ctx: Context
    cfg: StitchingConfig
    data: Dict[Any, Dict[str, Any]] = field(default_factory=dict)
    acc: Dict[Tuple[str, Any], float] = field(default_factory=dict)

    def splits(self, model: Model) -> Dict[str, Any]:
        """{"train": (images, labels), "test": (images, labels), "identity": digests} of ``model``'s data."""
        data = model.data
        key = (data.name, data.source, data.train_size, data.holdout_size, data.data_seed, self.cfg.test_images)
        if key not in self.data:
            dm = StirDataModule(data)
            dm.setup()
            device = self.ctx.device
            train = tuple(t.to(device) for t in dm.split_tensors("train"))
            test_x, test_y = dm.split_tensors("test")
            n_test = self.cfg.test_images or test_x.shape[0]
            if n_test > test_x.shape[0]:
                raise ValueError(f"experiment.test_images={n_test} but the test split has {test_x.shape[0]} images")
            test = (test_x[:n_test].to(device), test_y[:n_test].to(device))
            self.data[key] = {"train": train, "test": test, "identity": data_identity(train, test), "key": key}
        return self.data[key]

    def accuracy(self, model: Model) -> float:
        """``model``'s accuracy on its stitching test images."""
        data = self.splits(model)
        if (model.label, data["key"]) not in self.acc:
            self.acc[(model.label, data["key"])] = accuracy(model.module, *data["test"], self.cfg.eval_batch_size)
        return self.acc[(model.label, data["key"])]


def _taps(ctx: Context, front: Model, back: Model) -> List[Tuple[str, str, float]]:
    layers = ctx.layers  # taps and count; stitching reads spatial maps whole, so reduce is not used
    taps = ["penultimate"] if layers.taps == "penultimate" else layers.spec()
    return layer_pairs(front.module, back.module, taps, count=layers.count)


def direction(data: _Data, front: Model, back: Model) -> List[Row]:
    """Every tap pair and kind of one direction (front's front, back's back), and STIR(back|front) per tap."""
    ctx, cfg = data.ctx, data.cfg
    if (front.data.name, front.data.num_classes) != (back.data.name, back.data.num_classes):
        raise ValueError(f"cannot stitch {front.label} ({front.data.name}) into {back.label} ({back.data.name}): "
                         "stitching needs both models trained on the same data set")
    splits = data.splits(back)
    ids, settings, record = (ctx.identity(front), ctx.identity(back)), cfg.settings(), ctx.record(front, back)
    rows = []
    for tap_a, tap_b, depth in _taps(ctx, front, back):
        stir = ctx.direction(front, back, tap_a, tap_b, images=ctx.images(front))
        for kind in cfg.kinds:
            runs = [ctx.store.cached(
                STORE_KIND, stitch_parts(ids, (tap_a, tap_b), kind, seed, settings, splits["identity"]),
                partial(stitch, front.module, back.module, tap_a, tap_b, kind, splits["train"], splits["test"],
                        seed=seed, settings=settings, acc_b=data.accuracy(back), names=(front.label, back.label),
                        eval_batch_size=cfg.eval_batch_size, progress=ctx.run.progress),
                StitchResult.from_dict, record) for seed in seeds_of(kind, cfg.seeds)]
            rows.append(Row(front.label, back.label, tap_a, tap_b, depth, kind, runs, stir))
    return rows


def _directions(ctx: Context, cfg: StitchingConfig) -> List[Tuple[Model, Model]]:
    return [d for a, b in cfg.pairs for d in ((ctx.model(a), ctx.model(b)), (ctx.model(b), ctx.model(a)))]


def _numeric(row: Row) -> Dict[str, Any]:
    acc, gap, init = row.stat("acc_stitched"), row.stat("gap"), row.stat("acc_init")
    stir, cal, debiased = row.stir.stir, row.stir.calibration.get("stir"), row.stir.debiased.get("stir")
    return {
        "front (A)": row.front, "back (B)": row.back, "tap_front": row.tap_front, "tap_back": row.tap_back,
        "depth": row.depth, "layer": row.kind, "seeds": len(row.runs),
        "acc_stitched": acc.mean, "acc_stitched_std": acc.std, "acc_init": init.mean,
        "acc_back": row.runs[0].acc_b, "gap": gap.mean, "gap_std": gap.std,
        "stir_back_given_front": stir.mean if stir else math.nan, "stir_std": stir.std if stir else math.nan,
        "stir_floor": cal.floor if cal else math.nan, "stir_low": cal.low if cal else math.nan,
        "stir_high": cal.high if cal else math.nan,
        # the tap's own floor and ceiling: raw STIR at the middle taps is mostly floor (issue 29)
        "stir_normalised": cal.normalised if cal else math.nan,
        "stir_normalised_low": cal.normalised_low if cal else math.nan,
        "stir_normalised_high": cal.normalised_high if cal else math.nan,
        "stir_debiased": debiased.mean if debiased else math.nan,
        "n_train": row.runs[0].n_train, "n_test": row.runs[0].n_test,
    }


def _display(row: Row) -> Dict[str, Any]:
    acc, gap = row.stat("acc_stitched"), row.stat("gap")
    spread = len(row.runs) > 1  # one run (the identity stitch: nothing trained, no seed) has no spread
    return {
        "A -> B": f"{row.front} {ARROW} {row.back}", "taps": row.tap_front if row.tap_front == row.tap_back
        else f"{row.tap_front} / {row.tap_back}", "depth": f"{row.depth:.2f}", "layer": row.kind,
        "stitched acc": mean_std(acc.mean, acc.std if spread else None),
        "before training": f"{row.stat('acc_init').mean:.3f}",
        "B alone": f"{row.runs[0].acc_b:.3f}", "gap": mean_std(gap.mean, gap.std if spread else None),
        "STIR(B|A)": interval(row.stir.stir, row.stir.calibration.get("stir")),
        "floor": calibration_cell(row.stir.calibration.get("stir"), "floor"),
        "normalised": normalised_cell(row.stir.calibration.get("stir")),
    }


def run(ctx: Context, cfg: StitchingConfig) -> Report:
    data = _Data(ctx, cfg)
    report = Report(cfg.description or cfg.name)
    rows: List[Row] = []
    for front, back in _directions(ctx, cfg):
        log.info("stitching %s %s %s at every corresponding tap", front.label, ARROW, back.label)
        rows += direction(data, front, back)
    report.tables["stitching"] = Table([_numeric(r) for r in rows], display=[_display(r) for r in rows],
                                       notes=[list(r.stir.notes) for r in rows])
    models = list({m.label: m for a, b in cfg.pairs for m in (ctx.model(a), ctx.model(b))}.values())
    report.tables["accuracy"] = Table([{"model": m.label, "test accuracy": data.accuracy(m),
                                        "test images": data.splits(m)["test"][0].shape[0]} for m in models])
    for a, b in cfg.pairs:
        ref, target = ctx.model(a), ctx.model(b)
        _figures(ctx, cfg, report, [r for r in rows if {r.front, r.back} == {ref.label, target.label}], ref.label, target.label)
    return report


def _figures(ctx: Context, cfg: StitchingConfig, report: Report, rows: List[Row], ref: str, target: str) -> None:
    gaps, gap_err, depths, stirs, stir_err, stir_depths, norms, norm_err = {}, {}, {}, {}, {}, {}, {}, {}
    for front, back in ((ref, target), (target, ref)):
        mine = [r for r in rows if (r.front, r.back) == (front, back)]
        for kind in cfg.kinds:
            series = [r for r in mine if r.kind == kind]
            name = f"{kind}: {front} {ARROW} {back}"
            gaps[name] = [r.stat("gap").mean for r in series]
            gap_err[name] = [r.stat("gap").std for r in series]
            depths[name] = [r.depth for r in series]
            if series:
                report.summary[f"mean gap/{name}"] = sum(gaps[name]) / len(series)
        first = [r for r in mine if r.kind == cfg.kinds[0]]
        name = f"STIR({back}|{front})"
        values = [r.stir.stir.mean if r.stir.stir else math.nan for r in first]
        cals = [r.stir.calibration.get("stir") for r in first]
        stirs[name] = values
        stir_err[name] = interval_errors(values, [c.low if c else math.nan for c in cals],
                                         [c.high if c else math.nan for c in cals])
        stir_depths[name] = [r.depth for r in first]
        norms[name] = [c.normalised if c else math.nan for c in cals]
        norm_err[name] = interval_errors(norms[name], [c.normalised_low if c else math.nan for c in cals],
                                         [c.normalised_high if c else math.nan for c in cals])
    title = f"{ref} vs {target}"
    report.figures[f"stitching_gap_{ref}_vs_{target}"] = Figure(plot_layerwise, dict(
        depths=depths, series=gaps, errors=gap_err, ylabel="accuracy gap",
        title=f"Stitching: accuracy gap (B alone - stitched), {title}",
        error_note=f"mean over the stitching seeds {list(cfg.seeds)}; bars: ± 1 std over them"))
    report.figures[f"stitching_stir_{ref}_vs_{target}"] = Figure(plot_layerwise, dict(
        depths=stir_depths, series=stirs, errors=stir_err,
        title=f"Raw STIR ({ctx.estimator.measure}, not floor-corrected) at the same taps, {title}",
        error_note=f"bars: {ctx.estimator.calibration.confidence:.0%} interval over images and draws "
                   f"({ctx.estimator.calibration.interval})"))
    report.figures[f"stitching_stir_normalised_{ref}_vs_{target}"] = Figure(plot_layerwise, dict(
        depths=stir_depths, series=norms, errors=norm_err, ylabel="normalised STIR",
        title=f"Normalised STIR ((S - floor) / (ceiling - its floor), per tap) at the same taps, {title}",
        error_note=f"bars: {ctx.estimator.calibration.confidence:.0%} interval over images and draws "
                   f"({ctx.estimator.calibration.interval}), floors and ceiling resampled with it; not training seeds"))


def units(ctx: Context, cfg: StitchingConfig) -> List[Unit]:
    """One unit per direction of each pair (every tap, kind, seed and the STIR of that direction)."""
    data = _Data(ctx, cfg)
    return [Unit(f"stitching {front.label} {ARROW} {back.label} at every tap ({', '.join(cfg.kinds)}) and STIR there",
                 partial(direction, data, front, back)) for front, back in _directions(ctx, cfg)]


register(Kind("stitching", StitchingConfig, run, units, _check))
