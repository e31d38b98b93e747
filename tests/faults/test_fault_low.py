"""Issue 54, the Low and Medium items: each bad value is one line naming the key and the fix, exit
status 2, before any work (no run folder, no stored result), through the real train.py and evaluate.py."""
import os

import pytest
import torch

from conftest import refused, tiny_train_args
from faultkit import eval_args

P = "python:behaviour_nets:"


def nets_args(tmp_path, data_root, *extra):
    return eval_args(tmp_path / "out", f"data.root={data_root}", "data.download=false", "data.holdout_size=40",
                     f"ref={P}global_net", f"target={P}relu_tanh_partner", *extra)


def nothing_stored(tmp_path):
    return not list((tmp_path / "out").glob("store/*/*.json"))


@pytest.mark.parametrize("extra, said", [
    (["device=foo"], "device='foo' is not a device; use device=cpu, cuda, cuda:N or auto"),
    (["device=mps"], "device='mps' but MPS is not available here"),
    (["iri_grid_images=0"], "iri_grid_images=0 must be >= 1"),
    (["iri_grid_images=-1"], "iri_grid_images=-1 must be >= 1"),
    (["calibration.resamples=1000000000"], "calibration.resamples=1000000000 is beyond 100,000"),
    (["calibration.permutations=1000000000"], "calibration.permutations=1000000000 is beyond 100,000"),
    (["k=1000000"], "k=1000000 seed draws is beyond 1000"),
    (["difficulty.steps=1000000000"], "difficulty.steps=1000000000 is beyond 100,000"),  # ran out of memory naming
    # execution.batch_size
])
def test_an_absurd_evaluate_value_is_one_line_before_any_work(extra, said, cifar10_root, tmp_path, monkeypatch,
                                                              capsys):
    if extra == ["device=mps"] and torch.backends.mps.is_available():
        pytest.skip("this machine has MPS")
    message = refused("evaluate", nets_args(tmp_path, cifar10_root, *extra), monkeypatch, capsys)
    assert said in message, message
    assert nothing_stored(tmp_path)


