"""docs/measures.md lists every registered measure with the flags the registry has."""

from pathlib import Path

import stir.similarity as sim

DOC = Path(__file__).resolve().parents[2] / "docs" / "measures.md"


def test_table_lists_every_measure_with_its_flags():
    text = DOC.read_text()
    table = text.split("<!-- measures table: begin -->")[1].split("<!-- measures table: end -->")[0]
    rows = {}
    for line in table.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].split("`")[1]] = cells
    assert sorted(rows) == sim.names()  # regenerate with: python bench/measures_doc.py
    for name, cells in rows.items():
        e = sim.info(name)
        assert cells[1] == e.family and cells[2] == e.kind, name
        assert cells[5] == ("yes" if e.symmetric else "no") and cells[6] == ("yes" if e.metric else "no"), name
        assert cells[8] == e.reference, name
