"""What an experiment hands to reporting: tables, figures as data, headline numbers, notes.

Measuring code returns a ``Report``; ``stir.reporting.publish`` renders it (CSV, Markdown, PNG,
README, record, W&B). A table's ``headline`` (its few main columns) is what README.md opens with. Nothing here is a file yet: a ``Figure`` is the plot function that draws it
and its data, called with a path only when published.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional

Row = Dict[str, Any]


@dataclass
class Table:
    """One table: numeric ``rows`` (CSV, W&B), optional readable ``display`` rows (terminal,
    Markdown) and, per display row, its notes (shown as [i] markers with the notes below).

    A wide table can carry a ``headline``: a short readable table of its few main columns (its own
    ``rows`` and ``notes``), which the report's README.md shows first; every column stays in the
    table's own files (``<name>.md``, ``<name>.csv``) and in W&B."""

    rows: List[Row]
    columns: Optional[List[str]] = None  # CSV column order (None: first-seen order of the row keys)
    display: Optional[List[Row]] = None
    notes: Optional[List[List[str]]] = None  # notes[i]: the notes of display row i
    headline: Optional["Table"] = None  # the few main columns, shown first in README.md
    title: Optional[str] = None  # the README's heading of the table in words (None: its file name)
    after: List[str] = field(default_factory=list)  # sentences under the table (README and terminal): a disagreement ...
    legend: str = ""  # what the columns mean, under the table in README.md

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
    models: List[Row] = field(default_factory=list)  # what each model is (stir.reporting.models), in record.json
    # Paragraphs README.md opens with, in plain words: what was measured and how to read it (a pair's:
    # stir.experiments.pair_reading). A report with an opening shows its notes grouped and deduplicated
    # (stir.reporting.reading) and its tables under their titles; one without (the paper's) as before.
    opening: List[str] = field(default_factory=list)
    # A report whose first table is what a reader came for and whose notes are long (the paper's: its
    # scorecard under some 2,400 words of notes): the notes go below that first table, under "## notes",
    # and one line above the tables says where they are.
    notes_below_first_table: bool = False


SLUG_LIMIT = 120  # characters of a file or folder name made from labels; a name may have 255 bytes


def slug(name: str) -> str:
    """A name fit for a file name: path separators, colons and other characters that are neither
    letters nor digits (of any script) nor ``._-`` become "-" (``convergence_vanilla-n5000/seed0_vs_r20``
    -> ``convergence_vanilla-n5000-seed0_vs_r20``; ``模型_a`` stays ``模型_a``: a label in another
    script never collapses to "-"). A result longer than ``SLUG_LIMIT`` bytes (UTF-8) keeps its
    start and ends in 8 hex digits of the whole name, so that labels made of long folder names never
    reach the file system's limit (Errno 36) and two long names stay two names."""
    text = re.sub(r"[^\w.-]+", "-", name).strip("-") or "unnamed"
    if len(text.encode()) <= SLUG_LIMIT:
        return text
    head = text.encode()[:SLUG_LIMIT - 9].decode(errors="ignore")  # never half a character
    return f"{head.rstrip('-.')}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def unique_slugs(names: Iterable[str]) -> Dict[str, str]:
    """{name: file-name stem} with no two names on one stem: a name whose ``slug`` another name
    shares (``m+1/seed0`` and ``m-1/seed0`` both give ``m-1-seed0``) gets 6 hex digits of itself
    appended, so neither file overwrites the other."""
    names = list(dict.fromkeys(names))
    stems: Dict[str, List[str]] = {}
    for name in names:
        stems.setdefault(slug(name), []).append(name)
    return {name: slug(name) if len(stems[slug(name)]) == 1
            else f"{slug(name)}-{hashlib.sha256(name.encode()).hexdigest()[:6]}" for name in names}