def test_a_zoo_file_that_is_not_yaml_names_its_line(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "zoo.yaml"
    bad.write_text("vanilla: [loss=vanilla]\nbroken: [unclosed\n")
    message = refused("evaluate", eval_args(tmp_path / "out", f"zoo.file={bad}", "ref=vanilla", "target=vanilla"),
                      monkeypatch, capsys)
    assert f"zoo.file {bad} is not valid YAML at line" in message


@pytest.mark.parametrize("extra, said", [
    (["optim.lr=nan"], "optim.lr=nan must be a finite number > 0"),
    (["optim.lr=inf"], "optim.lr=inf must be a finite number > 0"),
    (["trainer.devices=0"], "trainer.devices=0 selects no device"),
    (["trainer.accelerator=gpu"], "trainer.accelerator=gpu but this machine has no CUDA device"),
])
def test_an_absurd_train_value_is_one_line_before_any_work(extra, said, cifar10_root, tmp_path, monkeypatch, capsys):
    if "trainer.accelerator=gpu" in extra and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    message = refused("train", tiny_train_args(cifar10_root, tmp_path / "runs", *extra), monkeypatch, capsys)
    assert said in message, message
    assert not (tmp_path / "runs").exists()


def test_finite_logits_over_a_nan_tap_are_refused_like_nan_logits(cifar10_root, tmp_path, monkeypatch, capsys):
    """The issue: STIR 0.401 [0.151, 0.652] reported with "100% IRIs, r 0", exit 0."""
    message = refused("evaluate", eval_args(tmp_path / "out", f"data.root={cifar10_root}", "data.download=false",
                                            "data.holdout_size=40", f"ref={P}nan_tap_net", "tap_ref=side",
                                            f"target={P}relu_tanh_partner"), monkeypatch, capsys)
    assert "is not finite: its tap 'penultimate' on a probe batch" in message and "NaN" in message
    assert nothing_stored(tmp_path)


def test_a_nan_tap_in_the_library_makes_every_number_nan_not_a_value():
    import behaviour_nets as nets
    from stir.measure import CalibrationConfig, Estimator, evaluate_pair
    from stir.inversion import InversionConfig
    from stir.models.sources.base import SourcedModel

    m1, m2 = SourcedModel(nets.nan_tap_net()).eval(), SourcedModel(nets.relu_tanh_partner()).eval()
    m1.set_taps({"penultimate": "side"})
    m2.set_taps({"penultimate": "head:input"})
    est = Estimator(k=1, iri="arbitrary", inversion=InversionConfig(mode="fast", steps=3, seed=0),
                    calibration=CalibrationConfig(permutations=2, resamples=10))
    result = evaluate_pair(m1, m2, torch.rand(8, 3, 32, 32), "penultimate", "penultimate", est)
    assert all(v != v for v in result.get("m2|m1").stir.values)
    assert any("is not finite (its tap 'penultimate'" in n for n in result.get("m2|m1").notes)


@pytest.mark.parametrize("linked", ["store/direction", "inversion-cache"])
def test_a_linked_store_folder_or_inversion_cache_is_refused(linked, cifar10_root, tmp_path, monkeypatch, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "out" / linked
    link.parent.mkdir(parents=True)
    os.symlink(elsewhere, link)
    message = refused("evaluate", nets_args(tmp_path, cifar10_root), monkeypatch, capsys)
    assert f"{link} is a symbolic link" in message
    assert list(elsewhere.iterdir()) == []


def test_an_interval_past_the_measures_range_is_shown_clipped_and_says_so():
    """The issue: CKA-based STIR '0.772 [0.484, 1.061]', linear CKA being at most 1. A shipped entry
    whose half-sampling interval ends at 1.008 is read as a report reads it: the cell shows the end
    clipped to 1 and says it was clipped, with the end as computed; the stored interval is unchanged."""
    import json
    from pathlib import Path

    from stir.experiments.rows import direction_display
    from stir.measure.results import DirectionResult

    entry = Path(__file__).parents[2] / "zoo/store/direction/c873ac661617f1b42f2ff8a42a7461dab5ee00e6188dea30d35df52af8d6a6c1.json"
    d = DirectionResult.from_dict(json.loads(entry.read_text())["result"])
    assert d.measure == "linear_cka" and d.calibration["stir"].high > 1  # as stored, as computed
    cell = direction_display(d)["STIR"]
    assert cell == "0.975 [0.942, 1.000] (clipped to linear_cka's range [0, 1]; was [0.942, 1.008])", cell


def test_a_model_found_not_finite_after_load_is_refused_unless_allowed(cifar10_root, tmp_path, monkeypatch, capsys):
    """The issue: a model that passed the load check but is not finite on X was reported (exit 0) with
    a note saying allow_nonfinite=true though it was false. With allow_nonfinite=false (the default)
    it is now refused in one line (exit 2) and nothing is stored; with allow_nonfinite=true it is
    reported, every number NaN, the note saying the setting as it was."""
    from conftest import run_entry_point

    message = refused("evaluate", nets_args(tmp_path, cifar10_root, f"ref={P}eight_bit_nan_net"), monkeypatch, capsys)
    assert "model 'eight_bit_nan_net' is not finite" in message and "allow_nonfinite=true" in message, message
    assert "\n" not in message.strip()
    assert nothing_stored(tmp_path)
    run_entry_point("evaluate", nets_args(tmp_path, cifar10_root, f"ref={P}eight_bit_nan_net", "allow_nonfinite=true"),
                    monkeypatch)
    said = "\n".join(p.read_text(errors="replace") for p in (tmp_path / "out").rglob("*")
                     if p.is_file() and p.suffix in (".md", ".csv", ".json") and "is not finite" in p.read_text(errors="replace"))
    assert "model 'eight_bit_nan_net' is not finite" in said and "(allow_nonfinite=true)" in said