"""Every new measure equals its public reference implementation to 1e-6 on seeded float64 cases.

The values in fixtures/reference_values.json were computed once, in a separate
environment, with the packages and commits it records (fixtures/make_reference_values.py);
the inputs are stored beside them.
"""

import json
from pathlib import Path

import pytest
import torch

import stir.similarity as sim

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "reference_values.json").read_text())
CASES = {k: (torch.tensor(v["x"], dtype=torch.float64), torch.tensor(v["y"], dtype=torch.float64))
         for k, v in FIXTURE["cases"].items()}


def _id(v):
    opts = ",".join(f"{k}={o}" for k, o in sorted(v["options"].items()))
    return f"{v['measure']}[{opts}]-{v['case']}-{v['reference'].split(' ')[0]}"


def test_fixture_records_its_provenance():
    packages = FIXTURE["packages"]
    for name in ("rsatoolbox", "dcor", "scikit-learn", "resi (git)", "netrep (git)", "platonic (git)"):
        assert packages[name], name
    assert "make_reference_values.py" in FIXTURE["generated_by"]
    covered = {v["measure"] for v in FIXTURE["values"]}
    missing = [name for name in sim.names() if not checked_elsewhere(name) and name not in covered]
    assert not missing, missing


# The measures of the first release, checked against textbook formulas and their original code in their
# own test files (test_similarity_cka.py, test_similarity_cca.py, ...). A closed list: it never grows.
FIRST_RELEASE = {"linear_cka", "linear_cka_debiased", "rbf_cka", "cca", "cca_squared", "svcca", "pwcca",
                 "linear_regression", "procrustes", "relu_cka", "relu_procrustes", "relu_procrustes_distance"}


def checked_elsewhere(name: str) -> bool:
    """Whether ``name`` needs no value of its own in the reference fixture: a first-release measure, a
    measure whose declared reference is a stated closed form (``reference="closed form ..."``, checked
    against it in its own test, e.g. cka_euclidean), or a further name of a function the fixture covers
    with fixed options (rsa_pearson = rsa with compare=pearson)."""
    e = sim.info(name)
    covered_fns = {sim.info(v["measure"]).fn for v in FIXTURE["values"]}
    return name in FIRST_RELEASE or e.reference.startswith("closed form") or (bool(e.options) and e.fn in covered_fns)


@pytest.mark.parametrize("entry", FIXTURE["values"], ids=_id)
def test_equals_reference(entry):
    x, y = CASES[entry["case"]]
    got = sim.get(entry["measure"], **entry["options"])(x, y)
    assert got.dtype == torch.float64
    assert abs(float(got) - entry["value"]) <= 1e-6, (float(got), entry["value"], entry["reference"])


@pytest.mark.parametrize(
    "ident,name,options",
    [
        ("measure/netrep/procrustes-distance=angular", "procrustes_angular", {}),
        ("measure/netrep/shape_metric-alpha=0.25-distance=euclidean", "shape_metric",
         {"alpha": 0.25, "distance": "euclidean", "whiten": "netrep"}),
        ("measure/stir/shape_metric-alpha=0.25-distance=euclidean", "shape_metric",
         {"alpha": 0.25, "distance": "euclidean"}),
        ("measure/resi/eigenspace_overlap_score", "eigenspace_overlap", {"divide_by": "width"}),
        ("measure/stir/eigenspace_overlap_score", "eigenspace_overlap", {}),
        ("measure/svcca/pwcca-score", "pwcca", {"weights": "svcca"}),
        ("measure/stir/pwcca-score", "pwcca", {}),
        ("measure/contrasim/pwcca-score", "pwcca", {}),
        ("measure/rsatoolbox/rsa-rdm=correlation-compare=tau_a", "rsa", {"compare": "kendall_tau_a"}),
        ("measure/platonic/mutual_knn-topk=5", "mutual_knn", {"k": 5}),
        ("measure/resi/gulp", "gulp", {"squared": True}),
        ("measure/stir/cka-kernel=linear-hsic=gretton-score", "linear_cka", {}),
        ("measure/resi/rsm_norm_difference", "rsm_norm_difference", {"norm": "spectral"}),
        ("measure/stir/rsm_norm_difference", "rsm_norm_difference", {}),
        ("measure/resi/hard_correlation_match", "hard_correlation_match", {}),
        ("measure/resi/soft_correlation_match", "soft_correlation_match", {}),
        ("measure/resi/aligned_cosine_similarity", "aligned_cosine", {}),
        ("measure/resi/permutation_procrustes", "permutation_procrustes", {}),
        ("measure/resi/permutation_angular_shape_metric", "permutation_procrustes", {"distance": "angular"}),
        ("measure/resi/orthogonal_procrustes", "uncentred_procrustes", {}),
        ("measure/resi/orthogonal_angular_shape_metric", "uncentred_procrustes", {"distance": "angular"}),
        ("measure/resi/joint_rank_jaccard_similarity", "joint_rank_jaccard", {}),
        ("measure/platonic/lcs_knn-topk=5", "lcs_knn", {"k": 5, "normalize": False}),
        ("measure/stir/lcs_knn-topk=5", "lcs_knn", {"k": 5}),
    ],
)
def test_ids_give_the_same_numbers(ident, name, options):
    x, y = CASES["B"] if "pwcca" in ident else CASES["A"]  # ReSi's pwcca needs d1 <= d2
    assert float(sim.get(ident)(x, y)) == float(sim.get(name, **options)(x, y))


