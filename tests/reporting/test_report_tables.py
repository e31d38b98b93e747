"""Tables: exact terminal / markdown layout, CSV round trip, atomic writes."""
import csv
import math
import os

import numpy as np
import pytest

from stir.reporting import format_table, matrix_rows, mean_std, to_markdown, write_csv, write_markdown

ROWS = [
    {"model": "resnet18", "stir": 0.8123, "n": 3, "note": None},
    {"model": "vgg|16", "stir": float("nan"), "n": 12, "note": "a b"},
    {"model": "x", "cka": 1.0},  # missing keys are missing values; "cka" joins the columns last
]


def test_format_table_exact():
    assert format_table(ROWS) == (
        "model      stir   n  note    cka\n"
        "--------  -----  --  ----  -----\n"
        "resnet18  0.812   3  -         -\n"
        "vgg|16      nan  12  a b       -\n"
        "x             -   -  -     1.000"
    )


def test_to_markdown_exact_escapes_pipes_and_right_aligns_numbers():
    assert to_markdown(ROWS) == (
        "| model    |  stir |    n | note |   cka |\n"
        "| -------- | ----: | ---: | ---- | ----: |\n"
        "| resnet18 | 0.812 |    3 | -    |     - |\n"
        "| vgg\\|16  |   nan |   12 | a b  |     - |\n"
        "| x        |     - |    - | -    | 1.000 |"
    )


def test_columns_select_and_order_and_floatfmt():
    rows = [{"a": 1.23456, "b": True, "c": np.float32(0.5), "d": "two\nlines"}]
    assert format_table(rows, columns=["d", "c", "a", "b"], floatfmt=".2f") == (
        "d             c     a  b\n"
        "---------  ----  ----  ----\n"
        "two lines  0.50  1.23  True"
    )


def test_mean_std():
    assert mean_std(0.8123, 0.0134) == "0.812 ± 0.013"
    assert mean_std(0.8123, None) == "0.812"
    assert mean_std(None, 0.1) == "-"
    assert mean_std(float("nan"), 0.1, fmt=".2f") == "nan ± 0.10"


def test_matrix_rows():
    rows = matrix_rows(np.array([[1.0, np.nan], [0.25, 1.0]]), ["m1", "m2"], ["m1", "m2"])
    assert rows[0]["ref \\ target"] == "m1" and rows[1] == {"ref \\ target": "m2", "m1": 0.25, "m2": 1.0}
    assert math.isnan(rows[0]["m2"])
    assert format_table(rows, floatfmt=".2f").splitlines()[0] == "ref \\ target    m1    m2"
    with pytest.raises(ValueError):
        matrix_rows([[1.0, 2.0]], ["a"], ["a"])  # shape mismatch
    with pytest.raises(ValueError):
        matrix_rows([[1.0]], ["a"], ["c"], corner="c")  # corner collides with a column key


def test_csv_round_trip(tmp_path):
    path = write_csv(ROWS, tmp_path / "out" / "t.csv")
    with open(path, newline="") as f:
        back = list(csv.DictReader(f))
    assert list(back[0]) == ["model", "stir", "n", "note", "cka"]
    assert back[0] == {"model": "resnet18", "stir": "0.8123", "n": "3", "note": "", "cka": ""}
    assert back[1]["model"] == "vgg|16" and back[1]["stir"] == "nan"
    assert float(back[2]["cka"]) == 1.0
    third = 1 / 3
    write_csv([{"v": third}], path)
    with open(path, newline="") as f:
        assert float(next(csv.DictReader(f))["v"]) == third  # full precision


def test_write_markdown_with_title(tmp_path):
    path = write_markdown([{"a": 1}], tmp_path / "t.md", title="STIR")
    assert path.read_text() == "# STIR\n\n|    a |\n| ---: |\n|    1 |\n"


class _Exploding:
    def __str__(self):
        raise RuntimeError("cannot format")

    __format__ = __repr__ = __str__


def test_write_csv_failure_while_formatting_keeps_old_file(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("old\n")
    with pytest.raises(RuntimeError):
        write_csv([{"a": 1}, {"a": _Exploding()}], path)
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["t.csv"]  # no temp file left behind


def test_write_csv_failure_at_replace_keeps_old_file(tmp_path, monkeypatch):
    # The temp file is fully written when os.replace fails: it must be removed, the old file kept.
    path = tmp_path / "t.csv"
    path.write_text("old\n")

    def fail(src, dst):
        assert os.path.exists(src) and os.path.dirname(src) == str(tmp_path)
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        write_csv([{"a": 1}], path)
    monkeypatch.undo()
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["t.csv"]
    write_markdown([{"a": 1}], path)  # and a later write succeeds over it
    assert path.read_text().startswith("| ")
