"""The null of a STIR value (stir.measure.null, stir.measure.calibration): the closed forms against many
permutations on representations of different spectra, and the calibrated readings on synthetic cases
whose answer is known (no pairing: normalised value 0; weak pairing: a normalised value that does not
move with n)."""
import math

import pytest
import torch

from stir.measure.calibration import CalibrationConfig, _Resampler, calibrate, resample_rows
from stir.measure.null import closed_form_floor, p_value, participation_ratio, permutation_null
from stir.similarity import linear_cka


def draw(n: int, d: int, spectrum: str, g: torch.Generator) -> torch.Tensor:
    """(n, d) Gaussian rows with an isotropic ("iso") or geometrically decaying ("peak") spectrum."""
    scale = torch.ones(d) if spectrum == "iso" else torch.tensor([0.7 ** i for i in range(d)])
    return torch.randn(n, d, generator=g, dtype=torch.float64) * scale.double().sqrt()


@pytest.mark.parametrize("sx,sy", [("iso", "iso"), ("iso", "peak"), ("peak", "iso")])
def test_the_closed_form_floor_of_linear_cka_is_the_mean_over_permutations(sx, sy):
    g = torch.Generator().manual_seed(0)
    x, y = draw(60, 12, sx, g), draw(60, 20, sy, g)
    exact = closed_form_floor("linear_cka", x, y)
    assert exact == pytest.approx(math.sqrt(participation_ratio(x) * participation_ratio(y)) / 59)
    null = permutation_null("linear_cka", x, [y], 3000, torch.Generator().manual_seed(1))
    se = float(null.std()) / math.sqrt(3000)
    assert abs(float(null.mean()) - exact) < 4 * se  # the closed form is what permutations estimate
    direct = [float(linear_cka(x, y[torch.randperm(60, generator=g)])) for _ in range(5)]
    gram = permutation_null("linear_cka", x, [y], 5, torch.Generator().manual_seed(2))
    assert len(direct) == gram.numel()  # the Gram path is linear CKA of the permuted rows:
    p = torch.randperm(60, generator=torch.Generator().manual_seed(2))
    assert float(gram[0]) == pytest.approx(float(linear_cka(x, y[p])), abs=1e-12)


def test_the_debiased_floor_is_exactly_zero():
    g = torch.Generator().manual_seed(3)
    x, y = draw(40, 6, "peak", g), draw(40, 30, "iso", g)
    assert closed_form_floor("linear_cka_debiased", x, y) == 0.0
    null = permutation_null("linear_cka_debiased", x, [y], 1500, torch.Generator().manual_seed(4))
    assert abs(float(null.mean())) < 4 * float(null.std()) / math.sqrt(1500)
    assert closed_form_floor("procrustes", x, y) is None  # no closed form: the permutations estimate it


def test_the_participation_ratio_spans_one_to_the_rank():
    g = torch.Generator().manual_seed(5)
    one = torch.randn(50, 1, generator=g, dtype=torch.float64) @ torch.randn(1, 8, generator=g, dtype=torch.float64)
    assert participation_ratio(one) == pytest.approx(1.0)
    iso = draw(5000, 8, "iso", g)
    assert participation_ratio(iso) == pytest.approx(8, rel=0.02)
    assert math.isnan(participation_ratio(torch.ones(10, 3)))


def test_p_value_counts_as_extreme_values_and_its_resolution():
    null = torch.tensor([0.1, 0.2, 0.3, math.nan])
    assert p_value(0.25, null) == pytest.approx(2 / 4)
    assert p_value(0.5, null) == pytest.approx(1 / 4)  # never 0: at least 1 / (1 + P)
    assert p_value(0.15, null, distance=True) == pytest.approx(2 / 4)
    assert math.isnan(p_value(math.nan, null)) and math.isnan(p_value(0.1, torch.empty(0)))


def synthetic(n: int, pairing: float, spectrum: str, seed: int, d: int = 16):
    """m2(X) = x (peaked), m2(X') = pairing * x + fresh rows of ``spectrum``; m1 nearly inverted exactly."""
    g = torch.Generator().manual_seed(seed)
    x = draw(n, d, "peak", g)
    y = pairing * x + draw(n, d, spectrum, g)
    ref_prime = x + 0.1 * draw(n, d, "iso", g)
    return x, [y], [float(linear_cka(x, y))], x, [ref_prime]


