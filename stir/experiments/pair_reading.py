"""A pair's report in plain words (issue 69): what was measured and how to read it, one headline table
with worded columns, and a sentence wherever two readings disagree.

    opening(pair, at_rows)       the paragraphs README.md opens with: what STIR(m2|m1) is, floor and
                                 ceiling, the value to read first with its interval and what the
                                 interval holds, where to read more
    headline(pair, at_rows)      both directions: STIR published and at IRIs, normalised, the
                                 interval, the X' in words, the similarity; worded column names
    disagreements(pair, at_rows) a sentence per disagreement: a direction order that reverses at IRIs
                                 or when normalised, a reading at IRIs outside the published interval
    LEGEND                       what the columns mean, shown under the table
    convergence_display(rows)    the convergence rows with the arbitrary and adversarial rows of one
                                 direction shown once where they are identical (STIR_adv not measured)

``at_rows`` are the rows of ``stir.experiments.at_iris_table`` (the published reading beside STIR at
IRIs, per direction): empty when the report has no ``at_iris`` table.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from stir.experiments.rows import ordered
from stir.measure.results import DIRECTIONS, DirectionResult, PairResult
from stir.measure.text import interval, normalised_cell
from stir.reporting.report import Row, Table

TUTORIAL = "docs/tutorials/stir_of_two_models.ipynb"  # "Reading a STIR"
ESTIMATOR = "docs/estimator.md"
MEASURES = {"linear_cka": "linear CKA", "debiased_linear_cka": "debiased linear CKA", "rbf_cka": "RBF CKA"}
READINGS = {"half_sampling": "half-sampling", "jackknife_corrected": "corrected jackknife"}

# The headline's columns, in words (the raw names stay in pairs.csv / pairs.md and at_iris.csv).
DIRECTION = "direction (m1's X', read on m2)"
PUBLISHED = "STIR, published procedure [95% interval]"
NORMALISED = "normalised: 0 = floor, 1 = ceiling"
FLOOR_CEILING = "floor / ceiling"
INVERTED = "the X' it was read on"
AT_IRIS = "STIR at IRIs [95% interval]"

LEGEND = (
    "How to read the columns: *floor* is chance, the value with each X' paired with another image's x; "
    "*ceiling* is m1 on its own X' (1 when they are exact IRIs); *normalised* is (STIR − floor) / "
    "(ceiling − m1's floor), 0 at chance and 1 when m2 keeps as much of the X' as m1 does. *The X' it was "
    "read on*: the fraction of X' that reached the IRI tolerance (r1 = ‖m1(x') − m1(x)‖ / ‖m1(x)‖ within it) "
    "and the fraction that m1 puts closer to their x than to the nearest other natural image (\"pass the "
    "null\": Feather et al.'s test of a metamer). *STIR at IRIs* is read again on X' made by the IRI solver, "
    "keeping only those that reached its level (the fraction in brackets). Each interval holds the spread "
    "over these images and the inversion's seed draws, not over training seeds.")


def _measure(name: str) -> str:
    return MEASURES.get(name, name.replace("_", " "))


def _name(d: DirectionResult) -> str:
    return f"STIR({d.target}|{d.ref})"


def _at(at_rows: Sequence[Row], d: DirectionResult) -> Optional[Row]:
    """The ``at_iris`` row of direction ``d`` (its "direction" cell is ``STIR(target|ref)``), if any."""
    return next((r for r in at_rows if r.get("direction") == _name(d)), None)


def _read_at_iris(r: Optional[Row]) -> bool:
    return r is not None and math.isfinite(r.get("at_iris", math.nan))


def _percent(fraction: float) -> str:
    return f"{fraction:.0%}" if math.isfinite(fraction) else "-"


def _directions(pair: PairResult) -> List[Tuple[str, DirectionResult]]:
    return [(label, d) for label, d in ordered(pair.directions, DIRECTIONS) if d is not None]


def _inverted(d: DirectionResult) -> str:
    """The X' of the published procedure in words: '0% within the tolerance 0.02 (median r1 0.182);
    96% pass the null'."""
    q = d.quality.get("arbitrary")
    if not q or "fraction_iri" not in q:
        return "-"
    tolerance = d.settings.get("inversion", {}).get("tolerance")
    within = f"within the tolerance {tolerance:g}" if isinstance(tolerance, (int, float)) else "within the tolerance"
    text = f"{_percent(q['fraction_iri'])} {within} (median r1 {q['median_residual']:.3g})"
    if "fraction_iri_null" in q:
        text += f"; {_percent(q['fraction_iri_null'])} pass the null"
    return text


