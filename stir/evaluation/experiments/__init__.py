"""The comparisons ``evaluate.py`` runs, one module per experiment kind behind a small registry.

Each kind measures through ``stir.evaluation`` (results stored as they finish, reused on rerun)
and returns a ``Report``: tables (numeric rows for CSV, formatted rows for reading), figures and
headline numbers. Conventions: m1 = reference (the model whose IRIs are made), m2 = target; in a
matrix, row i is the reference and column j the target, entry = STIR(m_j | m_i).

    pairs.py        pair, pairs: both directions per pair (penultimate or layer-wise)
    matrix.py       matrix: every ordered pair of a list of models
    incremental.py  incremental: consecutive models of growing training sets
    layer_matching.py  layer_matching: Kornblith et al. 2019's layer-identification test, with STIR
    grounding.py    grounding: Ding et al. 2021's rank correlations with functional difference, with STIR
    invariance.py   invariance: G-EED (Kvinge et al. 2022) per tap and input transformation
"""
from __future__ import annotations

from typing import Any, Callable, List

from stir.evaluation.experiments.registry import get, kinds, register
from stir.evaluation.experiments.report import Report, estimator_notes


def run(session) -> Report:
    """Run the session's experiment (``cfg.experiment.kind``) and return its report."""
    report = get(session.cfg.experiment.kind).run(session)
    report.notes = estimator_notes(session.cfg.inversion) + report.notes
    return report


def work_units(session) -> List[Callable[[], Any]]:
    """The experiment's independent measurements, in a fixed order (a pair, a matrix row, a link)."""
    return get(session.cfg.experiment.kind).units(session)


def run_shard(session, shard: int, shards: int) -> int:
    """Compute units shard, shard + shards, ... of the experiment into the store; how many were taken.

    Shards write to the same results store (one atomic file per measurement), so they may run at
    the same time on different devices; a run without shards then assembles the report from the
    store without recomputing anything.
    """
    units = work_units(session)[shard::shards]
    for unit in units:
        unit()
    return len(units)


__all__ = ["Report", "kinds", "register", "run", "run_shard", "work_units"]
