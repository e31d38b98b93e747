"""The ``at_iris`` table of pair, pairs, matrix and incremental reports (issue 53): per direction, the published STIR
with its median residual and fraction of IRIs beside STIR at IRIs (``stir.measure.at_iris``: the IRI
solver's X' from the same images and seeds, each draw on the images that reached r1 <= the level) with
its interval, level, the fraction of X' that reached it, their median residual and the evaluations per
image. The kind's ``at_iris*`` settings (``stir.experiments.schema.AtIRIsFields``) choose: ``stored``
serves what the results store holds and says "not measured", with the override that measures it, for
the rest; ``measure`` measures the rest too; ``off`` leaves the table out.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

from torch import Tensor

from stir.config.validate import ConfigError, check_choice, check_positive
from stir.experiments.context import Context
from stir.inversion.iri import IRIConfig
from stir.measure import DirectionResult, PairResult
from stir.measure.at_iris import AtIRIsResult, stir_at_iris
from stir.store import NotStored, ResultStore
from stir.zoo import Model

CHOICES = ("stored", "measure", "off")  # experiment.at_iris


def check(cfg: Any) -> None:
    """The ``at_iris*`` settings of a kind's config: one line naming a bad one."""
    check_choice("experiment.at_iris", cfg.at_iris, CHOICES)
    check_positive("experiment.at_iris_level", cfg.at_iris_level)
    if not cfg.at_iris_level < 1:  # r1 = ||m(x') - m(x)|| / ||m(x)||: at 1, the zero representation qualifies
        raise ConfigError(f"experiment.at_iris_level={cfg.at_iris_level:g} is an r1 residual (the distance to the "
                          "target over the target's norm): at 1 or above an X' no closer than the zero representation "
                          "counts as an inverse; use a level in (0, 1), e.g. the default 0.02")
    if cfg.at_iris_steps < 1 or cfg.at_iris_draws < 1:
        raise ConfigError(f"experiment.at_iris_steps and experiment.at_iris_draws must be >= 1, got "
                          f"{cfg.at_iris_steps}, {cfg.at_iris_draws}")


def solver(cfg: Any) -> IRIConfig:
    """The solver a report reads at: the IRI solver's defaults at ``at_iris_steps``, each image stopped at
    (and read at) ``at_iris_level``, the IRI tolerance: read at the solver's own 0.005, only 12-36% of the
    laptop ResNet18s' X' count (n = 100), and CKA on so few rows is biased upwards. One construction for
    every kind and the paper report, so a direction shipped for one is served to the others. Its start and
    retries are the solver's defaults (the logistic map, two retries from fresh draws), as every shipped
    reading (zoo/store) was solved since stop 62."""
    return IRIConfig(steps=cfg.at_iris_steps, target=cfg.at_iris_level)


def store_for(store: ResultStore, cfg: Any) -> ResultStore:
    """The results store the readings come from: ``store`` itself under ``at_iris=measure`` (a miss is
    measured and stored), else read-only (a miss raises ``NotStored``)."""
    return store if cfg.at_iris == "measure" else store.as_read_only()


def row(ctx: Context, ref: Model, target: Model, published: Optional[DirectionResult], images: Tensor,
        cfg: Any) -> Tuple[Dict[str, Any], List[str]]:
    """(the row of STIR(target|ref), its notes): the published reading ``published`` beside STIR at IRIs on
    ``images`` (n, c, h, w), as the module docstring says."""
    quality = published.quality.get("arbitrary", {}) if published is not None else {}
    out: Dict[str, Any] = {"direction": f"STIR({target.label}|{ref.label})",
                           "published": published.stir.mean if published is not None and published.stir else math.nan,
                           "published_median_residual": quality.get("median_residual", math.nan),
                           "published_fraction_iri": quality.get("fraction_iri", math.nan)}
    est = ctx.estimator
    try:
        r = stir_at_iris(ref.module, target.module, images, cfg=solver(cfg), measure=est.measure, k=cfg.at_iris_draws,
                         seed=est.inversion.seed, names=(ref.label, target.label), store=store_for(ctx.store, cfg))
    except NotStored:
        out.update({"at_iris": math.nan, "at_iris_low": math.nan, "at_iris_high": math.nan, "level": cfg.at_iris_level,
                    "fraction_reached": math.nan, "at_iris_median_residual": math.nan, "evaluations_per_image": math.nan})
        return out, []
    return reading_row(out["direction"], published, r), r.notes


