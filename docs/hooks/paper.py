"""MkDocs hook: ``<!-- paper-report -->`` in docs/paper.md becomes the committed report of
``experiment=paper`` (``docs/paper_report/``: the report folder as evaluate.py wrote it, its
``record.json`` and figures), so the page cannot show other numbers than the stored results.

    python docs/hooks/paper.py --copy RESULTS/paper@laptop   # commit a finished report: copy it into docs/paper_report/
                                                      # and write its scorecard into docs/paper.md
    python docs/hooks/paper.py --scorecard            # only write the scorecard into docs/paper.md
    python docs/hooks/paper.py                        # print the block the page would get

Without a committed report the page says the command and that it has not been run.

The scorecard between ``<!-- paper-scorecard -->`` and ``<!-- /paper-scorecard -->`` is committed text in
docs/paper.md, so GitHub shows it too (issue 66); the build replaces it by the one the report gives
(tests/paper/test_report_page.py fails when the committed copy is stale). It is the compact one
(issue 69): claim, the paper, ours, verdict and a clipped why fit at 1280 px; every other column is
one click away in a ``<details>`` under it.
"""
from __future__ import annotations

import csv
import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "docs" / "paper_report"
MARKER = "<!-- paper-report -->"
SCORECARD = "<!-- paper-scorecard -->"  # the report's first table, above the page's appendix
SCORECARD_END = "<!-- /paper-scorecard -->"  # the committed scorecard (GitHub shows it) lies between the two
PAGE = REPO / "docs" / "paper.md"
COMMAND = "python evaluate.py experiment=paper profile=laptop data.source=PATH"
KEPT = (".md", ".csv", ".png", ".json")


def committed_at(folder: Path) -> str:
    try:
        out = subprocess.run(["git", "log", "-1", "--format=%h %cs", "--", str(folder)], cwd=REPO, capture_output=True,
                             text=True, timeout=30, check=True).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return "not in a git checkout"
    return f"commit `{out[0]}` ({out[1]})" if len(out) == 2 else "not committed yet"


def settings(record: dict) -> str:
    """The budget the report ran at, read from its record."""
    config = record.get("config", {})
    zoo, inversion = config.get("zoo", {}), config.get("inversion", {})
    text = (f"zoo profile `{zoo.get('profile')}`, n = {config.get('n')} images, k = {config.get('k')} draws, "
            f"{inversion.get('steps')} {inversion.get('mode', '')} inversion steps, S_r = {config.get('measure')}")
    experiment = config.get("experiment", {})
    if experiment.get("skip"):  # a report of some parts only: say so where the page begins
        text += (f"; **parts left out of this report**: {', '.join(experiment['skip'])} (their claims read "
                 "\"not measured in this report\")")
    if experiment.get("stored_only"):
        text += ("; **measured nothing**: the report of what the results store and the shipped results (`zoo/store`) "
                 "held (`experiment.stored_only=true`; what was not stored yet is named in the notes and claims)")
    recipes = experiment.get("recipes") or {}
    if recipes:
        text += "; training seeds per recipe: " + "; ".join(f"{k} {', '.join(v)}" for k, v in recipes.items())
    return text


def block() -> str:
    readme = REPORT / "README.md"
    if not readme.is_file():
        return (f"Not run yet: no committed report in `docs/paper_report/`. Run\n\n```bash\n{COMMAND}\n```\n\n"
                "then `python docs/hooks/paper.py --copy results/paper@laptop` (the link profile=laptop writes) and "
                "commit `docs/paper_report/`.\n")
    record = json.loads((REPORT / "record.json").read_text()) if (REPORT / "record.json").is_file() else {}
    text = readme.read_text()
    text = re.sub(r"^file: .*$\n?", "", text, flags=re.M)  # the report's own file links
    text = re.sub(r"^(\d+) rows: .*$", lambda m: f"{m.group(1)} rows (in `docs/paper_report/`)", text, flags=re.M)
    text = re.sub(r"!\[([^\]]*)\]\(([^)/]+\.png)\)", r"![\1](paper_report/\2)", text)
    # links to the report's own tables and figures live beside it in docs/paper_report/
    text = _links(text)
    text = _headings(text)
    text, models = _models_last(text)
    text = _markers(text)
    text = re.sub(r"^(#+) ", lambda m: "#" * min(6, len(m.group(1)) + 1) + " ", text, flags=re.M)
    stored = record.get("config", {}).get("experiment", {}).get("stored_only")
    command = (f"`{COMMAND} experiment.stored_only=true` (this page, from the shipped results); `{COMMAND}` "
               "measures what is missing") if stored else f"`{COMMAND}`"
    head = [f"The report in `docs/paper_report/`, {committed_at(REPORT)}; {settings(record)}.",
            f"Command: {command}.", ""]
    return "\n".join(head) + "\n" + _without_scorecard(text) + models


def _markers(text: str) -> str:
    """Note markers of the tables ("[1] [2]") as text, not reference-style links."""
    return re.sub(r"\[(\d+)\]", r"\\[\1\\]", text)


