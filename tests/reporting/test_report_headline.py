"""Issue 34: the report opens with a short headline table (per direction: STIR with its interval, the
normalised value, the similarity, IRI status, STIR_adv); every column stays in <name>.md and <name>.csv."""
import csv
import json
import math
import re

from stir.config.schema import LoggerConfig
from stir.experiments import rows
from stir.measure import Calibration, DirectionResult, PairResult, SimilarityResult, Stat
from stir.reporting import Report, Table
from stir.reporting.publish import publish

HEADLINE_COLUMNS = ["m1 (ref)", "m2 (target)", "direction", "STIR", "floor", "ceiling", "normalised", "linear_cka", "IRIs", "STIR_adv", "notes"]


def calibration(value: float) -> Calibration:
    return Calibration(value=value, floor=0.1, floor_std=0.01, floor_images=0.1, floor_iris=0.12, ceiling=0.95,
                       ceiling_independent=0.95, ceiling_same_draws=0.97, normalised=(value - 0.1) / 0.85,
                       low=value - 0.05, high=value + 0.05, normalised_low=0.5, normalised_high=0.7, confidence=0.95,
                       resamples=100, method="percentile bootstrap")


def direction(ref: str, target: str, value: float, adversarial: bool, notes=()) -> DirectionResult:
    quality = {"arbitrary": {"median_residual": 0.01, "fraction_iri": 0.4, "fraction_iri_std": 0.0,
                             "fraction_iri_null": 0.9}}
    extra = {}
    if adversarial:
        quality["adversarial"] = {"median_residual": 0.02, "fraction_iri": 0.2}
        extra = dict(stir_adv=Stat.from_values([0.3, 0.32]))
    return DirectionResult(
        ref=ref, target=target, ref_id=f"id{ref}", target_id=f"id{target}", tap_ref="penultimate",
        tap_target="penultimate", measure="linear_cka", n=16, k=2, iri="both" if adversarial else "arbitrary",
        stir=Stat.from_values([value - 0.01, value + 0.01]), agreement=Stat.from_values([1.0, 0.5]), quality=quality,
        calibration={"stir": calibration(value)}, notes=list(notes),
        settings={"seed": 0, "inversion": {"mode": "fast", "steps": 300, "tolerance": 0.01, "precision": "32"}}, **extra)


def pair() -> PairResult:
    sim = SimilarityResult("a", "b", "ida", "idb", "penultimate", "penultimate", "linear_cka", 16, 0.83,
                           ["similarity note"])
    return PairResult(similarity=sim, directions={
        "m2|m1": direction("a", "b", 0.72, adversarial=True, notes=["only m2|m1"]),
        "m1|m2": direction("b", "a", 0.64, adversarial=False)})


