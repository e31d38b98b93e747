"""The notes of a report that opens in plain words (``Report.opening``): deduplicated and grouped.

A report's notes come from several places (the estimator, each model, the results store, the example
figure), one line per source and per model: a pair of shipped models gave nine block quotes before
the first table. Here they become at most ``GROUPS`` lines, one per kind of note, each its notes
joined, with the notes that differ only in the model they name merged into one:

    estimator   how the values were measured (inversion, intervals, STIR at IRIs, calibration)
    models      where the models come from (shipped weights, unfinished or barely trained runs)
    data        where the results and the figures come from (the results store, example IRIs)

Pure functions of strings: what a note says is its source's business, not this module's.
"""
from __future__ import annotations

import re
from typing import Dict, List, Tuple

# (group, its name in the README, the note sources it takes: the words a note starts with)
GROUPS: Tuple[Tuple[str, str, Tuple[str, ...]], ...] = (
    ("estimator", "How it was measured", ("inversion", "intervals", "at_iris", "calibration", "estimator", "measure",
                                           "difficulty", "STIR")),
    ("models", "The models", ("model ", "FakeReLU")),
    ("data", "Data and stored results", ("results", "example IRIs", "data", "images", "store")),
)
OTHER = ("other", "Also")

_SHIPPED = re.compile(r"^model (?P<name>\S+): the shipped (?P<file>\S+) \(sha256 (?P<sha>\w+)\.\.\.; "
                      r"no finished run folder of its recipe here\)$")
_NOT_SHOWN = re.compile(r"^example IRIs: (?P<name>\".*?\"|'.*?') not shown: (?P<why>.*)$")


def group(notes: List[str]) -> List[Tuple[str, List[str]]]:
    """[(the group's name in words, its notes in order)] for the groups that have notes; each note
    once, and the notes that ``merge`` joins joined."""
    by_group: Dict[str, List[str]] = {}
    for note in dict.fromkeys(notes):  # each note once, in order
        by_group.setdefault(_group_of(note), []).append(note)
    names = {key: words for key, words, _ in GROUPS}
    names[OTHER[0]] = OTHER[1]
    order = [key for key, _, _ in GROUPS] + [OTHER[0]]
    return [(names[key], merge(by_group[key])) for key in order if key in by_group]


def _group_of(note: str) -> str:
    for key, _, sources in GROUPS:
        if note.startswith(sources):
            return key
    return OTHER[0]


def merge(notes: List[str]) -> List[str]:
    """``notes`` with the shipped-model notes joined into one ("vanilla and vanilla_s1: the shipped
    weights ...") and the example-IRI notes that give one reason joined into one; the rest as given."""
    out: List[str] = []
    shipped = [m for m in map(_SHIPPED.match, notes) if m]
    not_shown: Dict[str, List[str]] = {}
    for note in notes:
        m = _NOT_SHOWN.match(note)
        if m:
            not_shown.setdefault(m["why"], []).append(m["name"])
    for note in notes:
        if _SHIPPED.match(note):
            if note == shipped[0].string:
                files = ", ".join(f"{m['name']} {m['file']} (sha256 {m['sha']}...)" for m in shipped)
                out.append(f"shipped weights, no finished run folder of their recipe here: {files}")
            continue
        m = _NOT_SHOWN.match(note)
        if m:
            names = not_shown[m["why"]]
            if m["name"] == names[0]:
                out.append(f"example IRIs: {_words(names)} not shown: {m['why']}")
            continue
        out.append(note)
    return out


def _words(names: List[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def markdown(notes: List[str]) -> List[str]:
    """The grouped notes as Markdown list items, one per group: ``- **The models.** note; note``."""
    return [f"- **{name}.** " + "; ".join(items) for name, items in group(notes)]