def reading_row(direction: str, published: Optional[DirectionResult], r: AtIRIsResult) -> Dict[str, Any]:
    """The row of ``direction`` ("STIR(target|ref)", the report's labels) from the published reading and
    the reading at IRIs ``r``."""
    quality = published.quality.get("arbitrary", {}) if published is not None else {}
    low, high = r.interval
    return {"direction": direction,
            "published": published.stir.mean if published is not None and published.stir else math.nan,
            "published_median_residual": quality.get("median_residual", math.nan),
            "published_fraction_iri": quality.get("fraction_iri", math.nan),
            "at_iris": r.value, "at_iris_low": low, "at_iris_high": high, "level": r.level,
            "fraction_reached": r.fraction_reached,
            "at_iris_median_residual": sum(r.median_residual) / len(r.median_residual),
            "evaluations_per_image": sum(r.evaluations) / len(r.evaluations) / r.n}


RAW = ("direction", "published", "published_median_residual", "published_fraction_iri", "at_iris", "at_iris_low",
       "at_iris_high", "level", "fraction_reached", "at_iris_median_residual", "evaluations_per_image")  # row()'s columns


def _cell(value: float, fmt: str = ".3f") -> str:
    return format(value, fmt) if math.isfinite(value) else "-"


def worded(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The table's rows for people (README.md, ``at_iris.md``): column names in words, STIR at IRIs with
    its interval in one cell, fractions as percentages; the CSV keeps the raw columns."""
    out = []
    for r in rows:
        read = math.isfinite(r["at_iris"])
        out.append({
            **{k: v for k, v in r.items() if k not in RAW},  # the kind's own cells first (a chain's train_size ...)
            "direction": r["direction"], "published STIR": _cell(r["published"]),
            "its median residual r1": _cell(r["published_median_residual"]),
            "its X' within the tolerance": _cell(r["published_fraction_iri"], ".0%"),
            "STIR at IRIs [95% interval]": (f"{r['at_iris']:.3f} [{r['at_iris_low']:.3f}, {r['at_iris_high']:.3f}]"
                                            if read else "not in the results store"),
            "level (r1 ≤)": f"{r['level']:g}", "X' that reached it": _cell(r["fraction_reached"], ".0%"),
            "their median r1": _cell(r["at_iris_median_residual"]),
            "model evaluations per image": _cell(r["evaluations_per_image"], ".0f")})
    return out


def note(rows: List[Dict[str, Any]]) -> Optional[str]:
    """The report's one line on its ``at_iris`` table: how many directions are read at IRIs, and how to
    measure the rest (None without rows)."""
    if not rows:
        return None
    read = [r for r in rows if math.isfinite(r["fraction_reached"])]
    line = f"at_iris: {len(read)} of {len(rows)} directions read at IRIs (r1 <= {rows[0]['level']:g})"
    if read:
        reached = [r["fraction_reached"] for r in read]
        line += f", {min(reached):.0%}-{max(reached):.0%} of X' reaching it (the others left out of the value)"
    if len(read) < len(rows):
        line += ("; the rest are not in the results store: experiment.at_iris=measure measures them (about 3x the "
                 "published procedure's model evaluations per reference model)")
    return line


def pair_rows(ctx: Context, m1: Model, m2: Model, pair: PairResult, cfg: Any) -> Tuple[List[Dict[str, Any]], List[str]]:
    """Both directions of ``pair`` (m1 the reference of ``m2|m1``) at IRIs beside their published readings,
    on m1's images: (rows, notes)."""
    out, notes = [], []
    for direction, (ref, tgt) in (("m2|m1", (m1, m2)), ("m1|m2", (m2, m1))):
        published = pair.directions.get(direction)
        if published is None:
            continue
        r, n = row(ctx, ref, tgt, published, ctx.images(m1), cfg)
        out.append(r)
        notes += n
    return out, notes
