"""Write a finished report: terminal tables, CSV + Markdown files, PNG figures, README, record, W&B run.

The W&B run (``job_type="evaluate"``) carries the report's tables as ``wandb.Table``, its figures
as images, the models compared (their recipes and the model artifacts train.py logged) in the
config, and the report's summary keys, which the experiments derive from their typed results: the
same names whatever the models are called or where their files lie, so a dashboard can plot them
across runs. File names come from ``slug``: no path separator or colon of a model name reaches one,
no name is longer than ``SLUG_LIMIT``, and two names that slug alike get two files (``unique_slugs``).
"""
from __future__ import annotations

import logging
import math
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from stir import atomic
from stir.config.schema import LoggerConfig
from stir.provenance import library_versions
from stir.reporting import reading
from stir.reporting.report import Report, Row, Table, unique_slugs
from stir.reporting.tables import format_table, to_markdown, write_csv, write_markdown
from stir.reporting.wandb_log import complete_runs, log_report

log = logging.getLogger(__name__)


def readable(table: Table) -> Tuple[List[Row], List[str]]:
    """Display rows for people: undefined values as "-", each row's notes as [i] markers.

    Returns the rows and the distinct notes in order of first appearance, to be printed once below
    the table (a self pair or a matrix repeats the same note on many rows).
    """
    notes: List[str] = []
    out = []
    for i, row in enumerate(table.shown):
        new = {key: ("-" if _undefined(value) else value) for key, value in row.items()}
        if table.notes is not None:
            marks = []
            for note in table.notes[i]:
                if note not in notes:
                    notes.append(note)
                marks.append(f"[{notes.index(note) + 1}]")
            new["notes"] = " ".join(marks)
        out.append(new)
    return out, notes


# A shown value with no number but NaN ("nan", "nan [nan, nan]", "nan ± nan"); a name that begins
# with "nan" (a model nano_vit) is a name.
_ALL_NAN = re.compile(r"(?:\bnan\b|[\s\[\](),;:±+/=-])*\bnan\b(?:\bnan\b|[\s\[\](),;:±+/=-])*", re.IGNORECASE)


def _undefined(value: Any) -> bool:
    return (isinstance(value, float) and math.isnan(value)) or (isinstance(value, str) and bool(_ALL_NAN.fullmatch(value.strip())))


def _after(table: Table) -> str:
    """The sentences shown under a table (``Table.after``, then its ``legend``), a paragraph each."""
    return "".join(f"{sentence}\n\n" for sentence in [*table.after, table.legend] if sentence)


README_ROWS = 40  # tables up to this many rows are shown in the report's README.md, longer ones linked


def _footer(notes: List[str]) -> str:
    return "".join(f"\n[{i}] {note}  " for i, note in enumerate(notes, 1))


