"""The benchmark pages' figures, read from ``bench/results/`` when the documentation is built.

A MkDocs hook (``hooks:`` in mkdocs.yml). A page line ``<!-- bench-results: NAME -->`` becomes:
where the figures come from (the files ``bench/results/NAME.*``), the commit and date they were
committed at (git; "not in a git checkout" otherwise), the command that measured them (the JSON's
``command``, when it has one), then the figures themselves: ``NAME.md`` as it is (headings moved
under the page's), else the JSON rendered as tables (its lists of rows as tables, its scalars as
one). So a page cannot show other numbers than the committed result files hold.

    python bench/results_doc.py NAME     # the block a page would get, printed
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
MARKER = re.compile(r"^<!-- bench-results: (?P<name>[\w.-]+) -->$", re.M)
MAX_ROWS = 60


def measured_at(paths: List[Path]) -> str:
    """'commit abc1234 (2026-12-01)' of the latest commit that changed any of ``paths``."""
    try:
        out = subprocess.run(["git", "log", "-1", "--format=%h %cs", "--", *[str(p) for p in paths]], cwd=REPO,
                             capture_output=True, text=True, timeout=30, check=True).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return "not in a git checkout"
    return f"commit `{out[0]}` ({out[1]})" if len(out) == 2 else "not committed yet"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_cell(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_cell(v)}" for k, v in value.items())
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(rows: List[Dict[str, Any]]) -> List[str]:
    columns: List[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |" for row in rows[:MAX_ROWS]]
    if len(rows) > MAX_ROWS:
        lines.append(f"\n({len(rows) - MAX_ROWS} more rows in the file)")
    return lines


def render_json(data: Dict[str, Any]) -> List[str]:
    """The JSON of a benchmark as Markdown: scalars in one table, then each list of rows and each dict."""
    scalars = {k: v for k, v in data.items() if not isinstance(v, (list, dict)) and k != "command"}
    lines: List[str] = []
    if scalars:
        lines += _table([scalars]) + [""]
    for key, value in data.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines += [f"**{key}**", ""] + _table(value) + [""]
        elif isinstance(value, dict) and value:
            if all(isinstance(v, dict) for v in value.values()):
                lines += [f"**{key}**", ""] + _table([{"": k, **v} for k, v in value.items()]) + [""]
            else:
                lines += [f"**{key}**", ""] + _table([value]) + [""]
        elif isinstance(value, list) and value:
            lines += [f"**{key}**: {_cell(value)}", ""]
    return lines


def block(name: str) -> str:
    """The Markdown that replaces ``<!-- bench-results: NAME -->``."""
    files = sorted(p for p in RESULTS.glob(f"{name}.*") if p.suffix in (".md", ".json"))
    if not files:
        raise FileNotFoundError(f"no bench/results/{name}.md or .json: the page names results that are not committed")
    data = json.loads((RESULTS / f"{name}.json").read_text()) if (RESULTS / f"{name}.json").is_file() else {}
    head = [f"Figures from {', '.join(f'`bench/results/{p.name}`' for p in files)}, {measured_at(files)}."]
    if data.get("command"):
        command = re.sub(r"^python ", "", data["command"])  # some scripts record it with "python ", some without
        head.append(f"Command: `python {command}`.")
    lines = [" ".join(head), ""]
    md = RESULTS / f"{name}.md"
    if md.is_file():
        text = md.read_text()
        lines.append(re.sub(r"^(#+) ", lambda m: "#" * min(6, len(m.group(1)) + 2) + " ", text, flags=re.M))
    else:
        lines += render_json(data)
    return "\n".join(lines).rstrip() + "\n"


def on_page_markdown(markdown: str, page: Any = None, config: Any = None, files: Any = None) -> str:
    """MkDocs hook: every marker of a page replaced by its block."""
    return MARKER.sub(lambda m: block(m.group("name")), markdown)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(block(arg))
