"""The registry reproduces fixtures/registry_flags.json for every measure the fixture knows: each
entry's flags, options and function, its membership in names() of each kind and the measure each
similarity-repository id resolves to.

The flags are declared at each measure's definition (stir/similarity/spec.py); this fixture was
dumped from the central table they replaced, so any drift in a declaration fails here. It holds the
known members, not the exact set: a new measure (one more module) passes without regenerating it,
while a known measure that is lost, renamed or changes a flag fails. A deliberate change of a flag
updates the fixture with it:

    PYTHONPATH=. python tests/similarity/test_similarity_registry_flags.py > tests/similarity/fixtures/registry_flags.json
"""

import json
import math
import sys
from pathlib import Path

import pytest

from stir.similarity import registry, spec

FIXTURE = Path(__file__).parent / "fixtures" / "registry_flags.json"


def _num(v):
    if v is None:
        return None
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(v)  # repr keeps 0 and 0.0 apart


def dump() -> dict:
    """Everything the registry says about its measures, as plain JSON data."""
    out = {"entries": [], "names": registry.names(), "names_id": registry.names(kind="id")}
    for name in registry.names():
        e = registry.info(name)
        out["entries"].append({
            "name": e.name, "family": e.family, "symmetric": e.symmetric, "distance": e.distance,
            "range": [_num(e.range[0]), _num(e.range[1])], "identity": _num(e.identity),
            "invariances": sorted(e.invariances), "reference": e.reference, "metric": e.metric,
            "min_n": e.min_n, "options": repr(dict(e.options)), "judging_default": e.judging_default,
            "assignment": e.assignment, "fn": f"{e.fn.__module__}.{e.fn.__qualname__}",
        })
    out["resolved_ids"] = {
        i: [registry.resolve(i)[0].name, repr(registry.resolve(i)[1])] for i in registry.names(kind="id")
    }
    for kind in registry.KINDS[:-1]:
        out["names_" + kind] = registry.names(kind)
    out["invariances_constant"] = list(registry.INVARIANCES)
    out["public"] = sorted(registry.__all__)
    return out


@pytest.fixture(scope="module")
def expected() -> dict:
    return json.loads(FIXTURE.read_text())


def test_the_registry_reproduces_the_fixture(expected):
    got = dump()
    assert got.keys() == expected.keys()
    known = set(expected["names"])
    assert known <= set(got["names"]), sorted(known - set(got["names"]))  # no known measure lost
    by_name = {e["name"]: e for e in got["entries"]}
    for x in expected["entries"]:
        assert by_name[x["name"]] == x, x["name"]  # every known measure keeps its flags
    for key in expected:
        if key == "resolved_ids":
            assert {i: got[key][i] for i in expected[key]} == expected[key]
        elif key.startswith("names_") and key != "names_id":
            # a known measure is in each list exactly where it was; new measures are anywhere
            assert [n for n in got[key] if n in known] == expected[key], key
        elif key == "names_id":
            assert set(expected[key]) <= set(got[key])
        elif key not in ("entries", "names"):
            assert got[key] == expected[key], key


def test_a_new_measure_stays_out_of_the_judging_defaults_unless_it_opts_in():
    """judging_default is declared at the definition, False unless the measure says True (issue 56)."""
    import inspect

    assert inspect.signature(spec.declare).parameters["judging_default"].default is False
    assert spec.MeasureInfo("_x", lambda x, y: x, "x", True, False, (0, 1), 1.0, frozenset(), "none").judging_default is False
    assert {"linear_cka", "cka_angular", "rsa", "procrustes"} <= set(registry.names("judging"))
    assert "aligned_cosine" not in registry.names("judging")


def test_every_declared_measure_is_registered_once():
    declared = [e.name for e in spec.declared()]
    assert len(declared) == len(set(declared))
    assert sorted(declared) == registry.names()
    assert all(registry.info(n) is e for n, e in zip(declared, spec.declared()))


def test_a_declaration_is_checked():
    with pytest.raises(ValueError, match="unknown invariance"):
        spec.declare("_bad", lambda x, y: x, family="x", symmetric=True, distance=False, range=(0, 1),
                     identity=1.0, invariances={"rotation"}, reference="none")
    with pytest.raises(ValueError, match="already declared"):
        spec.declare("linear_cka", lambda x, y: x, family="cka", symmetric=True, distance=False, range=(0, 1),
                     identity=1.0, invariances=spec.RIGID, reference="none")
    assert "_bad" not in [e.name for e in spec.declared()]


if __name__ == "__main__":
    json.dump(dump(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