def markdown_tables(text: str) -> list:
    """Each pipe table of a Markdown text as (header cells, body rows of cells)."""
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            current.append([c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
        elif current:
            tables.append((current[0], current[2:]))
            current = []
    return tables


def test_the_headline_has_one_row_per_direction_with_the_few_named_columns():
    p = pair()
    table = rows.headline_table([p])
    assert [list(r) for r in table.rows] == [HEADLINE_COLUMNS[:-1]] * 2
    first, second = table.rows
    assert (first["direction"], second["direction"]) == ("m2|m1", "m1|m2")
    assert first["STIR"] == "0.720 [0.670, 0.770]" and first["normalised"] == "0.73 [0.50, 0.70]"
    assert first["linear_cka"] == second["linear_cka"] == "0.830"
    assert first["IRIs"] == "40% reached the bound; 90% pass the null"
    assert first["STIR_adv"] == "0.310 ± 0.010" and second["STIR_adv"] == "not measured"  # iri=arbitrary: none
    assert table.notes == [["similarity: similarity note", "m2|m1: only m2|m1"], ["similarity: similarity note"]]


def test_a_pair_report_opens_with_the_headline_and_keeps_every_column_in_its_files(tmp_path):
    p = pair()
    numeric, display = rows.pair_row(p), rows.pair_display(p)
    report = Report("a (m1) vs b (m2)", tables={
        "pairs": Table([numeric], display=[display], notes=[rows.pair_notes(p)], headline=rows.headline_table([p])),
        "convergence": Table([{"step": 1, "stir": 0.5}])})
    publish(report, tmp_path, LoggerConfig().without_wandb(), {}, run_name="t")
    readme = (tmp_path / "README.md").read_text()
    tables = markdown_tables(readme)
    header, body = tables[0]  # the first table of the README: the headline
    assert header == HEADLINE_COLUMNS and len(body) == 2
    assert body[0][header.index("STIR")] == "0.720 [0.670, 0.770]" and body[1][header.index("STIR_adv")] == "not measured"
    assert readme.index("## pairs") < readme.index("## convergence")
    assert "floor(m2|m1)" not in readme.replace("\\|", "|")  # the wide table is not in the README ...
    assert "[`pairs.md`](pairs.md)" in readme and "[`pairs.csv`](pairs.csv)" in readme  # ... but linked
    for link in re.findall(r"\]\(([^)]+)\)", readme):
        assert (tmp_path / link).is_file(), link
    (full_header, full_body), = markdown_tables((tmp_path / "pairs.md").read_text())
    assert full_header == [*display, "notes"] and len(full_body) == 1  # every readable column, as before
    with open(tmp_path / "pairs.csv") as f:
        reader = csv.DictReader(f)
        (row,) = list(reader)
    assert reader.fieldnames == list(numeric)  # the CSV: pair_row's columns, in its order, unchanged
    assert math.isclose(float(row["stir_m2_given_m1"]), 0.72) and math.isclose(float(row["stir_adv_m2_given_m1"]), 0.31)
    assert "stir_floor_m2_given_m1" in row and "agreement_on_m1_iris" in row


def test_a_matrix_headline_names_both_models_and_has_no_direction_column():
    d = direction("a", "b", 0.5, adversarial=False)
    table = rows.direction_headline_table([d, d])
    assert list(table.rows[0]) == ["m1 (ref)", "m2 (target)", "STIR", "floor", "ceiling", "normalised", "IRIs", "STIR_adv"]
    assert table.rows[0]["STIR_adv"] == "not measured" and len(table.notes) == 2


def test_a_long_headline_gets_a_file_of_its_own(tmp_path):
    from stir.reporting.publish import README_ROWS

    d = direction("a", "b", 0.5, adversarial=False)
    many = [d] * (README_ROWS + 1)
    report = Report("m", tables={"directions": Table([rows.direction_row(x) for x in many],
                                                     display=[rows.direction_display(x) for x in many],
                                                     headline=rows.direction_headline_table(many))})
    publish(report, tmp_path, LoggerConfig().without_wandb(), {}, run_name="t")
    readme = (tmp_path / "README.md").read_text()
    assert "[`directions_headline.md`](directions_headline.md)" in readme and not markdown_tables(readme)
    (header, body), = markdown_tables((tmp_path / "directions_headline.md").read_text())
    assert header[:3] == ["m1 (ref)", "m2 (target)", "STIR"] and len(body) == README_ROWS + 1


def test_a_report_with_its_notes_below_its_first_table_opens_with_that_table(tmp_path):
    """The paper's report: its scorecard under 2,400 words of notes before; now one line says where the
    notes are, the first table follows the title, the notes sit under '## notes' below it, the rest after."""
    notes = [f"note {i}: " + "word " * 300 for i in range(8)]
    report = Report("A long report", notes=notes, notes_below_first_table=True,
                    tables={"scorecard": Table(rows=[{"claim": 1, "verdict": "holds"}]),
                            "details": Table(rows=[{"a": 1}])})
    publish(report, tmp_path, LoggerConfig().without_wandb(), {}, run_name="t")
    text = (tmp_path / "README.md").read_text()
    assert re.findall(r"^## (\S+)", text, flags=re.M) == ["scorecard", "notes", "details"]
    before = text[:text.index("## scorecard")]
    assert len(before.split()) < 40 and "8 notes" in before and "(#notes)" in before
    assert all(f"> note {i}: " in text[text.index("## notes"):text.index("## details")] for i in range(8))
    assert json.loads((tmp_path / "record.json").read_text())["notes"] == notes  # the record keeps them all
