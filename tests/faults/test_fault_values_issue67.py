"""Issue 67, item 5: values accepted that should not be, or shown wrongly. Each bad value is one line
naming the key and the fix, exit status 2, before any work, through the real evaluate.py."""
import math

import pytest

from conftest import REPO, refused
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


# ------------------------------------------------------------------ issue 67 item 5, the leftovers
@pytest.mark.parametrize("where, said", [
    ("file", "is a file, not a folder"),
    ("under a file", "cannot be written (Not a directory"),
    ("/proc", "cannot be written ("),
])
def test_an_out_dir_that_cannot_be_written_is_one_line_before_models_and_data(where, said, tmp_path, monkeypatch,
                                                                              capsys):
    """It was a bare errno line after the models and the data loaded: here no data exists at all (data.root
    is empty), so a refusal that names out_dir came before the data was read."""
    (tmp_path / "afile").write_text("not a folder")
    out = {"file": tmp_path / "afile", "under a file": tmp_path / "afile" / "out", "/proc": "/proc/stir-out"}[where]
    args = eval_args(out, f"data.root={tmp_path / 'no-data'}", "data.download=false",
                     f"ref={P}global_net", f"target={P}relu_tanh_partner")
    message = refused("evaluate", args, monkeypatch, capsys)
    assert message.startswith(f"out_dir={out} ") and said in message and "name a folder you can write" in message
    assert (tmp_path / "afile").read_text() == "not a folder" and not (tmp_path / "no-data").exists()


def test_an_unquoted_non_ascii_path_says_to_quote_it(tmp_path, monkeypatch, capsys):
    """Hydra's lexer text ("LexerNoViableAltException: out_dir=...") became one line with the quoted
    spelling, and that spelling passes the command-line check."""
    from stir.cli import check_command_line
    from stir.experiments.commands import evaluate_command

    out = tmp_path / "résultats"
    message = refused("evaluate", [f"out_dir={out}", "ref=vanilla", "target=at"], monkeypatch, capsys)
    assert message == (f"override out_dir={out} has characters outside ASCII (é) that Hydra's override parser takes "
                       f"only in a quoted value: quote it, as 'out_dir=\"{out}\"' (the single quotes keep the shell "
                       "from removing the double ones)")
    check_command_line([f'out_dir="{out}"', "ref=vanilla", "target=at"], evaluate_command(REPO / "configs" / "evaluate"))
    assert not out.exists()
