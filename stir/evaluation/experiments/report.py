"""What every experiment returns: a ``Report`` (tables, figures, headline numbers) and row helpers."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from stir.evaluation.results import DirectionResult, PairResult, Stat
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
    notes: List[str] = field(default_factory=list)  # said once, above the tables (e.g. which estimator)


# How the two IRI kinds are labelled in convergence series and rows.
_KIND_LABEL = {"arbitrary": "STIR", "adversarial": "STIR_adv"}


def convergence_rows(result: Union[PairResult, DirectionResult]) -> Rows:
    """One row per (direction, IRI kind, recorded step): STIR there, its std, residual, IRIs.

    A ``DirectionResult`` is the direction "m2|m1" of its (ref, target)."""
    by_direction = result.convergence if isinstance(result, PairResult) else {"m2|m1": result.convergence}
    rows = []
    for direction, kinds in by_direction.items():
        for kind, record in kinds.items():
            for i, step in enumerate(record["steps"]):
                rows.append({
                    "m1 (ref)": result.ref, "m2 (target)": result.target, "tap_ref": result.tap_ref,
                    "tap_target": result.tap_target, "direction": direction, "iri": kind, "step": int(step),
                    "stir": record["stir"][i], "stir_std": record["stir_std"][i],
                    "median_residual": record["median_residual"][i], "fraction_iri": record["fraction_iri"][i],
                })
    return rows


def convergence_series(result: PairResult) -> Dict[str, Dict[str, List[float]]]:
    """{"steps" | "stir" | "stir_std" | "residual": {series name: values}} for ``plot_convergence``."""
    out: Dict[str, Dict[str, List[float]]] = {"steps": {}, "stir": {}, "stir_std": {}, "residual": {}}
    names = {"m2|m1": (result.target, result.ref), "m1|m2": (result.ref, result.target)}
    for direction, kinds in result.convergence.items():
        tgt, ref = names[direction]
        for kind, record in kinds.items():
            name = f"{_KIND_LABEL[kind]}({tgt}|{ref})"
            out["steps"][name] = record["steps"]
            out["stir"][name] = record["stir"]
            out["stir_std"][name] = record["stir_std"]
            out["residual"][name] = record["median_residual"]
    return out


def estimator_notes(inversion: Any) -> List[str]:
    """What the report must say about the estimator when it is not the published one."""
    notes = []
    if inversion.mode == "fast":
        notes.append("inversion.mode=fast: a different estimator from the published STIR procedure; its values "
                     "differ from faithful mode on the same models and images (README, 'Fast vs faithful')")
    elif inversion.num_steps != 1000:
        notes.append(f"inversion: {inversion.num_steps} faithful steps, not the published 1000 (see the "
                     "convergence table for how far the value had settled)")
    if inversion.use_fake_relu != (inversion.mode == "faithful"):
        notes.append(f"inversion.fake_relu={inversion.use_fake_relu}: not the published setting")
    return notes

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
        "controversial(m2|m1)": ms(result.difficulty_fraction_m2_given_m1),
        "controversial(m1|m2)": ms(result.difficulty_fraction_m1_given_m2),
        "notes": "; ".join(result.notes),
    }
