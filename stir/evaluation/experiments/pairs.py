"""Experiment kinds ``pair`` (ref vs target) and ``pairs`` (a list): both directions per pair,
at the penultimate tap or, with ``layers=all`` / a list, at every corresponding tap."""
from __future__ import annotations

import logging
from functools import partial
from typing import Any, Callable, List, Sequence, Tuple

from stir.evaluation.experiments import measure
from stir.evaluation.experiments.registry import register
from stir.evaluation.experiments.report import (
    Report, convergence_rows, convergence_series, mean, pair_display, std,
)
from stir.evaluation.session import Session
from stir.reporting import plot_convergence, plot_layerwise

log = logging.getLogger(__name__)


def _pairs(session: Session) -> List[Tuple[str, str]]:
    cfg, exp = session.cfg, session.cfg.experiment
    return [(cfg.ref, cfg.target)] if exp.kind == "pair" else [tuple(p) for p in exp.pairs]


def _title(session: Session) -> str:
    cfg, exp = session.cfg, session.cfg.experiment
    return f"{cfg.ref} (m1) vs {cfg.target} (m2)" if exp.kind == "pair" else (exp.description or exp.name)


def run_pairs(session: Session, pairs: Sequence[Tuple[str, str]], title: str) -> Report:
    """Each (ref, target) pair at the penultimate tap (or per tap with layers=all / a list)."""
    report = Report(title)
    rows, display, convergence = [], [], []
    layerwise = session.cfg.layers.taps != "penultimate"
    for ref, target in pairs:
        log.info("pair %s (m1) vs %s (m2)", ref, target)
        if layerwise:
            result = measure.layers(session, ref, target)
            rows += [{**r, "pair": f"{ref} vs {target}"} for r in result.to_rows()]
            convergence += [row for r in result.rows for row in convergence_rows(r)]
            display += [{"depth": f"{d:.2f}", **pair_display(r)} for r, d in zip(result.rows, result.depths)]
            series, errors, fits = {}, {}, {}
            for name, key in ((f"STIR({target}|{ref})", "stir_m2_given_m1"), (f"STIR({ref}|{target})", "stir_m1_given_m2")):
                stats = [getattr(r, key) for r in result.rows]
                series[name], errors[name] = [mean(st) for st in stats], [std(st) for st in stats]
                if key in result.fits:
                    fits[name] = (result.fits[key]["slope"], result.fits[key]["intercept"])
                    report.summary[f"slope/{name}"] = result.fits[key]["slope"]
            report.figures[f"layers_{ref}_vs_{target}"] = plot_layerwise(
                result.depths, series, session.out / f"layers_{ref}_vs_{target}.png",
                f"Layer-wise STIR ({session.cfg.measure}): {ref} vs {target}", fits=fits, errors=errors)
        else:
            result = measure.pair(session, ref, target)
            rows.append(result.to_row())
            display.append(pair_display(result))
            convergence += convergence_rows(result)
            curves = convergence_series(result)
            report.figures[f"convergence_{ref}_vs_{target}"] = plot_convergence(
                curves["steps"], curves["stir"], curves["residual"], session.out / f"convergence_{ref}_vs_{target}.png",
                f"STIR along the inversion budget ({session.cfg.inversion.mode} mode): {ref} vs {target}",
                errors=curves["stir_std"], tolerance=session.cfg.inversion.tolerance)
            for name, stat in ((f"STIR({target}|{ref})", result.stir_m2_given_m1), (f"STIR({ref}|{target})", result.stir_m1_given_m2)):
                if stat is not None:
                    report.summary[name] = stat.mean
    report.tables["pairs"] = (rows, None)
    report.display["pairs"] = display
    report.tables["convergence"] = (convergence, None)
    ref, target = pairs[0]
    report.figures["iri_examples"] = measure.iri_grid(session, ref, target)
    return report


def run(session: Session) -> Report:
    return run_pairs(session, _pairs(session), _title(session))


def units(session: Session) -> List[Callable[[], Any]]:
    """One unit per pair (all its taps: they share nothing with other pairs)."""
    one = measure.layers if session.cfg.layers.taps != "penultimate" else measure.pair
    return [partial(one, session, ref, target) for ref, target in _pairs(session)]


register("pair", run, units)
register("pairs", run, units)
