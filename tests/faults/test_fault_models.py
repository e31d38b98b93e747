"""Items 1, 8 and 9 of issue 21 through the real evaluate.py: no number from a broken model, and one
line (exit 2) for every expected failure: a weights file of another architecture, a failing
factory, n larger than the split, a full disk under the inversion cache."""
import csv
import json
import math
import shutil

import pytest
import torch

from faultkit import RUN, eval_args, evaluate, exit_of, full_disk, train_seed_pair
from stir.provenance import file_sha256
from stir.zoo.resolve import NonFiniteModelError


@pytest.fixture(scope="module")
def runs(tmp_path_factory, cifar10_root):
    """Two finished tiny runs and a third whose training diverged: one NaN in a conv weight, the
    weights.pt and metrics.json consistent (its recorded sha256 is of the NaN weights)."""
    runs = train_seed_pair(cifar10_root, tmp_path_factory)
    diverged = runs / RUN.format(seed="_diverged")  # label vanilla/seed_diverged
    shutil.copytree(runs / RUN.format(seed=1), diverged)
    blob = torch.load(diverged / "weights.pt", weights_only=True)
    blob["state_dict"]["layer1.0.conv1.weight"][0, 0, 0, 0] = float("nan")
    torch.save(blob, diverged / "weights.pt")
    metrics = json.loads((diverged / "metrics.json").read_text())
    (diverged / "metrics.json").write_text(json.dumps({**metrics, "weights_sha256": file_sha256(diverged / "weights.pt")}))
    return runs


def good(runs):
    return str(runs / RUN.format(seed=0))


def bad(runs):
    return str(runs / RUN.format(seed="_diverged"))


def test_a_model_with_a_nan_weight_is_refused_naming_the_model_and_tensor(runs, tmp_path, monkeypatch):
    with pytest.raises(NonFiniteModelError, match=r"model vanilla/seed_diverged \(.*diverged\) is not finite: parameter "
                                                  r"layer1\.0\.conv1\.weight \(4, 4, 3, 3\): 1 NaN, 0 Inf of 144; .*"
                                                  r"allow_nonfinite=true"):
        evaluate(tmp_path / "results", monkeypatch, f"ref={good(runs)}", f"target={bad(runs)}")
    code, stderr = exit_of("evaluate", eval_args(tmp_path / "results", f"ref={good(runs)}",
                                                 f"target={bad(runs)}"), monkeypatch)
    assert code == 2 and stderr.count("error:") == 1 and "Traceback" not in stderr and "layer1.0.conv1.weight" in stderr
    assert not (tmp_path / "results" / "store").exists()  # refused before anything was measured


def test_allow_nonfinite_reports_every_number_of_it_as_nan_with_the_reason(runs, tmp_path, monkeypatch):
    out = tmp_path / "results"
    evaluate(out, monkeypatch, f"ref={good(runs)}", f"target={bad(runs)}", "iri=both", "allow_nonfinite=true")
    folder = (out / "pair_vanilla-seed0_vs_vanilla-seed_diverged").resolve()
    (row,) = csv.DictReader(open(folder / "pairs.csv"))
    numbers = {k: v for k, v in row.items() if k.startswith(("stir", "agreement", "difficulty", "arbitrary_",
                                                              "adversarial_", "similarity"))
               and not k.endswith("evaluations_m2_given_m1") and not k.endswith("evaluations_m1_given_m2")}
    assert {"agreement_on_m1_iris", "agreement_on_m2_iris", "difficulty_fraction_m2_given_m1",
            "difficulty_walk_median_m1_given_m2", "stir_adv_m2_given_m1", "similarity"} <= set(numbers)
    assert {k: v for k, v in numbers.items() if v != "nan"} == {}  # was: agreement 0.375, fraction 0.000, ...
    convergence = list(csv.DictReader(open(folder / "convergence.csv")))
    assert convergence and all(r["stir"] == "nan" and r["fraction_iri"] == "nan" for r in convergence)
    record = json.loads((folder / "record.json").read_text())
    assert "layer1.0.conv1.weight" in record["config"]["models"]["vanilla/seed_diverged"]["nonfinite"]
    assert any("model vanilla/seed_diverged is not finite" in n for n in record["notes"])
    assert "shares m1's invariances" not in (folder / "pairs.md").read_text()
    assert not list((out / "store").rglob("*.json"))  # nothing stored, nothing inverted
    assert not list((out / "inversion-cache").rglob("*.pt")) if (out / "inversion-cache").exists() else True


