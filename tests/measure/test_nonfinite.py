"""A model that is not finite gives no number: every derived quantity of a pair is NaN with the reason.

One NaN in one weight used to leave agreement (argmax of NaN logits is class 0), the controversial
fraction ("m2 shares m1's invariances there") and the convergence record's early steps with numbers.
"""
import math

import pytest
import torch
from torch import nn

from stir.experiments.rows import pair_convergence_rows, pair_row
from stir.inversion import ExecutionConfig, InversionConfig
from stir.measure import CalibrationConfig, Estimator, evaluate_direction, evaluate_layers, evaluate_pair
from stir.measure.similarity import evaluate_similarity
from stir.models.finite import first_nonfinite_tensor, nonfinite_reason, probe_images
from stir.store import ResultStore

FAST = InversionConfig(mode="fast", steps=8, lr=0.05, seed=0, record_steps=(2, 4))
EST = Estimator(k=2, iri="both", inversion=FAST, calibration=CalibrationConfig(permutations=3, resamples=20))
QUIET = ExecutionConfig(warn_below=0.0)


def convnet(seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                         nn.Flatten(), nn.Linear(32, 6))


def images() -> torch.Tensor:
    return torch.rand(10, 3, 8, 8, generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def broken_pair():
    good, bad = convnet(0), convnet(1)
    with torch.no_grad():
        bad[0].weight[0, 0, 0, 0] = float("nan")
    return good, bad, evaluate_pair(good, bad, images(), "4", "4", EST, run=QUIET, names=("good", "bad"))


def test_the_first_bad_tensor_is_named():
    net = convnet(0)
    assert first_nonfinite_tensor(net) is None and nonfinite_reason(net, probe_images(torch.device("cpu"), (2, 3, 8, 8))) is None
    with torch.no_grad():
        net[1].running_var[3] = float("inf")
    assert first_nonfinite_tensor(net) == "buffer 1.running_var (8,): 0 NaN, 1 Inf of 8"
    with torch.no_grad():
        net[0].bias[2] = float("nan")
    assert first_nonfinite_tensor(net) == "parameter 0.bias (8,): 1 NaN, 0 Inf of 8"  # parameters first


def test_finite_weights_with_outputs_that_overflow_are_caught():
    net = convnet(0)
    with torch.no_grad():
        net[5].weight.fill_(3e38)  # finite, but the logits overflow to inf
    assert first_nonfinite_tensor(net) is None
    assert "outputs on a probe batch of 4 images" in nonfinite_reason(net, images()[:4])


# Every number a pair row carries, for both directions: each must be NaN (work counts 0).
NUMBERS = ["similarity"] + [f"{name}_{d}" for d in ("m2_given_m1", "m1_given_m2") for name in (
    "stir", "stir_adv", "stir_floor", "stir_ceiling", "stir_normalised", "stir_low", "stir_high",
    "stir_adv_floor", "stir_adv_ceiling", "stir_adv_normalised", "stir_adv_low", "stir_adv_high",
    "difficulty", "difficulty_fraction", "difficulty_walk_median", "difficulty_walk_restricted_mean",
    "difficulty_perturbation_median", "difficulty_perturbation_restricted_mean", "difficulty_walk_median_censored",
    "arbitrary_fraction_iri", "arbitrary_median_residual", "adversarial_fraction_iri", "adversarial_median_residual",
)] + [f"stir_{d}_std" for d in ("m2_given_m1", "m1_given_m2")] + ["agreement_on_m1_iris", "agreement_on_m2_iris"]


@pytest.mark.parametrize("column", NUMBERS)
def test_every_derived_number_is_nan(broken_pair, column):
    row = pair_row(broken_pair[2])
    assert column in row and math.isnan(row[column]), (column, row.get(column))


def test_the_convergence_record_is_nan_at_every_step(broken_pair):
    rows = pair_convergence_rows(broken_pair[2])
    assert {(r["direction"], r["iri"]) for r in rows} == {(d, k) for d in ("m2|m1", "m1|m2") for k in ("arbitrary", "adversarial")}
    assert sorted({r["step"] for r in rows}) == [2, 4, 8]
    assert all(math.isnan(r[c]) for r in rows for c in ("stir", "stir_std", "median_residual", "fraction_iri"))


def test_the_reason_names_the_model_and_tensor_and_nothing_is_inverted_or_stored(broken_pair, tmp_path):
    good, bad, pair = broken_pair
    for d in pair.directions.values():
        assert any("model 'bad' is not finite (parameter 0.weight (8, 3, 3, 3): 1 NaN" in n for n in d.notes)
        assert all(q["evaluations"] == 0.0 for q in d.quality.values())
    assert "model 'bad' is not finite" in pair.similarity.notes[0]
    store = ResultStore(tmp_path)
    evaluate_direction(good, bad, images(), "4", "4", EST, run=QUIET, store=store)
    evaluate_similarity(good, bad, images(), "4", "4", run=QUIET, store=store)
    assert not list(tmp_path.rglob("*.json"))  # a NaN result is not stored (a stale entry is never served)


def test_layerwise_rows_and_slopes_are_nan(broken_pair):
    good, bad, _ = broken_pair
    result = evaluate_layers(good, bad, images(), EST, taps=["2", "4"], run=QUIET)
    assert all(math.isnan(r.stat("m2|m1", "stir").mean) and math.isnan(r.similarity.value) for r in result.rows)
    assert math.isnan(result.slope("m2|m1"))
