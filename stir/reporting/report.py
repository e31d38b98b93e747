"""What an experiment hands to reporting: tables, figures as data, headline numbers, notes.

Measuring code returns a ``Report``; ``stir.reporting.publish`` renders it (CSV, Markdown, PNG,
README, record, W&B). Nothing here is a file yet: a ``Figure`` is the plot function that draws it
and its data, called with a path only when published.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

Row = Dict[str, Any]


@dataclass
class Table:
    """One table: numeric ``rows`` (CSV, W&B), optional readable ``display`` rows (terminal,
    Markdown) and, per display row, its notes (shown as [i] markers with the notes below)."""

    rows: List[Row]
    columns: Optional[List[str]] = None  # CSV column order (None: first-seen order of the row keys)
    display: Optional[List[Row]] = None
    notes: Optional[List[List[str]]] = None  # notes[i]: the notes of display row i

    @property
    def shown(self) -> List[Row]:
        return self.display if self.display is not None else self.rows


@dataclass
class Figure:
    """A figure as data: ``draw(**args, path=PATH)`` renders it (a ``stir.reporting.plots`` function)."""

    draw: Callable[..., Path]
    args: Dict[str, Any]

    def render(self, path: Path) -> Path:
        return self.draw(**self.args, path=path)


@dataclass
class Report:
    """A finished experiment: what ``publish`` writes."""

    title: str
    tables: Dict[str, Table] = field(default_factory=dict)
    figures: Dict[str, Figure] = field(default_factory=dict)  # file-name stem -> figure
    summary: Dict[str, float] = field(default_factory=dict)  # stable keys (W&B summary, record.json)
    notes: List[str] = field(default_factory=list)  # said once, above the tables (e.g. which estimator)


def slug(name: str) -> str:
    """A name fit for a file name: path separators, colons and other characters outside
    [A-Za-z0-9._-] become "-" (``convergence_vanilla-n5000/seed0_vs_r20`` ->
    ``convergence_vanilla-n5000-seed0_vs_r20``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "unnamed"
