"""Experiment kind ``suite``: several experiments of other kinds in one run and one report.

``parts`` maps a part's name to its own config: ``kind`` (any other kind), that kind's fields, and
optionally ``layers`` and ``iri`` for this part only (layer-wise STIR at every tap, or arbitrary IRIs
only where adversarial ones per tap would be too costly). Each part runs with the evaluation's
models, images, store and estimator; its tables, figures and summary keys enter the suite's report
under the part's name (``<part>/<table>``). A part is also the unit of work a shard takes.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Tuple

from omegaconf import OmegaConf

from stir.config.store import to_dataclass
from stir.config.validate import ConfigError
from stir.experiments.config import LayersConfig
from stir.experiments.context import Context
from stir.experiments.registry import Kind, Unit, get, register
from stir.experiments.suite_config import SuiteConfig, typed_parts
from stir.measure.plan import check_iri
from stir.reporting import Report


def part_configs(cfg: SuiteConfig) -> Dict[str, Tuple[Any, Dict[str, Any]]]:
    """{part: (its kind's checked config, its own settings: layers / iri)}."""
    out = {}
    for name, (part, own) in typed_parts(cfg).items():
        get(part.kind).check(part)
        if "iri" in own:
            try:
                check_iri(own["iri"], f"experiment.parts.{name}.iri")
            except ValueError as err:
                raise ConfigError(str(err)) from None
        if "layers" in own:
            own["layers"] = to_dataclass(OmegaConf.merge(OmegaConf.structured(LayersConfig), own["layers"]), LayersConfig,
                                         prefix=f"experiment.parts.{name}.layers.")
        out[name] = (part, own)
    return out


def _check(cfg: SuiteConfig) -> None:
    if not cfg.parts:
        raise ConfigError(f"experiment {cfg.name!r} of kind 'suite' has no parts")
    part_configs(cfg)


def _context(ctx: Context, own: Dict[str, Any]) -> Context:
    """The context of one part: its own layers and IRI kinds, everything else shared (store, models, images)."""
    changes: Dict[str, Any] = {}
    if "layers" in own:
        changes["layers"] = own["layers"]
    if "iri" in own:
        changes["estimator"] = dataclasses.replace(ctx.estimator, iri=own["iri"])
    return dataclasses.replace(ctx, **changes) if changes else ctx


def run(ctx: Context, cfg: SuiteConfig) -> Report:
    report = Report(cfg.description or cfg.name)
    for name, (part, own) in part_configs(cfg).items():
        sub = get(part.kind).run(_context(ctx, own), part)
        report.notes += [f"{name}: {note}" for note in sub.notes]
        report.tables.update({f"{name}/{table}": t for table, t in sub.tables.items()})
        report.figures.update({f"{name}/{figure}": f for figure, f in sub.figures.items()})
        report.summary.update({f"{name}/{key}": v for key, v in sub.summary.items()})
    return report


def units(ctx: Context, cfg: SuiteConfig) -> List[Unit]:
    """Every part's units, part by part."""
    out: List[Unit] = []
    for name, (part, own) in part_configs(cfg).items():
        out += [Unit(f"{name}: {u.what}", u.call) for u in get(part.kind).units(_context(ctx, own), part)]
    return out


register(Kind("suite", SuiteConfig, run, units, _check))
