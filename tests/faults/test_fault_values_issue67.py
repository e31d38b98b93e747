"""Issue 67, item 5: values accepted that should not be, or shown wrongly. Each bad value is one line
naming the key and the fix, exit status 2, before any work, through the real evaluate.py."""
import math

import pytest

from conftest import refused
from faultkit import eval_args

P = "python:behaviour_nets:"


def nets_args(tmp_path, data_root, *extra):
    return eval_args(tmp_path / "out", f"data.root={data_root}", "data.download=false", "data.holdout_size=40",
                     f"ref={P}global_net", f"target={P}relu_tanh_partner", *extra)


@pytest.mark.parametrize("extra, said", [
    (["experiment.at_iris_level=1e9"], "experiment.at_iris_level=1e+09 is an r1 residual"),
    (["experiment.at_iris_level=1"], "use a level in (0, 1)"),
    (["device=cpu:1"], "device='cpu:1': the CPU takes no index; use device=cpu"),
])
def test_an_out_of_range_value_is_one_line_before_any_work(extra, said, cifar10_root, tmp_path, monkeypatch, capsys):
    message = refused("evaluate", nets_args(tmp_path, cifar10_root, *extra), monkeypatch, capsys)
    assert said in message, message
    assert not list((tmp_path / "out").glob("store/*/*.json"))


def test_a_model_named_nano_is_shown_by_its_name_and_nan_still_as_a_dash():
    from stir.reporting.publish import _undefined

    assert not any(_undefined(v) for v in ("nano_vit", "nanda-r20", "0.5 [nan, 1]"))
    assert all(_undefined(v) for v in ("nan", "NaN [nan, nan]", "nan ± nan", math.nan))
