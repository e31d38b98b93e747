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
    from stir.experiments.paper_config import PaperConfig

    with pytest.raises(ConfigError, match="stored"):
        _check(PaperConfig(at_iris="true"))
    _check(PaperConfig(at_iris="measure"))


def test_claim_7_is_judged_again_on_table_2s_differences_at_iris_beside_its_published_verdict():
    from types import SimpleNamespace

    from stir.experiments.paper.table2 import _iris_difference
    from stir.experiments.paper_config import PaperConfig
    from stir.paper import verdicts as v

    ctx = SimpleNamespace(estimator=SimpleNamespace(calibration=SimpleNamespace(confidence=0.95)))
    higher, lower = result(0.6, 0.01), result(0.4, 0.01)
    d = _iris_difference(higher, lower, 1.96, 0.95)  # STIR(m2|m1) - STIR(m1|m2), se sqrt(2) * 0.01
    assert abs(d.value - 0.2) < 1e-12 and abs((d.high - d.low) / 2 - 1.96 * 0.01 * math.sqrt(2)) < 1e-3
    assert not _iris_difference(None, lower, 1.96, 0.95).measured

    was = v.Verdict(v.FAILS, "published procedure: not resolved")
    rows = at_iris.verdicts(ctx, PaperConfig(), {}, None, {7: (was, [])}, v.DirectionEvidence({"at / vanilla": d}))
    (seven,) = [r for r in rows if str(r["claim"]).startswith("7")]
    assert seven["published procedure"] == v.FAILS and seven["at IRIs"] == v.HOLDS and seven["changes"] == "yes"
    rows = at_iris.verdicts(ctx, PaperConfig(), {}, None, {7: (was, [])}, None)
    assert [r["at IRIs"] for r in rows if str(r["claim"]).startswith("7")] == ["not measured"]
