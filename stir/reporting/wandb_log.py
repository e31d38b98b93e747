"""Log a finished report (tables, figures, headline numbers) to Weights & Biases as one run.

Offline by default in this project: the run is written under ``<directory>/wandb/offline-run-
<YYYYmmdd_HHMMSS>-<id>/`` and can be uploaded later with ``wandb sync <that folder>``. What
wandb 0.31 writes there (asserted by the tests):

- ``run-<id>.wandb``: the binary record log (config, history, summary); logged key names and
  the media paths below appear in it as plain bytes;
- ``files/media/table/<key>_<step>_<hash>.table.json``: each table as
  ``{"columns": [...], "data": [[...], ...]}`` (NaN written as the bare token ``NaN``);
- ``files/media/images/<key>_<step>_<hash>.png``: a copy of each logged PNG (a "/" in a key
  becomes a sub-folder);
- ``files/requirements.txt`` and ``logs/debug*.log``.

Once a run is finished its folder name is added to ``<directory>/wandb/complete.json``
(``complete_runs``): a run interrupted while logging never gets there, so a rerun can tell that the
report has no complete W&B run yet and log one.

The run is created with ``reinit="create_new"`` so a W&B run already active in the process (e.g. a
training logger) is neither finished nor written to, and ``wandb.run`` is left as it was. When
this call had to start wandb's background service it also shuts it down again, restoring
``WANDB_SERVICE`` and the ``sys.exit`` / ``sys.excepthook`` wrappers wandb installs, so the
process is left as found. wandb is imported lazily: importing stir.reporting stays cheap.
"""

from __future__ import annotations

import json
import logging
import numbers
import os
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence, Union

from stir.atomic import write_json

__all__ = ["complete_runs", "log_report", "offline_run_line", "WANDB_MODES"]
DASHBOARD = "docs/evaluation.md#dashboard"  # where the dashboards are explained

log = logging.getLogger(__name__)

PathLike = Union[str, os.PathLike]
WANDB_MODES = ("offline", "online", "disabled")
_SERVICE_ENV = "WANDB_SERVICE"  # wandb.env.SERVICE; set while wandb's service process runs


COMPLETE = "complete.json"  # <directory>/wandb/complete.json: the runs logged to the end, oldest first


def complete_runs(directory: PathLike) -> list[str]:
    """The W&B runs of a report folder that were logged to the end (every table, figure and summary
    value, then finished), by their folder names; an interrupted run (Ctrl-C during logging leaves
    one with its config and no tables) is not among them. Empty when there is none or the list is
    unreadable."""
    path = Path(directory) / "wandb" / COMPLETE
    try:
        runs = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [str(r) for r in runs] if isinstance(runs, list) else []


def offline_run_line(directory: PathLike, mode: str) -> str:
    """One line for the end of train.py and evaluate.py: where the newest W&B run of ``directory``
    (a run folder or a report folder) lies, the command that uploads it and the dashboards' page; or
    why there is none (``logger.wandb.mode=disabled``)."""
    if mode == "disabled":
        return f"W&B: off (logger.wandb.mode=disabled); dashboards: {DASHBOARD}"
    runs = sorted(Path(directory).glob("wandb/offline-run-*"), key=lambda p: p.stat().st_mtime)
    if mode == "online" or not runs:
        return f"W&B: logged {mode} from {directory}; dashboards: {DASHBOARD}"
    return f"W&B offline run: {runs[-1]} (upload: `wandb sync {runs[-1]}`; dashboards: {DASHBOARD})"


