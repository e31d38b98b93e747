"""What a STIR value means (stir.measure.calibration): its floor against a closed form, its interval's
width against n, the ceiling and the normalised value, the resampling algebra against the measure itself."""
import math

import pytest
import torch

from stir.measure.calibration import (
    CalibrationConfig, Calibration, _Resampler, calibrate, chance_correct, normalise, percentile_interval,
    permutation_floor, resample_rows, standard_error_interval,
)
from stir.measure.jackknife import corrected_jackknife_se, jackknife_se, leave_one_out, leave_two_out
from stir.measure.null import closed_form_floor
from stir.similarity import linear_cka, procrustes


def paired(n: int, d: int = 8, noise: float = 0.5, seed: int = 0):
    """x (n, d) and y = a linear read-out of x plus noise (n, d): a related pair."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    w = torch.randn(d, d, generator=g, dtype=torch.float64)
    return x, x @ w + noise * torch.randn(n, d, generator=g, dtype=torch.float64)


def test_the_floor_of_a_one_feature_representation_is_the_permutation_variance_of_r():
    """Linear CKA of one feature with itself in shuffled order is the squared Pearson correlation r^2
    of a vector with its permutation, whose mean over all permutations is exactly 1 / (n - 1)."""
    n = 20
    x = torch.randn(n, 1, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    mean, std = permutation_floor("linear_cka", x, x, 4000, torch.Generator().manual_seed(0))
    assert mean == pytest.approx(1 / (n - 1), abs=0.004)  # 4000 permutations: se about 0.001
    assert 0 < std < 0.1
    assert math.isnan(permutation_floor("linear_cka", x, x, 0, torch.Generator())[0])


def test_the_floor_falls_with_n():
    x, _ = paired(400)
    small = permutation_floor("linear_cka", x[:40], x[:40], 200, torch.Generator().manual_seed(0))[0]
    large = permutation_floor("linear_cka", x, x, 200, torch.Generator().manual_seed(0))[0]
    assert large < small / 5  # roughly d / n: 8/400 against 8/40


@pytest.mark.parametrize("without_replacement", [False, True])
def test_resampled_linear_cka_is_linear_cka_of_the_resampled_rows(without_replacement):
    x, y = paired(60)
    rows = resample_rows(60, 25, torch.Generator().manual_seed(1), without_replacement)
    assert rows.shape == (25, 30 if without_replacement else 60)
    if without_replacement:
        assert all(len(set(r.tolist())) == 30 for r in rows)  # distinct rows
    fast = _Resampler("linear_cka", x, rows).values(y)
    direct = torch.tensor([float(linear_cka(x[i], y[i])) for i in rows], dtype=torch.float64)
    assert torch.allclose(fast, direct, atol=1e-12, rtol=0)
    other = _Resampler("procrustes", x, rows).values(y)  # any other measure: called on the rows
    assert torch.allclose(other, torch.tensor([float(procrustes(x[i], y[i])) for i in rows], dtype=torch.float64))


def reference_and_draws(n: int, k: int = 3, seed: int = 0):
    target, _ = paired(n, seed=seed)
    g = torch.Generator().manual_seed(seed + 100)
    primes = [target + 0.8 * torch.randn(target.shape, generator=g, dtype=torch.float64) for _ in range(k)]
    ref_primes = [target + 0.05 * torch.randn(target.shape, generator=g, dtype=torch.float64) for _ in range(k)]
    values = [float(linear_cka(target, p)) for p in primes]
    return target, primes, values, ref_primes


@pytest.mark.parametrize("interval", ["half_sampling", "jackknife_corrected"])
def test_the_interval_widens_when_n_shrinks(interval):
    assert CalibrationConfig().interval == "jackknife_corrected"  # the default since issue 53
    cfg = CalibrationConfig(permutations=10, resamples=300, interval=interval)
    widths = {}
    for n in (400, 40):
        target, primes, values, ref_primes = reference_and_draws(n)
        cal = calibrate("linear_cka", target, primes, values, target, ref_primes, ref_primes[0], cfg)
        widths[n] = cal.high - cal.low
        assert cal.resamples == (n if interval == "jackknife_corrected" else 300) and cal.interval_reading == interval
    assert widths[40] > 2 * widths[400]  # about sqrt(10) wider


def test_half_sampling_centres_the_interval_on_the_value_and_resampling_with_replacement_would_not():
    target, primes, values, ref_primes = reference_and_draws(30, k=1)
    half = calibrate("linear_cka", target, primes, values, target, ref_primes, None,
                     CalibrationConfig(resamples=400, ceiling="same_draws", interval="half_sampling"))
    assert half.low < half.value < half.high and half.high - half.value == pytest.approx(half.value - half.low)
    assert "images" in half.method and "k=1: the seed variance is not in it" in half.method
    # With replacement, duplicated rows inflate linear CKA: the resampled values sit above the value.
    rows = resample_rows(30, 400, torch.Generator().manual_seed(0))
    boot = _Resampler("linear_cka", target, rows).values(primes[0])
    assert float(boot.mean()) > values[0]


def test_ceiling_floor_and_normalised_value():
    target, primes, values, ref_primes = reference_and_draws(100)
    cal = calibrate("linear_cka", target, primes, values, target, ref_primes, ref_primes[0],
                    CalibrationConfig(permutations=50, resamples=100))
    assert cal.value == pytest.approx(sum(values) / 3)
    assert cal.floor == cal.floor_iris < cal.value < cal.ceiling <= 1 and cal.floor_method == "closed form"
    assert cal.floor_iris == pytest.approx(sum(closed_form_floor("linear_cka", target, p) for p in primes) / 3)
    assert cal.floor_images == pytest.approx(closed_form_floor("linear_cka", target, target))
    assert cal.ceiling == cal.ceiling_same_draws == pytest.approx(sum(float(linear_cka(target, p)) for p in ref_primes) / 3)
    assert cal.ceiling_independent == pytest.approx(float(linear_cka(target, ref_primes[0])))
    assert cal.ceiling_floor == pytest.approx(sum(closed_form_floor("linear_cka", target, p) for p in ref_primes) / 3)
    assert cal.normalised == pytest.approx((cal.value - cal.floor) / (cal.ceiling - cal.ceiling_floor))
    assert cal.normalised_low < cal.normalised < cal.normalised_high
    assert cal.p_value == pytest.approx(1 / 51) and cal.permutations == 50 and cal.flags == []
    assert "not training seeds" in cal.method
    images = calibrate("linear_cka", target, primes, values, target, ref_primes, ref_primes[0],
                       CalibrationConfig(permutations=50, resamples=0, floor="images", ceiling="independent"))
    assert images.floor == images.floor_images and images.ceiling == images.ceiling_independent
    assert math.isnan(images.low) and "no interval" in images.method


def test_normalise_is_undefined_without_a_gap():
    assert normalise(0.5, 0.1, 0.9) == pytest.approx(0.5)
    assert normalise(0.5, 0.1, 0.9, 0.3) == pytest.approx(0.4 / 0.6)  # the ceiling against its own floor
    for value, floor, ceiling in ((0.5, 0.3, 0.3), (math.nan, 0.1, 0.9), (0.5, math.nan, 0.9)):
        assert math.isnan(normalise(value, floor, ceiling))
    # A ceiling a hair above its floor: without a margin the ratio explodes; with one it is undefined.
    assert normalise(0.30, 0.29, 0.2900001) > 1e4
    assert math.isnan(normalise(0.30, 0.29, 0.2900001, margin=0.01))
    assert normalise(2.0, 5.0, 1.0, distance=True) == pytest.approx(0.75)  # distances: lower is more similar
    assert math.isnan(normalise(2.0, 5.0, 6.0, distance=True))


def test_the_chance_corrected_reading_is_one_at_saturation_whatever_the_floors():
    """S = C = 1 (m2 and m1 both represent X' as X): the normalised value is a ratio of the two floors
    (0.7 / 0.8 here), the chance-corrected one is 1; at the floor both are 0; with equal floors they agree."""
    assert normalise(1.0, 0.3, 1.0, 0.2) == pytest.approx(0.7 / 0.8)
    assert chance_correct(1.0, 0.3, 1.0, 0.2, identity=1.0) == pytest.approx(1.0)
    assert chance_correct(0.3, 0.3, 0.9, 0.2, identity=1.0) == pytest.approx(0.0)
    for value, floor, ceiling in ((0.6, 0.2, 0.9), (0.95, 0.1, 0.99)):
        assert chance_correct(value, floor, ceiling, floor, 1.0) == pytest.approx(normalise(value, floor, ceiling, floor))
    # kappa(S, F) / kappa(C, F_C) by hand: (0.6 - 0.4) / 0.6 over (0.9 - 0.1) / 0.9
    assert chance_correct(0.6, 0.4, 0.9, 0.1, 1.0) == pytest.approx((0.2 / 0.6) / (0.8 / 0.9))
    assert chance_correct(2.0, 5.0, 1.0, 5.0, identity=0.0, distance=True) == pytest.approx(normalise(2.0, 5.0, 1.0, distance=True))
    for args in ((0.5, 0.3, 0.3, 0.3, 1.0), (0.5, 0.1, 0.9, 0.1, None), (0.5, 1.0, 0.9, 0.1, 1.0)):
        assert math.isnan(chance_correct(*args))  # no gap; no identity value; a floor at the identity
    assert math.isnan(chance_correct(0.30, 0.29, 0.2900001, 0.29, 1.0, margin=0.01))


def test_calibrate_gives_the_chance_corrected_reading_with_its_interval():
    """Where m1 and m2 have different spectra (different floors), the two readings differ; the
    chance-corrected one is kappa(S, F) / kappa(C, F_C) of the calibration's own fields, its interval
    from the same resamples; a stored result without it reads back as NaN (not measured)."""
    target, primes, values, _ = reference_and_draws(100)
    g = torch.Generator().manual_seed(7)
    reference = torch.randn(100, 60, generator=g, dtype=torch.float64)  # many isotropic dimensions: a higher floor
    ref_primes = [reference + 0.05 * torch.randn(reference.shape, generator=g, dtype=torch.float64) for _ in range(3)]
    cal = calibrate("linear_cka", target, primes, values, reference, ref_primes, None,
                    CalibrationConfig(permutations=20, resamples=200))
    assert cal.ceiling_floor > 2 * cal.floor  # the two floors differ
    kappa = ((cal.value - cal.floor) / (1 - cal.floor)) / ((cal.ceiling - cal.ceiling_floor) / (1 - cal.ceiling_floor))
    assert cal.chance_corrected == pytest.approx(kappa) and abs(cal.chance_corrected - cal.normalised) > 0.05
    assert cal.chance_corrected_low < cal.chance_corrected < cal.chance_corrected_high
    old = {k: v for k, v in cal.to_dict().items() if not k.startswith("chance_corrected")}
    assert math.isnan(Calibration.from_dict(old).chance_corrected)
    assert Calibration.from_dict(cal.to_dict()).chance_corrected == cal.chance_corrected


def test_intervals_of_degenerate_resamples():
    assert all(math.isnan(v) for v in percentile_interval(torch.tensor([math.nan]), 0.95)[:2])
    lo, hi, count = standard_error_interval(0.5, torch.tensor([0.4, 0.6, math.nan]), 0.95)
    assert count == 2 and lo < 0.5 < hi
    with pytest.raises(ValueError, match="calibration.interval"):
        CalibrationConfig(interval="folded")


def test_the_jackknife_of_a_mean_is_its_textbook_standard_error():
    """For a mean the delete-one jackknife variance is exactly s^2 / n."""
    v = torch.randn(50, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    leave_out = (v.sum() - v) / 49  # the mean without image i
    assert jackknife_se(leave_out) == pytest.approx(float(v.std() / math.sqrt(50)), rel=1e-9)
    assert leave_one_out(4).tolist()[1] == [0, 2, 3]


def test_the_jackknife_reading_gives_centred_intervals_of_the_value_and_the_normalised_value():
    target, primes, values, ref_primes = reference_and_draws(60)
    cal = calibrate("linear_cka", target, primes, values, target, ref_primes, None,
                    CalibrationConfig(permutations=0, resamples=1, interval="jackknife_corrected"))
    assert cal.low < cal.value < cal.high and cal.high - cal.value == pytest.approx(cal.value - cal.low)
    assert cal.normalised_low < cal.normalised < cal.normalised_high and "jackknife" in cal.method
    with pytest.raises(ValueError, match="calibration.interval"):
        CalibrationConfig(interval="jackknifed")


def test_leave_two_out_holds_every_pair_or_a_sample_of_distinct_pairs_and_drops_exactly_those_two():
    rows, first, second, total = leave_two_out(6, torch.Generator().manual_seed(0))
    assert total == 15 and rows.shape == (15, 4)
    assert sorted(zip(first.tolist(), second.tolist())) == [(i, j) for i in range(6) for j in range(i + 1, 6)]
    rows, first, second, total = leave_two_out(50, torch.Generator().manual_seed(0), limit=300)
    assert total == 1225 and rows.shape == (300, 48)
    assert bool((first < second).all()) and len(set(zip(first.tolist(), second.tolist()))) == 300
    for r, i, j in zip(rows.tolist(), first.tolist(), second.tolist()):
        assert set(range(50)) - set(r) == {i, j}


def test_the_corrected_jackknife_of_a_mean_is_its_textbook_standard_error():
    """A mean has no interactions (D_ij = 0 up to its n-dependent constant): the correction leaves the
    delete-one jackknife, s / sqrt(n), as it is."""
    n = 40
    v = torch.randn(n, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    rows, first, second, total = leave_two_out(n, torch.Generator().manual_seed(0))
    se = corrected_jackknife_se(float(v.mean()), v[leave_one_out(n)].mean(1), v[rows].mean(1), first, second, total)
    assert se == pytest.approx(float(v.std() / math.sqrt(n)), rel=1e-9)


def test_the_corrected_jackknife_removes_part_of_the_bias_of_a_second_order_statistic():
    """T = mean(v)^2 at mean 0 is (nearly) purely second order, var(T) = 2 / n^2: the delete-one jackknife
    overstates it (Efron-Stein; 1.7 times at n = 60), the corrected one by about half as much."""
    n, reps = 60, 1000
    g = torch.Generator().manual_seed(11)
    rows, first, second, total = leave_two_out(n, torch.Generator().manual_seed(0))
    plain, corrected, values = [], [], []
    for _ in range(reps):
        v = torch.randn(n, generator=g, dtype=torch.float64)
        one, two = v[leave_one_out(n)].mean(1) ** 2, v[rows].mean(1) ** 2
        values.append(float(v.mean()) ** 2)
        plain.append(jackknife_se(one) ** 2)
        corrected.append(corrected_jackknife_se(values[-1], one, two, first, second, total) ** 2)
    true = float(torch.tensor(values).var())
    assert 1.45 < sum(plain) / reps / true < 2.2  # 1.71 over 2000 samples
    assert 1.15 < sum(corrected) / reps / true < 1.75  # 1.43
    assert all(p / 2 - 1e-15 <= c <= p for p, c in zip(plain, corrected))  # never below half the plain variance


def _null_or_paired(n: int, k: int, a: float, g: torch.Generator):
    """m2(X) = x (peaked spectrum), m2(X'_j) = a x + e_j, m1(X'_j) = x + 0.1 e'_j (bench/bench_coverage.py)."""
    spec = torch.tensor([0.7 ** i for i in range(8)], dtype=torch.float64).sqrt()
    x = torch.randn(n, 8, generator=g, dtype=torch.float64) * spec
    ys = [a * x + torch.randn(n, 8, generator=g, dtype=torch.float64) * spec for _ in range(k)]
    refs = [x + 0.1 * torch.randn(n, 8, generator=g, dtype=torch.float64) for _ in range(k)]
    return x, ys, refs


@pytest.mark.parametrize("a", [0.0, 1.0])
def test_the_corrected_jackknife_covers_the_expected_value_at_the_null_and_off_it(a):
    """Seeded coverage check (a small bench_coverage): over 150 independent samples (n = 60, k = 3) the
    interval holds the estimator's mean (from 600 more samples) in 88-99% of them, while the plain
    jackknife at the null is about 1.4 times too wide. 150 samples: coverage to about +-2 points."""
    n, k = 60, 3
    g = torch.Generator().manual_seed(3 + int(a))
    truth = torch.tensor([sum(float(linear_cka(x, y)) for y in ys) / k for x, ys, _ in
                          (_null_or_paired(n, k, a, g) for _ in range(600))], dtype=torch.float64)
    cfg = CalibrationConfig(permutations=0, resamples=1, interval="jackknife_corrected", guard=0.0)
    covered, widths, plain = 0, [], []
    for _ in range(150):
        x, ys, refs = _null_or_paired(n, k, a, g)
        values = [float(linear_cka(x, y)) for y in ys]
        cal = calibrate("linear_cka", x, ys, values, x, refs, None, cfg)
        covered += cal.low <= float(truth.mean()) <= cal.high
        widths.append((cal.high - cal.low) / 2)
        leave_out = torch.stack([_Resampler("linear_cka", x, leave_one_out(n)).values(y) for y in ys]).mean(0)
        plain.append(1.96 * jackknife_se(leave_out))
    sd = float(truth.std())
    assert 0.88 <= covered / 150 <= 0.99
    assert 0.85 < sum(widths) / 150 / (1.96 * sd) < 1.3
    if a == 0.0:
        assert sum(plain) / sum(widths) > 1.1  # the plain jackknife is wider still at the null


@pytest.mark.parametrize("retired", ["bootstrap", "jackknife"])
def test_a_retired_interval_reading_is_refused_in_one_line_naming_the_reading_to_use(retired, tmp_path, monkeypatch, capsys):
    from conftest import refused

    with pytest.raises(ValueError, match=f"calibration.interval={retired} is retired: .*use calibration.interval=jackknife_corrected"):
        CalibrationConfig(interval=retired)
    message = refused("evaluate", [f"calibration.interval={retired}", f"out_dir={tmp_path / 'results'}"], monkeypatch, capsys)
    assert message.startswith(f"calibration.interval={retired} is retired") and message.endswith("jackknife_corrected")
    assert not (tmp_path / "results").exists()


def test_a_stored_result_of_a_retired_reading_is_still_read():
    """Results stored under a retired reading stay readable (a local store may hold them): only new
    measurements under it are refused."""
    target, primes, values, ref_primes = reference_and_draws(40)
    d = calibrate("linear_cka", target, primes, values, target, ref_primes, None,
                  CalibrationConfig(permutations=0, resamples=50)).to_dict()
    d["interval_reading"] = "bootstrap"
    assert Calibration.from_dict(d).interval_reading == "bootstrap"
