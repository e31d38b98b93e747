"""Experiment kind ``incremental``: chains of models on growing training sets (STIR paper, fig. 1).

For each chain m_1, m_2, ... (ordered by training-set size): STIR(m_t|m_t-1) and STIR(m_t-1|m_t)
against the size of m_t's training set. A link (m_t-1, m_t) is one unit of work.

``update``: ``scratch`` (default; the paper trains every m_t from scratch on its larger set) uses the
chain's names as listed; ``warm`` (an incremental update: m_t warm-started from m_t-1) uses the zoo
names ``<name>_warm`` for every m_t after the first.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, Dict, List, Sequence, Tuple

from stir.config.validate import ConfigError, check_choice
from stir.experiments import at_iris_table, rows
from stir.experiments.context import Context
from stir.experiments.incremental_config import IncrementalConfig  # noqa: F401  (the kind's config, torch-free)
from stir.experiments.registry import Kind, Unit, register
from stir.reporting import Figure, Report, Table, plot_incremental
from stir.reporting.plots import interval_errors


def _check(cfg: IncrementalConfig) -> None:
    at_iris_table.check(cfg)
    check_choice("experiment.update", cfg.update, ("scratch", "warm"))
    if not cfg.chains or any(len(chain) < 2 for chain in cfg.chains.values()):
        raise ConfigError(f"experiment.chains needs chains of at least two models, got {cfg.chains}")


def links(chain: Sequence[str]) -> List[Tuple[str, str]]:
    """Consecutive (m_t-1, m_t) of an incremental chain."""
    return list(zip(chain[:-1], chain[1:]))


def chains(cfg: IncrementalConfig) -> Dict[str, List[str]]:
    if cfg.update == "warm":
        return {k: v[:1] + [f"{name}_warm" for name in v[1:]] for k, v in cfg.chains.items()}
    return {k: list(v) for k, v in cfg.chains.items()}


def run(ctx: Context, cfg: IncrementalConfig) -> Report:
    """For each chain: STIR(m_t|m_t-1) and STIR(m_t-1|m_t) at every link."""
    title = (cfg.description or cfg.name) + (" (warm-started updates)" if cfg.update == "warm" else "")
    report = Report(title)
    numeric, display, notes, convergence = [], [], [], []
    measured, extra = [], []  # each PairResult and the cells its headline rows begin with
    sizes, series, errors = {}, {}, {}
    for label, chain in chains(cfg).items():
        curves = {f"{label}: STIR(m_t|m_t-1)": ("m2|m1", []), f"{label}: STIR(m_t-1|m_t)": ("m1|m2", [])}
        xs = []
        for prev, cur in links(chain):
            m_prev, m_cur = ctx.model(prev), ctx.model(cur)
            pair = ctx.pair(m_prev, m_cur)  # m1 = m_t-1, m2 = m_t
            size = m_cur.data.train_size or float("nan")
            numeric.append({"chain": label, "train_size": size, **rows.pair_row(pair)})
            display.append({"chain": label, "train_size": size, **rows.pair_display(pair)})
            notes.append(rows.pair_notes(pair))
            measured.append(pair)
            extra.append({"chain": label, "train_size": size})
            convergence += [{"chain": label, "train_size": size, **r} for r in rows.pair_convergence_rows(pair)]
            if cfg.at_iris != "off":  # STIR at IRIs beside both directions of the link (stir.experiments.at_iris_table)
                at_rows, at_notes = at_iris_table.pair_rows(ctx, m_prev, m_cur, pair, cfg)
                report.tables.setdefault("at_iris", Table([])).rows.extend(
                    {"chain": label, "train_size": size, **r} for r in at_rows)
                report.notes += at_notes
            report.summary.update({f"{m_prev.label}_vs_{m_cur.label}/{k}": v for k, v in rows.pair_summary(pair).items()})
            xs.append(size)
            for name, (direction, points) in curves.items():
                points.append((pair.stat(direction, "stir"), pair.get(direction).calibration.get("stir")))
        for name, (_, points) in curves.items():
            values = [s.mean if s else math.nan for s, _ in points]
            sizes[name], series[name] = xs, values
            errors[name] = interval_errors(values, [c.low if c else math.nan for _, c in points],
                                           [c.high if c else math.nan for _, c in points])
    if "at_iris" in report.tables:
        report.tables["at_iris"].display = at_iris_table.worded(report.tables["at_iris"].rows)
        report.notes.append(at_iris_table.note(report.tables["at_iris"].rows))
    report.tables["incremental"] = Table(numeric, display=display, notes=notes,
                                         headline=rows.headline_table(measured, extra))
    report.tables["convergence"] = Table(convergence)
    report.figures["incremental"] = Figure(plot_incremental, dict(
        sizes=sizes, series=series, errors=errors, title=title,
        error_note=f"bars: {ctx.estimator.calibration.confidence:.0%} interval over images and draws "
                   f"({ctx.estimator.calibration.interval})"))
    return report


def units(ctx: Context, cfg: IncrementalConfig) -> List[Unit]:
    return [Unit(f"link {a} -> {b} of chain {name}", partial(lambda a, b: ctx.pair(ctx.model(a), ctx.model(b)), a, b))
            for name, chain in chains(cfg).items() for a, b in links(chain)]


register(Kind("incremental", IncrementalConfig, run, units, _check, nonfinite=True))