def test_a_matrix_with_a_nan_model_reports_nan_for_its_accuracy_too(runs, tmp_path, monkeypatch):
    evaluate(tmp_path / "results", monkeypatch, "experiment=relative_robustness",
             f"experiment.models=[{bad(runs)},{good(runs)}]", "allow_nonfinite=true", "calibration.resamples=0")
    folder = (tmp_path / "results" / "relative_robustness").resolve()
    accuracy = {r["model"]: r for r in csv.DictReader(open(folder / "accuracy.csv"))}
    assert accuracy["vanilla/seed_diverged"]["test/acc"] == "nan" and accuracy["vanilla/seed0"]["test/acc"] != "nan"
    matrix = {r["m1 (ref) \\ m2 (target)"]: r for r in csv.DictReader(open(folder / "matrix_stir.csv"))}
    assert matrix["vanilla/seed_diverged"]["vanilla/seed0"] == "nan" and matrix["vanilla/seed0"]["vanilla/seed_diverged"] == "nan"
    assert math.isfinite(float(matrix["vanilla/seed0"]["vanilla/seed0"]))


def test_weights_of_another_architecture_are_one_line_naming_file_architecture_and_key(runs, tmp_path, monkeypatch):
    blob = torch.load(runs / RUN.format(seed=0) / "weights.pt", weights_only=True)
    blob["model"]["width"] = 8  # says resnet18 width 8; its tensors are of width 4
    bare = tmp_path / "bare" / "weights.pt"
    bare.parent.mkdir()
    torch.save(blob, bare)
    code, stderr = exit_of("evaluate", eval_args(tmp_path / "results", f"ref={bare}", f"target={good(runs)}"),
                           monkeypatch)
    (line,) = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert code == 2 and len(stderr.splitlines()) == 2  # the error and the HYDRA_FULL_ERROR hint, no traceback
    assert str(bare) in line and "resnet18 (width 8)" in line and "first mismatch: key 'stem.0.weight'" in line


@pytest.mark.parametrize("extra, message", [
    (["ref=python:torch.nn:Linear"], "python:torch.nn:Linear: the factory raised TypeError"),
    (["ref=python:no_such_module_anywhere:make"], "cannot import module 'no_such_module_anywhere'"),
    (["n=100000"], "cannot sample n=100000 images"),
    (["inversion.steps=0"], "inversion.steps must be >= 1"),
    (["inversion.step_size=0"], "inversion.step_size and inversion.lr must be > 0"),
])
def test_input_errors_are_one_line_and_exit_2(extra, message, runs, tmp_path, monkeypatch):
    code, stderr = exit_of("evaluate", eval_args(tmp_path / "results", f"ref={good(runs)}",
                                                 f"target={runs / RUN.format(seed=1)}", *extra), monkeypatch)
    assert code == 2 and "Traceback" not in stderr, stderr[-2000:]
    (line,) = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert message in line


def test_a_full_disk_under_the_inversion_cache_is_a_warning_with_the_path(runs, tmp_path, monkeypatch, capfd):
    out = tmp_path / "results"
    seen = full_disk(monkeypatch, under="inversion-cache")
    capfd.readouterr()
    evaluate(out, monkeypatch, f"ref={good(runs)}", f"target={runs / RUN.format(seed=1)}")
    said = "".join(capfd.readouterr())
    assert seen["failed"] >= 1 and "could not write inversion cache entry" in said and str(out / "inversion-cache") in said
    assert (out / "pair_vanilla-seed0_vs_vanilla-seed1" / "pairs.csv").is_file()  # the evaluation finished
