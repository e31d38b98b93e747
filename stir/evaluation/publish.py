"""Write a finished report: terminal tables, CSV + Markdown files, PNG figures, a W&B run.

The W&B run (``job_type="evaluate"``) carries the report's tables as ``wandb.Table``, its figures
as images, the models compared (their recipes and the model artifacts train.py logged) in the
config, and stable summary keys (``summary_keys``): the same names whatever the models are called
or where their files lie, so a dashboard can plot them across runs.
"""
from __future__ import annotations

import logging
import math
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from stir import atomic
from stir.config.schema import LoggerConfig
from stir.evaluation.experiments import Report
from stir.provenance import library_versions
from stir.reporting import format_table, log_report, write_csv, write_markdown

log = logging.getLogger(__name__)

# Numeric columns of a pair row (PairResult.to_row) kept as summary keys, by their row names.
_PAIR_KEYS = ("stir_m2_given_m1", "stir_m1_given_m2", "stir_adv_m2_given_m1", "stir_adv_m1_given_m2", "similarity")
_PAIR_PREFIXES = ("agreement_", "difficulty_")
_DIRECTION_KEYS = ("stir", "stir_adv", "agreement", "difficulty")


def _short(name: Any) -> str:
    """A model name fit for a key: the last part of a path, only [A-Za-z0-9_.-]."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(str(name)).name) or "model"


def _number(value: Any) -> Optional[float]:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def _pair_summary(row: Dict[str, Any]) -> Dict[str, float]:
    out: Dict[str, float] = {}
    for key, value in row.items():
        if key.endswith("_std"):
            continue
        m = re.fullmatch(r"(arbitrary|adversarial)_fraction_iri(_m\d_given_m\d)?", key)
        if key in _PAIR_KEYS or key.startswith(_PAIR_PREFIXES):
            name = key
        elif m:
            name = f"fraction_iri_{m.group(1)}{m.group(2) or ''}"
        else:
            continue
        if _number(value) is not None:
            out[name] = _number(value)
    if _number(row.get("similarity")) is not None and row.get("measure"):
        out[str(row["measure"])] = _number(row["similarity"])  # e.g. linear_cka
    return out


def summary_keys(report: Report) -> Dict[str, float]:
    """Stable summary keys from the report's tables; no model paths, no display names in them.

    One pair (the ``pair`` kind at the penultimate layer): ``stir_m2_given_m1``, ``stir_m1_given_m2``,
    ``stir_adv_*``, ``similarity`` and the measure's name (``linear_cka``), ``agreement_*``,
    ``difficulty_*``, ``fraction_iri_<kind>[_<direction>]``. Several pairs or layers: the same keys
    under ``<ref>_vs_<target>/[<tap>/]``; a matrix: ``matrix/<ref>/<target>/<stir|stir_adv|...>``.
    Headline numbers of the report without a model name in their key (e.g. ``mean_offdiagonal_stir``)
    are kept as they are.
    """
    out: Dict[str, float] = {k: v for k, v in report.summary.items() if "(" not in k and _number(v) is not None}
    for table in ("pairs", "incremental"):
        rows = report.tables.get(table, ([], None))[0]
        for row in rows:
            values = _pair_summary(row)
            if len(rows) == 1 and row.get("tap_ref", "penultimate") == "penultimate":
                out.update(values)
                continue
            prefix = f"{_short(row.get('ref'))}_vs_{_short(row.get('target'))}/"
            if row.get("tap_ref") not in (None, "penultimate"):
                prefix += f"{row['tap_ref']}/"
            out.update({prefix + k: v for k, v in values.items()})
    for row in report.tables.get("directions", ([], None))[0]:
        for key in _DIRECTION_KEYS:
            if _number(row.get(key)) is not None:
                out[f"matrix/{_short(row.get('ref'))}/{_short(row.get('target'))}/{key}"] = _number(row[key])
    return out


_NOTE_SPLIT = re.compile(r";\s*(?=(?:similarity|m\d\|m\d|[\w.]+ vs [\w.]+):)")
_MODEL_COLUMNS = ("m1 (ref)", "m2 (target)", "model", "ref", "target", "m1 (ref) \\ m2 (target)", "pair")


def readable(rows: List[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], List[str]]:
    """Display rows for people: models by short name, undefined values as "-", notes as [i] markers.

    Returns the rows and the distinct notes, each to be printed once below the table (a self pair
    or a matrix repeats the same note on many rows). A path given as a model (a bare checkpoint)
    shows as its last part; "nan" (e.g. the undefined directions of a self pair) shows as "-".
    """
    notes: List[str] = []
    out = []
    for row in rows:
        new = {}
        for key, value in row.items():
            if key == "notes":
                marks = []
                # Notes are "; "-joined, each starting with its source ("similarity: ", "m2|m1: "); a
                # note may itself contain "; ", so split only before a source.
                for note in [n.strip() for n in _NOTE_SPLIT.split(str(value or "")) if n.strip()]:
                    if note not in notes:
                        notes.append(note)
                    marks.append(f"[{notes.index(note) + 1}]")
                new[key] = " ".join(marks)
            elif key in _MODEL_COLUMNS and isinstance(value, str) and "/" in value:
                path = Path(value)  # a checkpoint file shows with its folder: seed0/weights.pt
                new[key] = f"{path.parent.name}/{path.name}" if path.suffix else path.name
            elif isinstance(value, str) and value.strip().lower().startswith("nan"):
                new[key] = "-"
            elif isinstance(value, float) and math.isnan(value):
                new[key] = "-"
            else:
                new[key] = value
        out.append(new)
    return out, notes


def publish(report: Report, out: Path, logger: LoggerConfig, config: Dict[str, Any], run_name: str,
            tags: Optional[List[str]] = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    sections = [f"# {report.title}\n"] + [f"> {note}\n" for note in report.notes]
    for note in report.notes:
        log.warning("%s", note)
    for name, (rows, columns) in report.tables.items():
        write_csv(rows, out / f"{name}.csv", columns)
        shown, notes = readable(report.display.get(name, rows))
        below = "".join(f"\n[{i}] {note}" for i, note in enumerate(notes, 1))
        write_markdown(shown, out / f"{name}.md", title=f"{report.title}: {name}")
        if notes:
            with open(out / f"{name}.md", "a", encoding="utf-8") as f:
                f.write("\n" + "\n".join(f"[{i}] {note}  " for i, note in enumerate(notes, 1)) + "\n")
        log.info("%s\n%s%s", name, format_table(shown), below)
        sections.append(f"## {name}\n\nfile: `{name}.csv`\n")
    for name, path in report.figures.items():
        sections.append(f"![{name}]({Path(path).name})\n")
        log.info("figure %s: %s", name, path)
    summary = summary_keys(report)
    atomic.write_text(out / "README.md", "\n".join(sections))
    atomic.write_json(out / "record.json", {"config": config, "versions": library_versions(), "summary": report.summary,
                                             "summary_keys": summary, "notes": report.notes})
    run = log_report(
        project=logger.wandb.project, run_name=run_name, directory=out, mode=logger.wandb.mode, config=config,
        tables=report.tables, images={f"figures/{k}": v for k, v in report.figures.items()},
        summary=summary, entity=logger.wandb.entity, tags=tags, job_type="evaluate",
    )
    if run is not None:
        log.info("W&B run: %s (upload with `wandb sync %s`)", run, run)
