"""What every experiment returns: a ``Report`` (tables, figures, headline numbers) and row helpers."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from stir.evaluation.results import PairResult, Stat
from stir.reporting import mean_std

Rows = List[Dict[str, Any]]


@dataclass
class Report:
    """A finished experiment, ready for ``stir.evaluation.publish``."""

    title: str
    tables: Dict[str, Tuple[Rows, Optional[List[str]]]] = field(default_factory=dict)  # name -> (rows, columns)
    display: Dict[str, Rows] = field(default_factory=dict)  # name -> formatted rows (terminal, Markdown)
    figures: Dict[str, Path] = field(default_factory=dict)
    summary: Dict[str, float] = field(default_factory=dict)


def ms(stat: Optional[Stat]) -> str:
    """'mean ± std' of a stat, '-' when it was not computed."""
    return mean_std(stat.mean, stat.std) if stat is not None else "-"


def mean(stat: Optional[Stat]) -> float:
    """A stat's mean; NaN when it was not computed (another IRI kind or direction)."""
    return stat.mean if stat is not None else math.nan


def std(stat: Optional[Stat]) -> float:
    return stat.std if stat is not None else math.nan


def pair_display(result: PairResult) -> Dict[str, Any]:
    """One readable row: the paper's table 1 columns, both directions, mean ± std over k draws."""
    return {
        "m1 (ref)": result.ref, "m2 (target)": result.target,
        "taps": result.tap_ref if result.tap_ref == result.tap_target else f"{result.tap_ref} / {result.tap_target}",
        "STIR(m2|m1)": ms(result.stir_m2_given_m1), "STIR(m1|m2)": ms(result.stir_m1_given_m2),
        "STIR_adv(m2|m1)": ms(result.stir_adv_m2_given_m1), "STIR_adv(m1|m2)": ms(result.stir_adv_m1_given_m2),
        result.measure: f"{result.similarity:.3f}",
        "agree on m1 IRIs": ms(result.agreement_on_m1_iris), "agree on m2 IRIs": ms(result.agreement_on_m2_iris),
        "difficulty(m2|m1)": ms(result.difficulty_m2_given_m1), "difficulty(m1|m2)": ms(result.difficulty_m1_given_m2),
        "notes": "; ".join(result.notes),
    }
