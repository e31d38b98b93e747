"""Result dataclasses: Stat, JSON round trips (NaN included), flat rows without not-computed fields."""
import json
import math

import pytest

from stir.evaluation import DirectionResult, PairResult, Stat


def test_stat_from_values_is_mean_and_population_std():
    s = Stat.from_values([1.0, 3.0])
    assert (s.mean, s.std, s.values) == (2.0, 1.0, [1.0, 3.0])
    assert Stat.from_values([0.5]).std == 0.0
    assert math.isnan(Stat.from_values([1.0, math.nan]).mean)  # an undefined draw is never averaged away
    with pytest.raises(ValueError):
        Stat.from_values([])


def direction(**kw) -> DirectionResult:
    base = dict(
        ref="a", target="b", ref_id="ida", target_id="idb", tap_ref="penultimate", tap_target="layer4.1",
        measure="linear_cka", n=16, k=2, iri="arbitrary", stir=Stat.from_values([0.8, 0.9]),
        agreement=Stat.from_values([1.0, 0.5]),
        quality={"arbitrary": {"median_residual": 0.01, "fraction_iri": 1.0, "fraction_iri_std": 0.0}},
        settings={"seed": 0, "inversion": {"mode": "fast", "steps": 300, "tolerance": 0.01, "precision": "32"}},
    )
    return DirectionResult(**{**base, **kw})


def test_direction_result_round_trips_through_json_and_flattens():
    d = direction(stir=Stat.from_values([math.nan, 0.9]), notes=["STIR draw 0 (seed 0): undefined"])
    back = DirectionResult.from_dict(json.loads(json.dumps(d.to_dict())))
    assert json.dumps(back.to_dict()) == json.dumps(d.to_dict())
    row = d.to_row()
    assert math.isnan(row["stir"]) and row["agreement"] == 0.75 and row["agreement_std"] == 0.25
    assert "stir_adv" not in row and "difficulty" not in row  # not computed: absent
    assert row["arbitrary_fraction_iri"] == 1.0 and row["inversion_steps"] == 300 and row["seed"] == 0
    assert row["notes"] == "STIR draw 0 (seed 0): undefined"
    assert all(not isinstance(v, (list, dict)) for v in row.values())


def test_pair_result_round_trips_and_names_rows_by_direction():
    p = PairResult(
        ref="a", target="b", ref_id="ida", target_id="idb", tap_ref="t1", tap_target="t2", measure="linear_cka",
        n=16, k=2, iri="both", similarity=0.7,
        stir_m2_given_m1=Stat.from_values([0.5, 0.7]), stir_adv_m1_given_m2=Stat.from_values([0.2, 0.2]),
        difficulty_m1_given_m2=Stat.from_values([3.0, 5.0]),
        quality={"m2|m1": {"arbitrary": {"median_residual": 0.02}}, "m1|m2": {"adversarial": {"median_target_distance": 1.5}}},
    )
    assert PairResult.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    row = p.to_row()
    assert row["stir_m2_given_m1"] == pytest.approx(0.6) and row["stir_adv_m1_given_m2_std"] == 0.0
    assert row["difficulty_m1_given_m2"] == 4.0 and row["similarity"] == 0.7
    assert row["arbitrary_median_residual_m2_given_m1"] == 0.02
    assert row["adversarial_median_target_distance_m1_given_m2"] == 1.5
    assert "stir_m1_given_m2" not in row and "agreement_on_m1_iris" not in row
    with pytest.raises(KeyError):
        PairResult.from_dict({k: v for k, v in p.to_dict().items() if k != "similarity"})
