"""MkDocs hook: ``<!-- paper-report -->`` in docs/paper.md becomes the committed report of
``experiment=paper`` (``docs/paper_report/``: the report folder as evaluate.py wrote it, its
``record.json`` and figures), so the page cannot show other numbers than the stored results.

    python docs/hooks/paper.py --copy RESULTS/paper@laptop   # commit a finished report: copy it into docs/paper_report/
    python docs/hooks/paper.py                        # print the block the page would get

Without a committed report the page says the command and that it has not been run.
"""
from __future__ import annotations

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
    text, models = _models_last(text)
    # note markers in the tables ("[1] [2]"): text, not reference-style links
    text = re.sub(r"\[(\d+)\]", r"\\[\1\\]", text)
    text = re.sub(r"^(#+) ", lambda m: "#" * min(6, len(m.group(1)) + 1) + " ", text, flags=re.M)
    stored = record.get("config", {}).get("experiment", {}).get("stored_only")
    command = (f"`{COMMAND} experiment.stored_only=true` (this page, from the shipped results); `{COMMAND}` "
               "measures what is missing") if stored else f"`{COMMAND}`"
    head = [f"The report in `docs/paper_report/`, {committed_at(REPORT)}; {settings(record)}.",
            f"Command: {command}.", ""]
    return "\n".join(head) + "\n" + _without_scorecard(text) + models


def _links(text: str) -> str:
    """Links to the report's own tables point at their .csv in paper_report/ (the site leaves
    paper_report/*.md out; docs/hooks/links.py fails the build on a link to a page it does not build)."""
    text = re.sub(r"(?<!!)\[`([^`\]]+)\.md`\]\(([^)/:]+)\.md\)", r"[`\1.csv`](paper_report/\2.csv)", text)
    return re.sub(r"(?<!!)\[(`[^`\]]+`)\]\(([^)/:]+\.(?:csv|json))\)", r"[\1](paper_report/\2)", text)


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
    """The committed report's scorecard table (its first), for the top of the page."""
    readme = REPORT / "README.md"
    if not readme.is_file():
        return f"No committed report in `docs/paper_report/` yet: `{COMMAND}`."
    body = _section(readme.read_text(), "scorecard")
    body = _links(re.sub(r"^file: .*$", "", body, flags=re.M))
    return re.sub(r"\[(\d+)\]", r"\\[\1\\]", body).strip() + "\n"


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
    if SCORECARD in markdown:
        markdown = markdown.replace(SCORECARD, scorecard())
    return markdown.replace(MARKER, block()) if MARKER in markdown else markdown


if __name__ == "__main__":
    if sys.argv[1:2] == ["--copy"]:
        copy(Path(sys.argv[2]))
    else:
        print(block())