def publish(report: Report, out: Path, logger: LoggerConfig, config: Dict[str, Any], run_name: str,
            tags: Optional[List[str]] = None) -> Dict[str, Path]:
    """Write ``report`` into the folder ``out``; {figure name: PNG path}.

    README.md opens with the headline of every table that has one (``Table.headline``: the few
    main columns, linked to the table's files with every column), then the tables without one (up
    to ``README_ROWS`` rows shown, longer ones linked), then the figures. Each table's ``<name>.csv``
    and ``<name>.md`` hold all its columns, headline or not."""
    out.mkdir(parents=True, exist_ok=True)
    sections = [f"# {report.title}\n"]
    if report.opening:  # plain words first, then the notes grouped (stir.reporting.reading), then the tables
        sections += [f"{paragraph}\n" for paragraph in report.opening]
        if report.notes:
            sections.append("\n".join(reading.markdown(report.notes)) + "\n")
    elif report.notes_below_first_table and report.notes:
        sections.append(f"{len(report.notes)} notes on how it was measured, the models and the data: [below the "
                        f"first table](#notes).\n")
    else:
        sections += [f"> {note}\n" for note in report.notes]
    # The terminal gets a summary (issue 69): the headline rows, how many notes, where the report is; every
    # table, note and figure is in README.md (and at DEBUG: logging.level=DEBUG or hydra.verbose=true).
    for note in report.notes:
        log.debug("note: %s", note)
    if report.notes:
        log.info("%d note(s) on how it was measured, the models and the data: in %s", len(report.notes), out / "README.md")
    headlines, others = [], []
    stems = unique_slugs(report.tables)  # two labels that slug alike never write one file
    for name, table in report.tables.items():
        name = stems[name]
        write_csv(table.rows, out / f"{name}.csv", table.columns)
        shown, notes = readable(table)
        write_markdown(shown, out / f"{name}.md", title=f"{report.title}: {name}",
                       footer="\n".join(f"[{i}] {note}  " for i, note in enumerate(notes, 1)))
        files = f"file: [`{name}.csv`]({name}.csv), [`{name}.md`]({name}.md)"
        if table.headline is not None:
            brief, brief_notes = readable(table.headline)
            columns = len(shown[0]) if shown else 0
            log.info("%s\n%s\n(its notes [1]-[%d]: README.md; every column: %s)", table.title or name, format_table(brief),
                     len(brief_notes), out / f"{name}.md")
            log.debug("%s", "\n".join(f"[{i}] {note}" for i, note in enumerate(brief_notes, 1)))
            for sentence in table.after:  # a direction that reverses, a reading that disagrees: said here too
                log.info("%s", sentence)
            log.debug("%s, every column\n%s", name, format_table(shown))
            every = (f"Every column ({columns} of them): [`{name}.md`]({name}.md); the numbers at full precision: "
                     f"[`{name}.csv`]({name}.csv).")
            shown_brief = f"{to_markdown(brief)}\n{_footer(brief_notes)}\n"
            if len(brief) > README_ROWS:  # too long for the README: a file of its own
                write_markdown(brief, out / f"{name}_headline.md", title=f"{report.title}: {name} (headline)",
                               footer="\n".join(f"[{i}] {note}  " for i, note in enumerate(brief_notes, 1)))
                shown_brief = f"{len(brief)} rows: [`{name}_headline.md`]({name}_headline.md)\n"
            headlines.append(f"## {table.title or name}\n\n{shown_brief}\n{_after(table)}{every}\n")
            continue
        log.debug("%s\n%s%s", name, format_table(shown), "".join(f"\n[{i}] {note}" for i, note in enumerate(notes, 1)))
        if len(shown) <= README_ROWS:  # the report itself shows the numbers, not only where they are
            others.append(f"## {table.title or name}\n\n{to_markdown(shown)}\n{_footer(notes)}\n\n{_after(table)}{files}\n")
        else:
            others.append(f"## {table.title or name}\n\n{len(shown)} rows: {files}\n\n{_after(table)}")
    tables = headlines + others
    if report.notes_below_first_table and report.notes and not report.opening:
        tables[1:1] = ["## notes\n\n" + "\n".join(f"> {note}\n" for note in report.notes)]
    sections += tables
    figures = {}
    stems = unique_slugs(report.figures)
    for name, figure in report.figures.items():
        path = figure.render(out / f"{stems[name]}.png")
        figures[name] = path
        sections.append(f"![{name}]({path.name})\n")
        log.debug("figure %s: %s", name, path)
    atomic.write_text(out / "README.md", "\n".join(sections))
    atomic.write_json(out / "record.json", {"config": config, "versions": library_versions(), "summary": report.summary,
                                             "notes": report.notes, "models": report.models})
    run = log_report(
        project=logger.wandb.project, run_name=run_name, directory=out, mode=logger.wandb.mode, config=config,
        tables={name: (t.rows, t.columns) for name, t in report.tables.items()},
        images={f"figures/{k}": v for k, v in figures.items()}, summary=report.summary,
        entity=logger.wandb.entity, tags=tags, job_type="evaluate",
    )
    if run is not None:
        log.debug("W&B run: %s", run)  # the entry point says where it is and how to upload it, once
    return figures


def publish_once(report: Report, out: Path, logger: LoggerConfig, config: Dict[str, Any], run_name: str,
                 tags: List[str], nothing_new: bool) -> None:
    """``publish``, holding a lock on the report folder, with the rule for a second W&B run.

    When nothing new was measured (``nothing_new``: every result came from the store) the report is
    rewritten but no second W&B run of the same numbers is logged, unless the folder holds no
    complete one yet (its results were measured by shards or by a run with W&B off, or logging was
    interrupted) or ``logger.wandb.log_cached``. The lock makes two identical evaluations that finish
    at once write one W&B run: the second sees the first's complete run.
    """
    from filelock import FileLock

    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out.parent / f".{out.name}.lock")):
        if nothing_new and not logger.wandb.log_cached:
            if complete_runs(out):
                log.info("every result came from the store: no new W&B run (logger.wandb.log_cached=true logs one)")
                logger = logger.without_wandb()
            elif logger.wandb.mode != "disabled":
                log.info("every result came from the store and %s holds no complete W&B run yet (measured by shards, "
                         "with W&B off, or its logging was interrupted): logging one", out)
        publish(report, out, logger, config, run_name=run_name, tags=tags)


def publish_evaluation(report: Report, out_dir: Path, name: str, settings: Dict[str, Any], logger: LoggerConfig,
                       config: Dict[str, Any], tags: List[str], nothing_new: bool, latest: Optional[str] = None,
                       exact: Optional[str] = None) -> Path:
    """An evaluation's report into ``out_dir/<name>-<hash of settings>/`` (``publish_once``), added to
    ``out_dir/index.md`` and linked as ``out_dir/<latest>`` (default: ``name``) and ``out_dir/<exact>``
    (the latest on exactly its models, ``stir.experiments.exact_link``); the folder is checked
    first (no symbolic link, inside ``out_dir``). Returns it."""
    from stir.reporting.index import check_report_dir, record_report, report_dir

    out = report_dir(out_dir, name, settings)
    check_report_dir(out_dir, out)  # never through a symbolic link, never outside out_dir
    publish_once(report, out, logger, config, run_name=f"evaluate/{name}", tags=tags, nothing_new=nothing_new)
    record_report(out_dir, name, out, settings, latest=latest, exact=exact)
    return out
