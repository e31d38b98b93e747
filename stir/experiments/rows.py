"""Typed results -> table rows, readable rows, notes and stable summary keys (what reports are made of).

Every row, note and summary key is derived here from ``stir.measure`` results; nothing is parsed
back from a string. Column and key names are stable across versions so that tables, W&B runs and
the dashboard line up: a direction "m2|m1" is the slug ``m2_given_m1`` (IRIs of m1, measured on m2).

    pair_row / direction_row           numeric rows (CSV, W&B tables)
    pair_display / direction_display   readable rows: STIR with its interval, floor, ceiling, IRIs
    pair_headline / direction_headline the short table a report opens with: per direction STIR with its
                                       interval, the normalised value, the similarity, IRI status, STIR_adv
    headline_table / direction_headline_table   those rows as a ``Table`` (``Table.headline``), with notes
    pair_notes / direction_notes       the notes of a row, each saying where it comes from
    pair_summary                       stable summary keys (stir_m2_given_m1, linear_cka, ...)
    convergence_rows                   STIR along the inversion budget, one row per recorded step
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from stir.measure.calibration import Calibration
from stir.measure.results import DIRECTIONS, SLUGS, DirectionResult, PairResult, Stat
from stir.measure.text import interval, normalised_cell, over_draws  # one formatting, the library's print too
from stir.reporting.report import Row, Table

# The agreement of direction "m2|m1" is measured on m1's IRIs: its column says whose.
AGREEMENT = {"m2|m1": "agreement_on_m1_iris", "m1|m2": "agreement_on_m2_iris"}
_CALIBRATION_COLUMNS = ("floor", "ceiling", "ceiling_floor", "normalised", "normalised_low", "normalised_high", "low",
                        "high", "p_value", "floor_images", "chance_corrected", "chance_corrected_low",
                        "chance_corrected_high")
# Column and row order comes from these lists, never from the order of a result's dicts: a result
# read back from the store (JSON with sorted keys) then gives the same files as a fresh one.
KINDS = ("arbitrary", "adversarial")
READINGS = ("walk", "perturbation")
QUALITY = ("median_residual", "fraction_iri", "fraction_iri_std", "fraction_iri_null", "median_residual_null_ratio",
           "evaluations", "median_target_distance", "cached_draws")


def ordered(mapping: Dict[str, Any], first: Sequence[str]) -> List[Tuple[str, Any]]:
    """The items of ``mapping``: the keys of ``first`` in that order, then any others sorted."""
    return [(k, mapping[k]) for k in first if k in mapping] + sorted(((k, v) for k, v in mapping.items() if k not in first),
                                                                   key=lambda item: item[0])


def _stat(row: Row, name: str, stat: Optional[Stat]) -> None:
    if stat is not None:
        row[name] = stat.mean
        row[f"{name}_std"] = stat.std


def _direction_columns(d: DirectionResult, suffix: str, agreement: str) -> Row:
    """The numbers of one direction, column names ending in ``suffix`` ("" or "_m2_given_m1")."""
    row: Row = {}
    for name in ("stir", "stir_adv"):
        _stat(row, f"{name}{suffix}", getattr(d, name))
        _stat(row, f"{name}_debiased{suffix}", d.debiased.get(name))
        cal = d.calibration.get(name)
        if cal is not None:
            for column in _CALIBRATION_COLUMNS:
                row[f"{name}_{column}{suffix}"] = getattr(cal, column)
    _stat(row, agreement, d.agreement)
    _stat(row, f"difficulty{suffix}", d.difficulty)
    _stat(row, f"difficulty_fraction{suffix}", d.difficulty_fraction)
    for reading, km in ordered(d.difficulty_censored, READINGS):  # walk (orders pairs) and perturbation (eq. 8's quantity)
        for name in ("median", "median_censored", "median_low", "median_high", "restricted_mean", "restricted_mean_low",
                     "restricted_mean_high"):
            row[f"difficulty_{reading}_{name}{suffix}"] = km.get(name, math.nan)  # stored before intervals: NaN
    for kind in KINDS:
        for metric, value in ordered(d.quality.get(kind, {}), QUALITY):
            row[f"{kind}_{metric}{suffix}"] = value
    return row


def _settings(settings: Dict[str, Any]) -> Row:
    inversion = settings.get("inversion", {})
    row = {"seed": settings.get("seed")}
    row.update({f"inversion_{name}": inversion.get(name) for name in ("mode", "steps", "tolerance", "precision")})
    return {k: v for k, v in row.items() if v is not None}


def _identity(ref: str, target: str, ref_id: str, target_id: str, tap_ref: str, tap_target: str, measure: str,
              n: int) -> Row:
    return {"ref": ref, "target": target, "ref_id": ref_id, "target_id": target_id, "tap_ref": tap_ref,
            "tap_target": tap_target, "measure": measure, "n": n}


def direction_row(d: DirectionResult) -> Row:
    """One direction as flat scalars: identity columns, every computed stat (``name``, ``name_std``),
    its calibration (``stir_floor``, ...), IRI quality (``arbitrary_fraction_iri``, ...), settings, notes."""
    row = _identity(d.ref, d.target, d.ref_id, d.target_id, d.tap_ref, d.tap_target, d.measure, d.n)
    row.update(k=d.k, iri=d.iri, **_direction_columns(d, "", "agreement"), **_settings(d.settings))
    row["notes"] = "; ".join(d.notes)
    return row


def pair_row(pair: PairResult) -> Row:
    """A pair as flat scalars: both directions with the suffixes ``_m2_given_m1`` / ``_m1_given_m2``."""
    s = pair.similarity
    first = next(iter(pair.directions.values()))
    row = _identity(s.ref, s.target, s.ref_id, s.target_id, s.tap_ref, s.tap_target, s.measure, s.n)
    row.update(k=first.k, iri=first.iri, similarity=s.value)
    for direction in DIRECTIONS:
        d = pair.get(direction)
        if d is not None:
            row.update(_direction_columns(d, f"_{SLUGS[direction]}", AGREEMENT[direction]))
    row.update(_settings(first.settings))
    row["notes"] = "; ".join(f"{source}: {text}" for source, text in pair.notes())
    return row


def calibration_cell(cal: Optional[Calibration], name: str) -> str:
    """A calibration field (``floor``, ``ceiling`` ...) to 3 decimals; '-' without calibration or when not finite."""
    value = getattr(cal, name) if cal is not None else math.nan
    return f"{value:.3f}" if math.isfinite(value) else "-"


def p_cell(cal: Optional[Calibration]) -> str:
    """'< 0.005' at the resolution of the permutations (1 / (1 + P)), else the p-value; '-' without."""
    if cal is None or not math.isfinite(cal.p_value):
        return "-"
    smallest = 1 / (1 + cal.permutations) if cal.permutations else 0.0
    return f"< {smallest:.2g}" if cal.p_value <= smallest + 1e-12 else f"{cal.p_value:.2g}"


def _iris(d: DirectionResult, kind: str = "arbitrary") -> str:
    """'2% IRIs, r 0.044; 90% pass the null': the fraction of X' within the tolerance, the median
    residual, and the fraction closer to x than its nearest natural image (Feather et al.'s null)."""
    q = d.quality.get(kind)
    if q is None:
        return "-"
    null = f"; {q['fraction_iri_null']:.0%} pass the null" if "fraction_iri_null" in q else ""
    return f"{q['fraction_iri']:.0%} IRIs, r {q['median_residual']:.3g}{null}"


def _difficulty(d: DirectionResult) -> str:
    """The walk reading (the headline: every image censored at the same budget): '2.31 [1.80, 2.90]
    (40% reached)', the Kaplan-Meier median with its bootstrap interval over images, or
    '> 20.0 (0% reached)' when the median is a lower bound."""
    c = d.difficulty_censored.get("walk")
    if not c:
        return "-"
    if c["median_censored"]:
        return f"> {c['median']:.2f} ({c['fraction']:.0%} reached)"
    low, high = c.get("median_low", math.nan), c.get("median_high", math.nan)
    spread = f" [{low:.2f}, {high:.2f}]" if math.isfinite(low) else ""
    return f"{c['median']:.2f}{spread} ({c['fraction']:.0%} reached)"


def _direction_display(d: DirectionResult, head: str) -> Row:
    """The readable cells of one direction, headed ``STIR(m2|m1)`` style by ``head``."""
    cal, adv = d.calibration.get("stir"), d.calibration.get("stir_adv")
    cells = {
        f"STIR{head}": interval(d.stir, cal, d.measure), f"floor{head}": calibration_cell(cal, "floor"),
        f"ceiling{head}": calibration_cell(cal, "ceiling"), f"normalised{head}": normalised_cell(cal),
        f"p{head}": p_cell(cal),
    }
    if "stir" in d.debiased:  # linear CKA's debiased estimate of the same value: no floor to read it against
        cells[f"debiased{head}"] = over_draws(d.debiased["stir"])
    cells.update({f"X'{head}": _iris(d), f"STIR_adv{head}": interval(d.stir_adv, adv, d.measure), f"difficulty{head}": _difficulty(d)})
    return cells


def pair_display(pair: PairResult) -> Row:
    """One readable row: both directions with interval, floor, ceiling, normalised value, IRIs."""
    s = pair.similarity
    row: Row = {"m1 (ref)": s.ref, "m2 (target)": s.target,
                "taps": s.tap_ref if s.tap_ref == s.tap_target else f"{s.tap_ref} / {s.tap_target}"}
    for direction in DIRECTIONS:
        d = pair.get(direction)
        if d is not None:
            row.update(_direction_display(d, f"({direction})"))
            row[f"agree on {direction.split('|')[1]} IRIs"] = over_draws(d.agreement)
    row[s.measure] = f"{s.value:.3f}" if math.isfinite(s.value) else "-"
    return row


def direction_display(d: DirectionResult) -> Row:
    return {"m1 (ref)": d.ref, "m2 (target)": d.target, **_direction_display(d, "")}


def iri_status(d: DirectionResult, kind: str = "arbitrary") -> str:
    """'40% reached the bound; 90% pass the null': the fraction of X' whose residual reached the IRI
    tolerance, and (when measured) the fraction closer to x than its nearest natural image; '-' without."""
    q = d.quality.get(kind)
    if q is None or "fraction_iri" not in q:
        return "-"
    null = f"; {q['fraction_iri_null']:.0%} pass the null" if "fraction_iri_null" in q else ""
    return f"{q['fraction_iri']:.0%} reached the bound{null}"


# The headline's columns, besides names and similarity: a value beside the floor and ceiling it is read against.
HEADLINE = ("direction", "STIR", "floor", "ceiling", "normalised", "IRIs", "STIR_adv")


def _headline_cells(d: DirectionResult, direction: str) -> Row:
    cal, adv = d.calibration.get("stir"), d.calibration.get("stir_adv")
    return {"direction": direction, "STIR": interval(d.stir, cal, d.measure), "floor": calibration_cell(cal, "floor"),
            "ceiling": calibration_cell(cal, "ceiling"), "normalised": normalised_cell(cal), "IRIs": iri_status(d),
            "STIR_adv": "not measured" if d.stir_adv is None else interval(d.stir_adv, adv, d.measure)}


def pair_headline(pair: PairResult) -> List[Row]:
    """The short rows a pair's report opens with, one per direction: STIR with its interval, the
    normalised value, the similarity (linear CKA, ...), IRI status and STIR_adv (or "not measured")."""
    s = pair.similarity
    similarity = {s.measure: f"{s.value:.3f}" if math.isfinite(s.value) else "-"}
    out = []
    for direction in DIRECTIONS:
        d = pair.get(direction)
        if d is not None:
            cells = _headline_cells(d, direction)
            out.append({"m1 (ref)": s.ref, "m2 (target)": s.target, **{k: cells[k] for k in HEADLINE[:5]}, **similarity,
                        **{k: cells[k] for k in HEADLINE[5:]}})
    return out


def pair_headline_notes(pair: PairResult) -> List[List[str]]:
    """The notes of each ``pair_headline`` row: the similarity's and that direction's own."""
    notes = pair.notes()
    return [[f"{source}: {text}" for source, text in notes if source in ("similarity", direction)]
            for direction in DIRECTIONS if pair.get(direction) is not None]


def direction_headline(d: DirectionResult) -> Row:
    """``pair_headline``'s row for one direction, STIR(m2|m1) with m1 its reference and m2 its target (no
    direction column: it is always m2|m1), without a similarity."""
    cells = _headline_cells(d, "m2|m1")
    del cells["direction"]
    return {"m1 (ref)": d.ref, "m2 (target)": d.target, **cells}


def headline_table(pairs: Sequence[PairResult], extra: Optional[Sequence[Row]] = None) -> Table:
    """The headline of a table of pairs (``Table.headline``): ``pair_headline`` rows with their notes;
    ``extra[i]`` (readable cells, e.g. {"depth": "0.50"} or {"chain": ..., "train_size": ...}) is put
    first in the rows of pair i."""
    extra = list(extra) if extra is not None else [{} for _ in pairs]
    rows_, notes = [], []
    for pair, first in zip(pairs, extra):
        rows_ += [{**first, **row} for row in pair_headline(pair)]
        notes += pair_headline_notes(pair)
    return Table(rows_, notes=notes)


def direction_headline_table(directions: Sequence[DirectionResult]) -> Table:
    """The headline of a table of directions (a matrix): ``direction_headline`` rows with their notes."""
    return Table([direction_headline(d) for d in directions], notes=[direction_notes(d) for d in directions])


def pair_notes(pair: PairResult) -> List[str]:
    return [f"{source}: {text}" for source, text in pair.notes()]


def direction_notes(d: DirectionResult) -> List[str]:
    return list(d.notes)


def pair_summary(pair: PairResult) -> Dict[str, float]:
    """Stable summary keys of one pair: ``stir_m2_given_m1``, ``stir_m1_given_m2``, ``stir_adv_*``,
    their calibration (``stir_floor_m2_given_m1``, ``stir_normalised_*``, ``stir_low_*`` ...),
    ``similarity`` and the measure's name (``linear_cka``), ``agreement_*``, ``difficulty_*``,
    ``fraction_iri_<kind>_<direction>``. NaN values are left out (W&B shows them as missing)."""
    row = pair_row(pair)
    keep = {k: v for k, v in row.items() if isinstance(v, float) and not k.endswith("_std")
            and (k.startswith(("stir", "agreement_", "difficulty_")) or k == "similarity")}
    for key, value in row.items():
        for kind in ("arbitrary", "adversarial"):
            if key.startswith(f"{kind}_fraction_iri_m") and isinstance(value, float):
                keep[f"fraction_iri_{kind}{key[len(kind) + len('_fraction_iri'):]}"] = value
    keep[pair.measure] = pair.similarity.value
    return {k: v for k, v in keep.items() if math.isfinite(v)}


def convergence_rows(d: DirectionResult, direction: str = "m2|m1") -> List[Row]:
    """One row per (IRI kind, recorded step) of a direction: STIR there, its std, residual, IRIs.

    The std over draws is NaN for one draw (k = 1): a spread of one value is not 0.000."""
    rows = []
    for kind, record in ordered(d.convergence, KINDS):
        for i, step in enumerate(record["steps"]):
            rows.append({
                "m1 (ref)": d.ref, "m2 (target)": d.target, "tap_ref": d.tap_ref, "tap_target": d.tap_target,
                "direction": direction, "iri": kind, "step": int(step), "stir": record["stir"][i],
                "stir_std": record["stir_std"][i] if d.k > 1 else math.nan, "median_residual": record["median_residual"][i],
                "fraction_iri": record["fraction_iri"][i],
            })
    return rows


def pair_convergence_rows(pair: PairResult) -> List[Row]:
    """``convergence_rows`` of both directions of a pair, under the pair's m1 / m2 names."""
    rows = []
    for direction, d in ordered(pair.directions, DIRECTIONS):
        for row in convergence_rows(d, direction):
            rows.append({**row, "m1 (ref)": pair.ref, "m2 (target)": pair.target, "tap_ref": pair.similarity.tap_ref,
                         "tap_target": pair.similarity.tap_target})
    return rows
