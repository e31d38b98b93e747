"""Experiment kind ``incremental``: chains of models on growing training sets (STIR paper, fig. 1).

For each chain m_1, m_2, ... (ordered by training-set size): STIR(m_t|m_t-1) and STIR(m_t-1|m_t)
against the size of m_t's training set. A link (m_t-1, m_t) is one unit of work.

``experiment.update``: ``scratch`` (default; the paper trains every m_t from scratch on its larger
set) uses the chain's names as listed; ``warm`` (an incremental update: m_t warm-started from
m_t-1) uses the zoo names ``<name>_warm`` for every m_t after the first.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, Dict, List, Sequence, Tuple

from stir.evaluation.experiments import measure
from stir.evaluation.experiments.registry import register
from stir.evaluation.experiments.report import Report, convergence_rows, mean, pair_display, std
from stir.evaluation.session import Session
from stir.reporting import plot_incremental


def links(chain: Sequence[str]) -> List[Tuple[str, str]]:
    """Consecutive (m_t-1, m_t) of an incremental chain."""
    return list(zip(chain[:-1], chain[1:]))


def _chains(session: Session) -> Dict[str, List[str]]:
    chains = {k: list(v) for k, v in session.cfg.experiment.chains.items()}
    if session.cfg.experiment.update == "warm":
        chains = {k: v[:1] + [f"{name}_warm" for name in v[1:]] for k, v in chains.items()}
    return chains


def run_incremental(session: Session, chains: Dict[str, Sequence[str]], title: str) -> Report:
    """For each chain: STIR(m_t|m_t-1) and STIR(m_t-1|m_t) at every link."""
    report = Report(title)
    rows, display, sizes, series, errors, convergence = [], [], {}, {}, {}, []
    for label, chain in chains.items():
        fwd, bwd, xs = [], [], []
        for prev, cur in links(chain):
            result = measure.pair(session, prev, cur)  # m1 = m_t-1, m2 = m_t
            size = session.data_config(cur).train_size or float("nan")
            rows.append({"chain": label, "train_size": size, **result.to_row()})
            display.append({"chain": label, "train_size": size, **pair_display(result)})
            convergence += [{"chain": label, "train_size": size, **r} for r in convergence_rows(result)]
            xs.append(size)
            fwd.append(result.stir_m2_given_m1)
            bwd.append(result.stir_m1_given_m2)
        for name, stats in ((f"{label}: STIR(m_t|m_t-1)", fwd), (f"{label}: STIR(m_t-1|m_t)", bwd)):
            sizes[name] = xs
            series[name], errors[name] = [mean(s) for s in stats], [std(s) for s in stats]
    report.tables["incremental"] = (rows, None)
    report.tables["convergence"] = (convergence, None)
    report.display["incremental"] = display
    report.figures["incremental"] = plot_incremental(sizes, series, session.out / "incremental.png", title, errors=errors)
    return report


def run(session: Session) -> Report:
    exp = session.cfg.experiment
    title = (exp.description or exp.name) + (" (warm-started updates)" if exp.update == "warm" else "")
    return run_incremental(session, _chains(session), title)


def units(session: Session) -> List[Callable[[], Any]]:
    return [partial(measure.pair, session, a, b) for chain in _chains(session).values() for a, b in links(chain)]


register("incremental", run, units)
