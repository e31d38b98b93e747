"""Table 1's column at IRIs (stir.experiments.paper.at_iris): the cell, the column beside "ours", the
directions grouped by reference (their X' shared)."""
import math

from stir.experiments.paper import at_iris
from stir.measure.at_iris import AtIRIsResult


def result(value: float, se: float, reached=(9, 10)) -> AtIRIsResult:
    return AtIRIsResult("a", "b", "linear_cka", 10, 0.005, [value, value], list(reached), [[0], []], [0.004, 0.004],
                        [20000, 20000], {}, se=se)


def test_the_cell_shows_the_value_its_jackknife_interval_and_the_share_that_reached_the_level():
    r = result(0.5, 0.01)
    assert at_iris.cell(r, 1.96) == "0.500 [0.480, 0.520] (95% at r1 <= 0.005)"
    assert at_iris.cell(None, 1.96) == "not measured"
    assert not at_iris.value(result(math.nan, 0.01), 1.96).measured


def test_the_column_sits_beside_ours_on_stir_rows_only():
    rows = [{"pair": "a / b", "quantity": "STIR(m1|m2)", "ours": "x", "paper": "p"},
            {"pair": "a / b", "quantity": "STIR(m2|m1)", "ours": "y", "paper": "p"},
            {"pair": "a / b", "quantity": "CKA", "ours": "z", "paper": "p"}]
    readings = {("a", "b"): result(0.3, 0.02)}  # STIR(a|b): target a, ref b = STIR(m1|m2)
    out = at_iris.with_column(rows, readings, 1.96)
    assert list(out[0]) == ["pair", "quantity", "ours", "at IRIs", "paper"]
    assert out[0]["at IRIs"].startswith("0.300") and out[1]["at IRIs"] == "not measured" and out[2]["at IRIs"] == "-"
    assert at_iris.with_column(rows, {}, 1.96) == rows  # experiment.at_iris=false: no column


def test_an_unknown_at_iris_mode_is_refused_with_the_choices():
    import pytest

    from stir.config.validate import ConfigError
    from stir.experiments.paper import _check
    from stir.experiments.schema import PaperConfig

    with pytest.raises(ConfigError, match="stored"):
        _check(PaperConfig(at_iris="true"))
    _check(PaperConfig(at_iris="measure"))