# ---------------------------------------------------------------- issue 32: package conventions

CONVENTIONS = json.loads((Path(__file__).parent / "fixtures" / "convention_values.json").read_text())


def test_package_convention_entries_record_their_provenance():
    added = [v for v in FIXTURE["values"] if v.get("added_by") == "add_package_conventions.py"]
    assert {v["measure"].split("/")[1] for v in added} == {"resi", "svcca", "netrep"}
    record = FIXTURE["added"]["add_package_conventions.py"]
    assert record["packages"]["resi (git)"] == FIXTURE["packages"]["resi (git)"]
    assert record["packages"]["netrep (git)"] == FIXTURE["packages"]["netrep (git)"]
    for v in added:  # each names the package, its commit and the function called
        assert "@" in v["reference"] and "(" in v["reference"], v


def _conv_id(v):
    opts = ",".join(f"{k}={o}" for k, o in sorted(v["options"].items()))
    return f"{v['measure']}[{opts}]-{v['case']}"


@pytest.mark.parametrize("entry", CONVENTIONS["values"], ids=_conv_id)
def test_project_conventions_keep_their_values(entry):
    """The project's own names (registered names, measure/stir/ ids) give what they gave before issue 32."""
    x, y = CASES[entry["case"]]
    fn = sim.get(entry["measure"], **entry["options"])
    if entry["value"] == "ValueError":
        with pytest.raises(ValueError):
            fn(x, y)
    else:
        assert abs(float(fn(x, y)) - entry["value"]) <= 1e-12 * max(1.0, abs(entry["value"]))


def test_package_ids_differ_where_the_conventions_do():
    x, y = CASES["overwide"]  # n = 20 < d1 = 30 < d2 = 60
    assert abs(float(sim.get("measure/stir/eigenspace_overlap_score")(x, y)) - 1.0) < 1e-12
    assert abs(float(sim.get("measure/resi/eigenspace_overlap_score")(x, y)) - 1 / 3) < 1e-12
    with pytest.raises(ValueError, match="rank"):  # the project refuses the trivial alpha = 0
        sim.get("measure/stir/cca-distance=angular")(x, y)
    assert float(sim.get("measure/netrep/cca-distance=angular")(x, y)) < 1e-6  # netrep: trivially 0
    x, y = CASES["A"]  # d1 = 8 > d2 = 6: ReSi's pwcca fails, and so does its convention here
    with pytest.raises(ValueError, match="more neurons"):
        sim.get("measure/resi/pwcca-score")(x, y)


# ---------------------------------------------------------------- issue 32: the families added after them


def test_family_entries_record_their_provenance():
    added = [v for v in FIXTURE["values"] if v.get("added_by") == "add_families.py"]
    record = FIXTURE["added"]["add_families.py"]
    assert record["packages"]["resi (git)"] == FIXTURE["packages"]["resi (git)"]
    assert record["packages"]["platonic (git)"] == FIXTURE["packages"]["platonic (git)"]
    assert record["packages"]["scikit-learn"] and record["packages"]["torch"]
    ids = {v["measure"] for v in added if v["measure"].startswith("measure/")}
    assert {i.split("/")[1] for i in ids} == {"resi", "platonic"}
    assert {v["case"] for v in added} <= set(FIXTURE["cases"])  # no new case: the stored arrays
    for v in added:  # each names the package, its commit (or version) and the function called
        assert ("@" in v["reference"] or "scikit-learn" in v["reference"]) and "(" in v["reference"], v


def test_family_ids_differ_where_the_conventions_do():
    x, y = CASES["A"]
    resi, ours = (float(sim.get(f"measure/{r}/rsm_norm_difference")(x, y)) for r in ("resi", "stir"))
    assert abs(resi - 308.0782174) < 1e-6 and abs(ours - 341.095619) < 1e-6  # spectral vs Frobenius
    platonic, ours = (float(sim.get(f"measure/{r}/lcs_knn-topk=10")(x, y)) for r in ("platonic", "stir"))
    assert abs(platonic - 10 * ours) < 1e-12
