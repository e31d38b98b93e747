"""Write a finished report: terminal tables, CSV + Markdown files, PNG figures, a W&B run."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict

from stir import atomic
from stir.config.schema import LoggerConfig
from stir.evaluation.experiments import Report
from stir.provenance import library_versions
from stir.reporting import format_table, log_report, write_csv, write_markdown

log = logging.getLogger(__name__)


def publish(report: Report, out: Path, logger: LoggerConfig, config: Dict[str, Any], run_name: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    sections = [f"# {report.title}\n"] + [f"> {note}\n" for note in report.notes]
    for note in report.notes:
        log.warning("%s", note)
    for name, (rows, columns) in report.tables.items():
        write_csv(rows, out / f"{name}.csv", columns)
        shown = report.display.get(name, rows)
        write_markdown(shown, out / f"{name}.md", title=f"{report.title}: {name}")
        log.info("%s\n%s", name, format_table(shown))
        sections.append(f"## {name}\n\nfile: `{name}.csv`\n")
    for name, path in report.figures.items():
        sections.append(f"![{name}]({Path(path).name})\n")
        log.info("figure %s: %s", name, path)
    atomic.write_text(out / "README.md", "\n".join(sections))
    atomic.write_json(out / "record.json", {"config": config, "versions": library_versions(), "summary": report.summary,
                                             "notes": report.notes})
    run = log_report(
        project=logger.wandb.project, run_name=run_name, directory=out, mode=logger.wandb.mode, config=config,
        tables=report.tables, images={f"figures/{k}": v for k, v in report.figures.items()},
        summary=report.summary, entity=logger.wandb.entity,
    )
    if run is not None:
        log.info("W&B run: %s (upload with `wandb sync %s`)", run, run)