def _at_iris_cell(r: Optional[Row]) -> str:
    if r is None:
        return "-"
    if not _read_at_iris(r):
        return "not in the results store (see the notes)"
    return (f"{r['at_iris']:.3f} [{r['at_iris_low']:.3f}, {r['at_iris_high']:.3f}] "
            f"({_percent(r['fraction_reached'])} of X' reached r1 ≤ {r['level']:g})")


def headline(pair: PairResult, at_rows: Sequence[Row]) -> Table:
    """One row per direction, worded columns; the similarity (no direction) in each row. Its notes: the
    direction's own, said once for the pair where both directions say it."""
    s = pair.similarity
    similarity = f"{_measure(s.measure)} (no direction)"
    out, notes = [], []
    for label, d in _directions(pair):
        cal = d.calibration.get("stir")
        floor_ceiling = f"{cal.floor:.3f} / {cal.ceiling:.3f}" if cal is not None else "-"
        row = {DIRECTION: f"{_name(d)}: {label}", PUBLISHED: interval(d.stir, cal, d.measure),
               NORMALISED: normalised_cell(cal), FLOOR_CEILING: floor_ceiling, INVERTED: _inverted(d)}
        if at_rows:
            row[AT_IRIS] = _at_iris_cell(_at(at_rows, d))
        row[similarity] = f"{s.value:.3f}" if math.isfinite(s.value) else "-"
        out.append(row)
        notes.append(_row_notes([text for source, text in pair.notes() if source in ("similarity", label)]))
    return Table(out, notes=notes)


def _row_notes(texts: List[str]) -> List[str]:
    """A direction's notes with the ones that differ only by IRI kind joined ("arbitrary and adversarial
    IRIs: ...") and the model's role left out of a FakeReLU note, so that both directions share them."""
    out: List[str] = []
    for text in texts:
        if text.startswith("FakeReLU on "):
            name, _, rest = text[len("FakeReLU on "):].partition(" (")
            text = f"FakeReLU on {name}{rest[rest.index(')') + 1:]}" if ")" in rest else text
        if text.startswith("adversarial IRIs: ") and f"arbitrary IRIs: {text[len('adversarial IRIs: '):]}" in texts:
            continue
        if text.startswith("arbitrary IRIs: ") and f"adversarial IRIs: {text[len('arbitrary IRIs: '):]}" in texts:
            text = "arbitrary and adversarial IRIs: " + text[len("arbitrary IRIs: "):]
        if text not in out:
            out.append(text)
    return out


def opening(pair: PairResult, at_rows: Sequence[Row], interval_reading: str) -> List[str]:
    """The paragraphs the report opens with (see the module docstring)."""
    directions = _directions(pair)
    if not directions:
        return []
    s = pair.similarity
    _, first = directions[0]
    m1, m2 = first.ref, first.target
    cal = first.calibration.get("stir")
    confidence = f"{cal.confidence:.0%}" if cal is not None and math.isfinite(cal.confidence) else "95%"
    what = (f"**What was measured.** STIR (Similarity Through Inverted Representations, Nanda et al., ICML 2022) "
            f"says how far one model shares another's invariances. STIR(m2|m1) makes, for each test image x, "
            f"images X' that m1 cannot tell apart from x (m1's inverted representations: m1(x') ≈ m1(x)) and "
            f"asks whether m2 also represents them alike: {_measure(first.measure)} between m2's representations "
            f"of the images and of their X'. It has a direction: here m1 = {m1} and m2 = {m2}, read both ways, "
            f"on n = {first.n} test images with k = {first.k} inversion draws.")
    value = interval(first.stir, cal, first.measure)
    read = (f"**How to read it.** A value lies between its floor, chance (X' paired with the wrong images), and "
            f"its ceiling, m1 on its own X' (1 for exact IRIs); the normalised value puts the floor at 0 and the "
            f"ceiling at 1. Read first: {_name(first)} = {value} (its {confidence} interval), normalised "
            f"{normalised_cell(cal)}.")
    holds = (f"The interval ({READINGS.get(interval_reading, interval_reading)}) holds the spread over which "
             f"{first.n} images and which {first.k} inversion seeds were drawn: made this way, it covers the value "
             f"over all test images and seeds about {confidence} of the time (measured coverage: "
             f"docs/benchmarks/calibration.md); it does not cover another training seed of either model.")
    then = "the other direction and STIR at IRIs" if any(map(_read_at_iris, at_rows)) else "the other direction"
    more = (f"Then {then} in the table below; the similarity "
            f"({_measure(s.measure)} {s.value:.3f}) has no direction. More: the *Reading a STIR* tutorial "
            f"({TUTORIAL}) and the estimator ({ESTIMATOR}).")
    return [what, f"{read} {holds}", more]


