"""What a person reads: "-" for undefined values, each note once below the table; file names without paths."""
import math

from stir.reporting import Figure, Report, Table, slug
from stir.reporting.publish import readable


def test_display_rows_use_dashes_and_numbered_notes():
    table = Table(rows=[], display=[
        {"m1 (ref)": "vanilla-n5000/seed0", "m2 (target)": "at", "STIR(m2|m1)": "nan", "linear_cka": math.nan},
        {"m1 (ref)": "at", "m2 (target)": "vanilla", "STIR(m2|m1)": "0.512 [0.49, 0.53]", "linear_cka": 0.7},
    ], notes=[["similarity: identical models", "m2|m1: 3 of 8 IRIs above tolerance; raise inversion.steps"],
              ["m2|m1: 3 of 8 IRIs above tolerance; raise inversion.steps"]])
    shown, notes = readable(table)
    assert shown[0]["m1 (ref)"] == "vanilla-n5000/seed0"  # labels are shown as they are
    assert shown[0]["STIR(m2|m1)"] == "-" and shown[0]["linear_cka"] == "-" and shown[1]["linear_cka"] == 0.7
    assert notes == ["similarity: identical models", "m2|m1: 3 of 8 IRIs above tolerance; raise inversion.steps"]
    assert (shown[0]["notes"], shown[1]["notes"]) == ("[1] [2]", "[2]")  # a note with "; " in it stays one note


def test_file_names_carry_no_path_separator_or_colon():
    assert slug("convergence_vanilla-n5000/seed0_vs_python:pkg.nets:make") == "convergence_vanilla-n5000-seed0_vs_python-pkg.nets-make"
    assert slug("///") == "unnamed"


def test_publish_writes_tables_figures_and_links_that_resolve(tmp_path):
    from stir.config.schema import LoggerConfig
    from stir.reporting import plot_bars
    from stir.reporting.publish import publish

    report = Report("t", tables={"pairs": Table([{"a": 1.0}])}, summary={"x": 0.5},
                    figures={"bars_m/1:x": Figure(plot_bars, dict(labels=["a"], values=[1.0], errors=None, title="t", ylabel="y"))})
    figures = publish(report, tmp_path, LoggerConfig().without_wandb(), {"k": 1}, run_name="t")
    assert [p.name for p in figures.values()] == ["bars_m-1-x.png"]
    readme = (tmp_path / "README.md").read_text()
    import re

    for link in re.findall(r"\]\(([^)]+)\)", readme):
        assert (tmp_path / link).is_file() and "/" not in link and ":" not in link