def mean_normalised(n: int, pairing: float, spectrum: str, floor: str, reps: int = 12) -> float:
    cfg = CalibrationConfig(permutations=0, resamples=0, floor=floor)
    return sum(calibrate("linear_cka", *synthetic(n, pairing, spectrum, s), None, cfg).normalised
               for s in range(reps)) / reps


@pytest.mark.parametrize("spectrum", ["iso", "peak"])
def test_with_no_pairing_the_default_normalised_value_is_centred_on_zero_at_every_n(spectrum):
    for n in (100, 250, 1000):
        assert abs(mean_normalised(n, 0.0, spectrum, "iris")) < 0.02


def test_the_images_floor_is_off_when_the_iris_have_another_spectrum():
    # m2(X) peaked, m2(X') isotropic and unpaired: the images reading sees shared structure where there is none.
    assert mean_normalised(100, 0.0, "iso", "images") > 0.02 > abs(mean_normalised(100, 0.0, "iso", "iris"))


@pytest.mark.parametrize("spectrum", ["iso", "peak"])
def test_with_weak_pairing_the_default_normalised_value_does_not_move_with_n(spectrum):
    values = [mean_normalised(n, 0.3, spectrum, "iris") for n in (100, 250, 1000)]
    assert min(values) > 0.02 and max(values) - min(values) < 0.015
    images = [mean_normalised(n, 0.3, "iso", "images") for n in (100, 1000)]
    assert images[0] - images[1] > 0.02  # the images reading falls with n where the spectra differ


def test_a_ceiling_at_its_floor_gives_no_normalised_value_and_a_flag():
    g = torch.Generator().manual_seed(6)
    x = draw(100, 16, "peak", g)
    y = x + 0.3 * draw(100, 16, "iso", g)
    far = [draw(100, 16, "peak", g)]  # "IRIs" of m1 that m1 does not represent alike: a ceiling at chance
    cal = calibrate("linear_cka", x, [y], [float(linear_cka(x, y))], x, far, None, CalibrationConfig(permutations=99))
    assert math.isnan(cal.normalised) and "ceiling_at_floor" in cal.flags
    assert math.isnan(cal.normalised_low) and math.isfinite(cal.low)


def test_a_value_above_its_ceiling_is_flagged_not_clipped():
    g = torch.Generator().manual_seed(7)
    x = draw(100, 16, "peak", g)
    y = x + 0.05 * draw(100, 16, "iso", g)  # m2 represents X' almost exactly like X
    ref_prime = x + 0.6 * draw(100, 16, "iso", g)  # m1 less so
    cal = calibrate("linear_cka", x, [y], [float(linear_cka(x, y))], x, [ref_prime], None, CalibrationConfig(permutations=49))
    assert cal.normalised > 1 and "above_ceiling" in cal.flags


def test_an_unpaired_value_has_a_large_p_value_and_a_paired_one_the_smallest():
    unpaired = calibrate("linear_cka", *synthetic(100, 0.0, "iso", 0), None, CalibrationConfig(permutations=199))
    paired = calibrate("linear_cka", *synthetic(100, 1.0, "iso", 0), None, CalibrationConfig(permutations=199))
    assert paired.p_value == pytest.approx(1 / 200) and "at_floor" not in paired.flags
    assert unpaired.p_value > 0.05 and "at_floor" in unpaired.flags


@pytest.mark.parametrize("without_replacement", [False, True])
def test_each_resample_gets_the_closed_form_floor_of_its_own_rows(without_replacement):
    g = torch.Generator().manual_seed(8)
    x, y = draw(40, 6, "peak", g), draw(40, 9, "iso", g)
    rows = resample_rows(40, 10, torch.Generator().manual_seed(9), without_replacement)
    values, floors = _Resampler("linear_cka", x, rows).values_and_floors(y)
    direct = torch.tensor([closed_form_floor("linear_cka", x[i], y[i]) for i in rows], dtype=torch.float64)
    assert torch.allclose(floors, direct, atol=1e-12, rtol=0)
    assert torch.allclose(values, torch.tensor([float(linear_cka(x[i], y[i])) for i in rows], dtype=torch.float64))