def _scalar(value: Any) -> Any:
    """Table cell -> a JSON-friendly Python scalar (numpy / 0-d tensors unwrapped)."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        value = value.item()
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return str(value)


def _table_data(name: str, spec: Any) -> tuple[list[str], list[list[Any]]]:
    if not (isinstance(spec, (tuple, list)) and len(spec) == 2):
        raise TypeError(f"tables[{name!r}] must be (rows, columns), got {type(spec).__name__}")
    rows, columns = spec
    if columns is None:
        seen: dict[str, None] = {}
        for row in rows:
            for key in row:
                seen.setdefault(str(key), None)
        columns = list(seen)
    columns = [str(c) for c in columns]
    return columns, [[_scalar(row.get(c)) for c in columns] for row in rows]


def log_report(*, project: str, run_name: str, directory: PathLike, mode: str,
               config: Mapping[str, Any], tables: Mapping[str, tuple[Sequence[Mapping[str, Any]],
                                                                     Sequence[str] | None]],
               images: Mapping[str, PathLike], summary: Mapping[str, Any],
               entity: str | None = None, tags: Sequence[str] | None = None,
               job_type: str = "evaluate") -> Path | None:
    """Write one W&B run holding the report and finish it; return its local run folder.

    Logged, all at step 0: ``tables[key] = (rows, columns)`` as ``wandb.Table(columns, data)``
    under ``key`` (columns None: union of row keys in first-seen order; missing cells None);
    ``images[key]`` (a PNG path) as ``wandb.Image``; ``summary`` into the run summary;
    ``config`` as the run config. Keys are used verbatim and must not collide.

    mode "offline" writes ``<directory>/wandb/offline-run-*`` and never touches the network;
    "online" also uploads; "disabled" does nothing and returns None. Output is silenced.
    Raises ValueError / FileNotFoundError on bad input before any run is started.
    """
    if mode not in WANDB_MODES:
        raise ValueError(f"mode must be one of {WANDB_MODES}, got {mode!r}")
    clash = set(tables) & set(images)
    if clash:
        raise ValueError(f"keys used for both a table and an image: {sorted(clash)}")
    image_paths = {key: Path(p) for key, p in images.items()}
    missing = [str(p) for p in image_paths.values() if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"images to log do not exist: {missing}")
    table_data = {key: _table_data(key, spec) for key, spec in tables.items()}
    if mode == "disabled":
        log.debug("W&B disabled: report %r not logged", run_name)
        return None

    import wandb

    directory = Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    settings = wandb.Settings(
        silent=True, console="off",  # no banners or captured stdout in the evaluation log
        x_disable_stats=True,  # a one-step report has no use for system metrics sampling
        x_save_requirements=True,
    )
    # wandb's service is a per-process singleton: only shut it down if this call started it.
    starts_service = not os.environ.get(_SERVICE_ENV)
    saved_exit, saved_excepthook = sys.exit, sys.excepthook
    try:
        with wandb.init(project=project, entity=entity, name=run_name, dir=str(directory),
                        mode=mode, config=dict(config), tags=list(tags) if tags else None,
                        job_type=job_type, reinit="create_new", settings=settings) as run:
            payload: dict[str, Any] = {}
            for key, (columns, data) in table_data.items():
                # Report tables mix numbers with "-"/None and labels; skip wandb's per-column
                # type lock, which would reject e.g. a NaN-as-None next to floats in a text column.
                payload[key] = wandb.Table(columns=columns, data=data, allow_mixed_types=True)
            for key, p in image_paths.items():
                payload[key] = wandb.Image(str(p))
            if payload:
                run.log(payload, step=0)
            # numpy / tensor scalars unwrapped; anything else (str, dict, list) as given.
            clean = {str(k): (v.item() if getattr(v, "ndim", None) == 0 and hasattr(v, "item") else v)
                     for k, v in summary.items()}
            if clean:
                run.summary.update(clean)
            run_dir = Path(run.settings.sync_dir)
    finally:
        if starts_service and os.environ.get(_SERVICE_ENV):
            wandb.teardown()  # stops the service, unregisters its atexit hook, clears the env var
            sys.exit, sys.excepthook = saved_exit, saved_excepthook
    write_json(directory / "wandb" / COMPLETE, [*complete_runs(directory), run_dir.name])  # only once finished
    log.debug("W&B %s run %r written to %s (%d tables, %d images, %d summary values)",
              mode, run_name, run_dir, len(table_data), len(image_paths), len(summary))
    return run_dir