def _links(text: str) -> str:
    """Links to the report's own tables point at their .csv in paper_report/ (the site leaves
    paper_report/*.md out; docs/hooks/links.py fails the build on a link to a page it does not build)."""
    text = re.sub(r"(?<!!)\[`([^`\]]+)\.md`\]\(([^)/:]+)\.md\)", r"[`\1.csv`](paper_report/\2.csv)", text)
    return re.sub(r"(?<!!)\[(`[^`\]]+`)\]\(([^)/:]+\.(?:csv|json))\)", r"[\1](paper_report/\2)", text)


# The report's table keys (`part-table` or `table`) as the page's headings: a key such as
# `graded_0-matrix_stir_normalised` in the table of contents tells a newcomer nothing (issue 69).
PARTS = {"seeds": "Seed pairs", "seeds_original": "Seed pairs, the original STIR_adv objective",
         "relative_robustness": "Relative robustness", "incremental": "Growing training sets",
         "layers": "Layer by layer", "architectures": "Architectures", "at_methods": "AT, TRADES and MART",
         "recipe_ablation": "Recipe ablation"}
PART_TABLES = {"pairs": "STIR per model pair", "directions": "STIR in both directions",
               "incremental": "STIR along each chain", "convergence": "convergence of the inversion",
               "matrix_stir": "STIR matrix", "matrix_stir_normalised": "normalised STIR matrix",
               "matrix_stir_adv": "STIR_adv matrix", "matrix_linear_cka": "linear CKA matrix", "accuracy": "accuracy"}
TABLES = {"claim_sections": "Each claim's quote, rule and verdict", "table1": "Table 1", "table1_at_iris": "Table 1 at IRIs",
          "table1_at_iris_verdicts": "Claims judged again at IRIs", "table1_recipes": "Table 1 per recipe, over seed pairs",
          "table2": "Table 2", "table2_graded": "Table 2 on the graded family", "figure1": "Figure 1",
          "figures2_3_6_7": "Figures 2, 3, 6 and 7", "figures4_8": "Figures 4 and 8", "figures5_9": "Figures 5 and 9",
          "recipe_ablation": "Recipe ablation", "missing_models": "Models not trained or shipped"}
# a part's supporting tables: headings on the page, kept out of its table of contents (34 of them would bury the rest)
SUPPORTING = {"convergence", "matrix_stir", "matrix_stir_normalised", "matrix_stir_adv", "matrix_linear_cka", "accuracy"}


def title(key: str) -> str:
    """A report table key in words: `seeds-pairs` -> "Seed pairs: STIR per model pair"; a key this
    list does not know reads `a_b-c` -> "a b, c" (a one-word key such as `claims` stays as it is)."""
    part, _, table = key.rpartition("-")
    graded = re.fullmatch(r"graded_(\d+)", part)
    if part and (part in PARTS or graded) and table in PART_TABLES:
        return f"{PARTS[part] if part in PARTS else f'Graded robustness, seed position {graded.group(1)}'}: {PART_TABLES[table]}"
    return TABLES.get(key, key.replace("-", ", ").replace("_", " "))


def _headings(text: str) -> str:
    """The report's title becomes a bold line (the page's "Appendix B" heads it), its table keys words;
    a part's supporting tables get an HTML heading, which the table of contents does not list."""
    text = re.sub(r"\A# (.*)$", r"**\1**", text, flags=re.M)

    def heading(m):
        key = m.group(1)
        if key.rpartition("-")[2] in SUPPORTING and "-" in key:
            return f'<h4 id="{html.escape(key)}">{html.escape(title(key))}</h4>'
        return f"## {title(key)}"

    return re.sub(r"^## ([a-z0-9_-]+)$", heading, text, flags=re.M)


def _models_last(text: str):
    """(the report without its model provenance notes, those notes as a 'Models' section for the end)."""
    lines = text.split("\n")
    kept, models = [], []
    for i, line in enumerate(lines):
        if line.startswith("> model "):
            models.append("- " + line[2:])
        elif not (line == "" and i > 0 and lines[i - 1].startswith("> model ")):
            kept.append(line)
    return "\n".join(kept), ("\n### Models\n\n" + "\n".join(models) + "\n" if models else "")


def _section(text: str, name: str) -> str:
    """The README section '## name' (its table and notes), '' when there is none."""
    m = re.search(rf"^##+ {re.escape(name)}\n(.*?)(?=^##+ |\Z)", text, flags=re.M | re.S)
    return m.group(1).strip() if m else ""


def _without_scorecard(text: str) -> str:
    return re.sub(r"^##+ scorecard\n.*?(?=^##+ |\Z)", "", text, flags=re.M | re.S)


