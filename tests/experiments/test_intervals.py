"""The paper kind's interval arithmetic (stir.experiments.intervals): standard errors recovered
from intervals, intervals rebuilt from them, and NaN kept as "not measured"."""
import math

import pytest

from stir.experiments.intervals import from_se, num, se
from stir.measure.seeds import z_value as z_of
from stir.paper import Interval

NAN = float("nan")


@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95, 0.99])
def test_an_interval_rebuilt_from_its_standard_error_is_the_interval(confidence):
    z = z_of(confidence)
    i = from_se(0.4, 0.05, z)
    assert math.isclose(se(i, confidence), 0.05, rel_tol=1e-12)
    assert math.isclose(i.high - i.low, 2 * z * 0.05, rel_tol=1e-12) and math.isclose((i.low + i.high) / 2, 0.4)


def test_z_is_the_two_sided_normal_quantile():
    assert math.isclose(z_of(0.95), 1.959963984540054, rel_tol=1e-12)
    assert z_of(0.99) > z_of(0.95) > z_of(0.5) > 0


def test_not_measured_stays_not_measured():
    assert math.isnan(se(Interval(NAN, NAN, NAN), 0.95))
    for value, s in [(NAN, 0.1), (0.3, NAN), (0.3, math.inf)]:
        assert not from_se(value, s, 1.96).measured
    assert num(None) == num(NAN) == "-" and num(0.12345) == "0.123" and num(0.12345, 1) == "0.1"
