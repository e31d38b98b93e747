"""Result dataclasses: Stat, JSON round trips (NaN and calibration included), rows without not-computed fields."""
import json
import math

import pytest

from stir.experiments.rows import direction_row, pair_row, pair_summary
from stir.measure import Calibration, DirectionResult, PairResult, SimilarityResult, Stat


def test_stat_from_values_is_mean_and_population_std():
    s = Stat.from_values([1.0, 3.0])
    assert (s.mean, s.std, s.values) == (2.0, 1.0, [1.0, 3.0])
    assert Stat.from_values([0.5]).std == 0.0
    assert math.isnan(Stat.from_values([1.0, math.nan]).mean)  # an undefined draw is never averaged away
    with pytest.raises(ValueError):
        Stat.from_values([])


def calibration(value: float = 0.85) -> Calibration:
    return Calibration(value=value, floor=0.1, floor_std=0.01, floor_images=0.1, floor_iris=0.12, ceiling=0.95,
                       ceiling_independent=0.95, ceiling_same_draws=0.97, normalised=(value - 0.1) / 0.85,
                       low=0.8, high=0.9, normalised_low=0.8, normalised_high=0.95, confidence=0.95, resamples=100,
                       method="percentile bootstrap")


def direction(**kw) -> DirectionResult:
    base = dict(
        ref="a", target="b", ref_id="ida", target_id="idb", tap_ref="penultimate", tap_target="layer4.1",
        measure="linear_cka", n=16, k=2, iri="arbitrary", stir=Stat.from_values([0.8, 0.9]),
        agreement=Stat.from_values([1.0, 0.5]),
        quality={"arbitrary": {"median_residual": 0.01, "fraction_iri": 1.0, "fraction_iri_std": 0.0}},
        calibration={"stir": calibration()},
        settings={"seed": 0, "inversion": {"mode": "fast", "steps": 300, "tolerance": 0.01, "precision": "32"}},
    )
    return DirectionResult(**{**base, **kw})


def test_direction_result_round_trips_through_json_and_flattens():
    d = direction(stir=Stat.from_values([math.nan, 0.9]), notes=["STIR draw 0 (seed 0): undefined"],
                  calibration={"stir": calibration(math.nan)})
    back = DirectionResult.from_dict(json.loads(json.dumps(d.to_dict())))
    assert json.dumps(back.to_dict()) == json.dumps(d.to_dict())
    assert isinstance(back.calibration["stir"], Calibration)
    row = direction_row(d)
    assert math.isnan(row["stir"]) and row["agreement"] == 0.75 and row["agreement_std"] == 0.25
    assert "stir_adv" not in row and "difficulty" not in row  # not computed: absent
    assert row["stir_floor"] == 0.1 and row["stir_ceiling"] == 0.95 and (row["stir_low"], row["stir_high"]) == (0.8, 0.9)
    assert row["arbitrary_fraction_iri"] == 1.0 and row["inversion_steps"] == 300 and row["seed"] == 0
    assert row["notes"] == "STIR draw 0 (seed 0): undefined"
    assert all(not isinstance(v, (list, dict)) for v in row.values())


def test_a_pair_is_its_similarity_and_one_result_per_direction():
    sim = SimilarityResult("a", "b", "ida", "idb", "t1", "t2", "linear_cka", 16, 0.7, ["identical models"])
    adv = direction(ref="b", target="a", ref_id="idb", target_id="ida", stir=None, agreement=None, iri="both",
                    stir_adv=Stat.from_values([0.2, 0.2]), difficulty=Stat.from_values([3.0, 5.0]),
                    quality={"adversarial": {"median_target_distance": 1.5}}, calibration={}, notes=["low"])
    p = PairResult(similarity=sim, directions={"m2|m1": direction(notes=[]), "m1|m2": adv})
    assert (p.ref, p.target, p.measure) == ("a", "b", "linear_cka")
    assert p.stat("m2|m1", "stir").mean == pytest.approx(0.85) and p.stat("m1|m2", "stir") is None
    assert p.notes() == [("similarity", "identical models"), ("m1|m2", "low")]
    row = pair_row(p)
    assert row["stir_m2_given_m1"] == pytest.approx(0.85) and row["stir_adv_m1_given_m2_std"] == 0.0
    assert row["difficulty_m1_given_m2"] == 4.0 and row["similarity"] == 0.7
    assert row["agreement_on_m1_iris"] == 0.75 and "agreement_on_m2_iris" not in row
    assert row["arbitrary_median_residual_m2_given_m1"] == 0.01
    assert row["adversarial_median_target_distance_m1_given_m2"] == 1.5
    assert row["stir_floor_m2_given_m1"] == 0.1 and "stir_m1_given_m2" not in row
    assert row["notes"] == "similarity: identical models; m1|m2: low"
    keys = pair_summary(p)  # stable summary keys, no display names or paths in them
    assert keys["stir_m2_given_m1"] == pytest.approx(0.85) and keys["linear_cka"] == 0.7 and keys["similarity"] == 0.7
    assert keys["stir_normalised_m2_given_m1"] == pytest.approx(0.75 / 0.85) and "stir_m2_given_m1_std" not in keys
    assert keys["fraction_iri_arbitrary_m2_given_m1"] == 1.0 and keys["agreement_on_m1_iris"] == 0.75
