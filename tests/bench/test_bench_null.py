"""bench_null.py's smoke mode runs end to end and its known answers are the population values."""
import json
import sys

import pytest

from bench import bench_null


def test_known_answers():
    assert bench_null.known_answer(0.0, "iso") == 0.0
    assert 0 < bench_null.known_answer(0.3, "iso") < bench_null.known_answer(0.3, "peak") < 1


def test_quick_run_writes_both_files(tmp_path, monkeypatch):
    out = tmp_path / "null"
    monkeypatch.setattr(sys, "argv", ["bench_null.py", "--quick", "--out", str(out)])
    bench_null.main()
    record = json.loads((tmp_path / "null.json").read_text())
    case = record["results"]["no pairing, isotropic X'"]["100"]
    assert case["truth"]["normalised"] == 0.0 and abs(case["iris"]["normalised"]) < 0.05
    assert "| case | n | known |" in (tmp_path / "null.md").read_text()
