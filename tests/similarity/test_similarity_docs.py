"""docs/measures.md lists every registered measure with the flags the registry has.

The table is built with the site by docs/hooks/registries.py, which reads the declarations from the
source (the documentation's environment has no torch); this test checks that reading against the
registry, measure by measure, so the page cannot drift from the code.
"""

import importlib.util
from pathlib import Path

import pytest

import stir.similarity as sim

REPO = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("registries_hook", REPO / "docs" / "hooks" / "registries.py")
HOOK = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(HOOK)
READ = {e["name"]: e for e in HOOK.measures()}


def test_the_page_has_the_table_marker_and_the_hook_lists_every_measure():
    assert HOOK.MARKERS["measures"] in (REPO / "docs" / "measures.md").read_text()
    assert sorted(READ) == sim.names()
    table = HOOK.on_page_markdown(HOOK.MARKERS["measures"])
    assert [line.split("`")[1] for line in table.strip().splitlines()[2:]] == sim.names()


@pytest.mark.parametrize("name", sim.names())
def test_the_hook_reads_each_measure_s_flags_as_the_registry_has_them(name):
    e, read = sim.info(name), READ[name]
    assert read["family"] == e.family and read["distance"] == e.distance and read["symmetric"] == e.symmetric
    assert tuple(read["range"]) == e.range and read.get("identity") == e.identity
    assert frozenset(read["invariances"]) == e.invariances and read["reference"] == e.reference
    assert read.get("metric", False) == e.metric and read.get("judging_default", False) == e.judging_default
    assert dict(read.get("options") or {}) == dict(e.options)
