"""One verdict per claim in every file (issue 66): the committed report's title and notes, claims.csv,
claims.md, docs/paper.md, docs/results.md and the README's results line read the one computed
scorecard (docs/paper_report/scorecard.csv). Before issue 66 they disagreed: the title said "8 hold",
a note "9 of 21 claims hold", claims.csv "does not hold" where the scorecard said "direction
reproduced", docs/paper.md "claim 4 stays contradicted" over a scorecard that said "not resolved"."""
import csv
import pathlib
import re

from stir.experiments.paper.scorecard import scorecard_line, verdict_counts
from stir.paper import rules

ROOT = pathlib.Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "paper_report"
DOCS = [ROOT / "docs" / "paper.md", ROOT / "docs" / "results.md", ROOT / "README.md", REPORT / "README.md"]
WORD = "|".join(re.escape(w) for w in sorted(rules.WORDS, key=len, reverse=True))
# "claim 4 stays contradicted", "Claim 3 reads "not resolved", "claim 11 holds", "claim 20 now reads ..."
SAYS = re.compile(rf"\b[Cc]laim (\d+)(?: \([^)]*\))? (?:stays|reads|now reads|is now|moves to|remains) \W?({WORD})")
HOLDS = re.compile(r"\b[Cc]laims? (\d+) holds\b")


def _card():
    with open(REPORT / "scorecard.csv") as f:
        rows = list(csv.DictReader(f))
    return rows, {int(r["claim"]): r["verdict"] for r in rows}


def _md_rows(path):
    """The rows of the first markdown table of ``path``, as {header: cell}."""
    lines = [x for x in path.read_text().splitlines() if x.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(head, [c.strip() for c in re.split(r"(?<!\\)\|", x.strip("|"))])) for x in lines[2:]]


def test_the_report_title_and_notes_count_the_scorecard():
    rows, _ = _card()
    line = scorecard_line(rows)
    readme = (REPORT / "README.md").read_text().splitlines()
    assert readme[0].endswith(": " + line), (readme[0], line)
    holds = verdict_counts(rows)[rules.HOLDS_W]
    for text in readme:
        for n, total in re.findall(r"\b(\d+) of (\d+) claims hold", text):
            assert (int(n), int(total)) == (holds, len(rows)), text


def test_claims_files_give_each_claim_the_scorecard_s_verdict():
    _, card = _card()
    with open(REPORT / "claims.csv") as f:
        claims = {int(r["claim"]): r["verdict"] for r in csv.DictReader(f)}
    assert claims == card
    assert {int(r["claim"]): r["verdict"] for r in _md_rows(REPORT / "claims.md")} == card


def test_the_docs_and_the_readme_say_what_the_scorecard_says():
    rows, card = _card()
    counts = verdict_counts(rows)
    wrong = []
    for path in DOCS:
        text = " ".join(path.read_text().split())  # sentences run over line breaks
        for number, word in SAYS.findall(text):
            if card.get(int(number)) != word:
                wrong.append(f"{path.name}: claim {number} said '{word}', scorecard '{card.get(int(number))}'")
        for number in HOLDS.findall(text):
            if card.get(int(number)) != rules.HOLDS_W:
                wrong.append(f"{path.name}: claim {number} said to hold, scorecard '{card.get(int(number))}'")
        for n, total in re.findall(r"\b(\d+) of (\d+) claims hold", text):
            if (int(n), int(total)) != (counts[rules.HOLDS_W], len(rows)):
                wrong.append(f"{path.name}: '{n} of {total} claims hold'")
    assert not wrong, "\n".join(wrong)
    readme = " ".join((ROOT / "README.md").read_text().split())
    tail = scorecard_line(rows).split(": ", 1)[1]
    assert f"The paper's {len(rows)} claims asked of the shipped zoo: {tail};" in readme, tail