def scorecard() -> str:
    """The committed report's scorecard for the top of the page: the verdicts counted in a sentence,
    the compact table (claim, the paper, ours, verdict, a clipped why) and every other column of
    each claim in a ``<details>`` under it."""
    readme = REPORT / "README.md"
    if not readme.is_file():
        return f"No committed report in `docs/paper_report/` yet: `{COMMAND}`.\n"
    text = readme.read_text()
    if not (REPORT / "scorecard.csv").is_file():  # a report from before the scorecard file: its own table
        body = _links(re.sub(r"^file: .*$", "", _section(text, "scorecard"), flags=re.M))
        return _markers(body).strip() + "\n"
    rows = _rows("scorecard.csv")
    statements = {r["claim"]: r.get("statement", "") for r in _rows("claims.csv")}
    out = []
    tally = re.search(r"(\d+) claims: (.+)$", text.split("\n", 1)[0])
    if tally:
        out += [f"The verdicts of the paper's {tally.group(1)} claims: {tally.group(2)}.", ""]
    # the div: docs/stylesheets/paper.css lets its cells break a long model pair (GitHub ignores the class)
    out += ['<div class="scorecard" markdown="1">', "",
            "| claim | the paper | ours [interval] | verdict | why |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        claim = f"**{r['claim']}** {statements.get(r['claim'], '')}".strip()
        out.append("| " + " | ".join(_cell(c) for c in (claim, clip(r["the paper"]), clip(r["ours [interval]"]),
                                                         r["verdict"], clip(r["why"]))) + " |")
    out += ["", "</div>", "", '<details markdown="1">', "<summary>Every claim in full: where in the paper, the whole "
            "why, the earlier verdict, the power and the rule</summary>", ""]
    for r in rows:
        out.append(f"- **Claim {r['claim']}** ({_cell(r['where'])}): *{_cell(r['verdict'])}*")
        for name in ("the paper", "ours [interval]"):
            if clip(r[name]) != r[name]:  # shown clipped in the table: whole here
                out.append(f"    - {name}: {_cell(r[name])}")
        for name in ("why", "earlier verdict", "power", "rule"):
            out.append(f"    - {name}: {_cell(r[name])}")
    out += ["", "</details>", "", "Every column at full length: [`scorecard.csv`](paper_report/scorecard.csv)."]
    return "\n".join(out) + "\n"


def _rows(name: str) -> list:
    path = REPORT / name
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def clip(text: str, words: int = 20) -> str:
    """``text`` cut to at most ``words`` words, never inside one nor inside brackets, at a clause's end
    (", " or "; ") in the second half where there is one, with an ellipsis."""
    parts = text.split()
    if len(parts) <= words:
        return text
    depth, closed, clause = 0, [], []  # where a cut leaves no bracket open; where it ends a clause too
    for i, word in enumerate(parts[:words]):
        depth += word.count("[") + word.count("(") - word.count("]") - word.count(")")
        if depth == 0:
            closed.append(i + 1)
            if i >= words // 2 and word[-1] in ",;":
                clause.append(i + 1)
    cut = (clause or [c for c in closed if c > words // 2] or [words])[-1]
    return " ".join(parts[:cut]).rstrip(",;") + " …"


def _cell(text: str) -> str:
    """Plain text as a markdown table cell (GitHub's and the site's): pipes, note markers and "<" (an
    HTML tag's start) escaped."""
    text = text.replace("<", "&lt;").replace("|", "\\|")
    return _markers(text)


def write_scorecard(page: Path = PAGE) -> None:
    """Put the scorecard between the markers of ``page`` (docs/paper.md): committed text GitHub shows."""
    text = page.read_text()
    if SCORECARD not in text or SCORECARD_END not in text:
        raise ValueError(f"{page} has no {SCORECARD} ... {SCORECARD_END} region to write the scorecard into")
    head, rest = text.split(SCORECARD, 1)
    page.write_text(f"{head}{SCORECARD}\n\n{scorecard()}\n{SCORECARD_END}{rest.split(SCORECARD_END, 1)[1]}")


def committed_scorecard(markdown: str) -> str:
    """The text between the scorecard's markers of ``markdown`` ('' when it has none)."""
    if SCORECARD not in markdown or SCORECARD_END not in markdown:
        return ""
    return markdown.split(SCORECARD, 1)[1].split(SCORECARD_END, 1)[0].strip("\n") + "\n"


def copy(folder: Path) -> None:
    """Replace docs/paper_report/ by the report folder ``folder`` (its tables, figures and record)."""
    folder = folder.resolve()
    if not (folder / "README.md").is_file():
        raise SystemExit(f"{folder} holds no report (README.md)")
    if REPORT.exists():
        shutil.rmtree(REPORT)
    REPORT.mkdir(parents=True)
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.suffix in KEPT:
            shutil.copy2(path, REPORT / path.name)


def on_page_markdown(markdown: str, page: Any = None, config: Any = None, files: Any = None) -> str:
    if SCORECARD in markdown:  # the committed copy (and its markers) gives way to the report's own
        head, rest = markdown.split(SCORECARD, 1)
        markdown = head + scorecard() + (rest.split(SCORECARD_END, 1)[1] if SCORECARD_END in rest else rest)
    return markdown.replace(MARKER, block()) if MARKER in markdown else markdown


def main(argv: list) -> None:
    if argv[:1] == ["--copy"]:
        copy(Path(argv[1]))
        write_scorecard()
    elif argv[:1] == ["--scorecard"]:
        write_scorecard()
    else:
        sys.stdout.write(block() + "\n")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except ValueError as e:  # one line, exit 2
        sys.stderr.write(f"{e}\n")
        sys.exit(2)