def _value(r: Optional[Row], key: str) -> float:
    return r.get(key, math.nan) if r is not None else math.nan


def disagreements(pair: PairResult, at_rows: Sequence[Row]) -> List[str]:
    """A sentence for each reading that disagrees with another: the order of the two directions by the
    published STIR against their order at IRIs and by the normalised value; a direction's STIR at IRIs
    outside its published interval. Nothing when all agree."""
    out: List[str] = []
    directions = [d for _, d in _directions(pair)]
    if len(directions) == 2:
        a, b = directions
        readings: Dict[str, Tuple[float, float]] = {
            "the published STIR": (a.stir.mean if a.stir else math.nan, b.stir.mean if b.stir else math.nan),
            "STIR at IRIs": (_value(_at(at_rows, a), "at_iris"), _value(_at(at_rows, b), "at_iris")),
            "the normalised value": tuple(d.calibration["stir"].normalised if "stir" in d.calibration else math.nan
                                          for d in (a, b))}
        base = readings["the published STIR"]
        for name in ("STIR at IRIs", "the normalised value"):
            other = readings[name]
            if all(map(math.isfinite, base + other)) and (base[0] - base[1]) * (other[0] - other[1]) < 0:
                out.append(f"The direction reverses with {name}: the published STIR puts {_name(a)} "
                           f"{_above(base)} {_name(b)} ({base[0]:.3f} {_sign(base)} {base[1]:.3f}), {name} puts it "
                           f"{_above(other)} ({other[0]:.3f} {_sign(other)} {other[1]:.3f}); neither order is a "
                           f"finding on its own: read both intervals before claiming one direction shares more.")
    for d in directions:
        r, cal = _at(at_rows, d), d.calibration.get("stir")
        if _read_at_iris(r) and cal is not None and math.isfinite(cal.low) and not cal.low <= r["at_iris"] <= cal.high:
            out.append(f"{_name(d)} at IRIs ({r['at_iris']:.3f}) lies {'above' if r['at_iris'] > cal.high else 'below'} "
                       f"the published reading's interval [{cal.low:.3f}, {cal.high:.3f}]: the two readings differ on "
                       f"these models (the published X' are {_inverted(d)}).")
    return out


def _above(values: Tuple[float, float]) -> str:
    return "above" if values[0] > values[1] else "below"


def _sign(values: Tuple[float, float]) -> str:
    return ">" if values[0] > values[1] else "<"


def convergence_display(rows: Sequence[Row]) -> List[Row]:
    """``rows`` (``stir.experiments.rows.pair_convergence_rows``) with each direction's adversarial rows
    left out where they equal its arbitrary ones step for step (STIR_adv not measured: one set of X'),
    the arbitrary rows then named "arbitrary = adversarial"; the numbers of the CSV are unchanged."""
    def key(r: Row) -> Tuple[Any, ...]:
        return r["m1 (ref)"], r["m2 (target)"], r["tap_ref"], r["tap_target"], r["direction"]

    def numbers(r: Row) -> Tuple[Any, ...]:
        return tuple(v for k, v in r.items() if k != "iri")

    kinds: Dict[Tuple[Any, ...], Dict[str, List[Tuple[Any, ...]]]] = {}
    for r in rows:
        kinds.setdefault(key(r), {}).setdefault(r["iri"], []).append(numbers(r))
    same = {k for k, v in kinds.items() if v.get("arbitrary") and _equal(v.get("arbitrary"), v.get("adversarial"))}
    return [({**r, "iri": "arbitrary = adversarial"} if key(r) in same else r) for r in rows
            if not (key(r) in same and r["iri"] == "adversarial")]


def _equal(a: Optional[List[Tuple[Any, ...]]], b: Optional[List[Tuple[Any, ...]]]) -> bool:
    def same(x: Any, y: Any) -> bool:
        return x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))

    return a is not None and b is not None and len(a) == len(b) and all(
        len(p) == len(q) and all(same(x, y) for x, y in zip(p, q)) for p, q in zip(a, b))
