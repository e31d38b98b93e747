"""MkDocs hook: ``<!-- presets-table -->`` becomes the table of every preset, read from
``configs/evaluate/experiment/*.yaml`` (name, kind, what it measures, its compute) when the site is
built, so the page lists exactly the presets that exist."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
PRESETS = REPO / "configs" / "evaluate" / "experiment"
PROFILES = REPO / "configs" / "evaluate" / "experiment_profile"
MARKER = "<!-- presets-table -->"


def table() -> str:
    lines = ["| preset | kind | what it measures | compute (full; profile=cpu) |", "|---|---|---|---|"]
    for path in sorted(PRESETS.glob("*.yaml")):
        experiment = (yaml.safe_load(path.read_text()) or {}).get("experiment") or {}
        cpu = " (own cpu variant)" if (PROFILES / f"{path.stem}_cpu.yaml").is_file() else ""
        cells = [f"`{path.stem}`", str(experiment.get("kind", "")), str(experiment.get("description", "")),
                 str(experiment.get("compute", "")) + cpu]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown: str, page: Any = None, config: Any = None, files: Any = None) -> str:
    return markdown.replace(MARKER, table()) if MARKER in markdown else markdown
