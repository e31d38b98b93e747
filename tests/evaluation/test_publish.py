"""What a person reads: short model names, "-" for undefined values, each note once below the table."""
import math

from stir.evaluation.publish import readable, summary_keys
from stir.evaluation.experiments import Report


def test_display_rows_use_short_names_dashes_and_numbered_notes():
    rows = [
        {"m1 (ref)": "/data/runs/cifar10/resnet18/at/seed0/weights.pt", "m2 (target)": "at", "STIR(m2|m1)": "nan ± nan",
         "linear_cka": math.nan, "notes": "similarity: identical models; m2|m1: 3 of 8 IRIs above tolerance; raise inversion.steps"},
        {"m1 (ref)": "at", "m2 (target)": "vanilla", "STIR(m2|m1)": "0.512 ± 0.010", "linear_cka": 0.7,
         "notes": "m2|m1: 3 of 8 IRIs above tolerance; raise inversion.steps"},
    ]
    shown, notes = readable(rows)
    assert shown[0]["m1 (ref)"] == "seed0/weights.pt" and shown[1]["m1 (ref)"] == "at"
    assert shown[0]["STIR(m2|m1)"] == "-" and shown[0]["linear_cka"] == "-" and shown[1]["linear_cka"] == 0.7
    assert notes == ["similarity: identical models", "m2|m1: 3 of 8 IRIs above tolerance; raise inversion.steps"]
    assert (shown[0]["notes"], shown[1]["notes"]) == ("[1] [2]", "[2]")


def test_summary_keys_are_stable_and_carry_no_paths():
    row = {"ref": "/x/y/weights.pt", "target": "vanilla", "tap_ref": "penultimate", "measure": "linear_cka",
           "similarity": 0.7, "stir_m2_given_m1": 0.4, "stir_m2_given_m1_std": 0.01, "stir_m1_given_m2": 0.6,
           "agreement_on_m1_iris": 0.9, "arbitrary_fraction_iri_m2_given_m1": 1.0, "inversion_steps": 100}
    report = Report("t", tables={"pairs": ([row], None)}, summary={"STIR(vanilla|/x/y/weights.pt)": 0.4, "mean": 0.5})
    assert summary_keys(report) == {"stir_m2_given_m1": 0.4, "stir_m1_given_m2": 0.6, "similarity": 0.7,
                                    "linear_cka": 0.7, "agreement_on_m1_iris": 0.9,
                                    "fraction_iri_arbitrary_m2_given_m1": 1.0, "mean": 0.5}
    two = Report("t", tables={"pairs": ([row, {**row, "target": "at"}], None)})
    assert "weights.pt_vs_vanilla/stir_m2_given_m1" in summary_keys(two) and not any("/x/" in k for k in summary_keys(two))
