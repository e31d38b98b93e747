"""The W&B dashboard of the project: its panels as data, a workspace builder, a check, a local PNG.

Panels (section: what is plotted, from which runs):

Training (``job_type=train``, grouped by the run config's ``recipe_group``: the seeds of a recipe)
  1. ``train/epoch_loss`` against ``epoch``       4. ``val/robust_acc`` against ``epoch``
  2. ``train/epoch_acc`` against ``epoch``        5. ``test/robust_acc`` against ``test/acc`` (summary)
  3. ``val/acc`` against ``epoch``
Evaluation (``job_type=evaluate``)
  6. the STIR matrix: image ``figures/matrix_stir`` (table ``matrix_stir``)
  7. directional STIR against CKA: summary ``stir_m2_given_m1`` and ``stir_m1_given_m2`` against ``linear_cka``
  8. incremental curves: image ``figures/incremental`` (table ``incremental``)

Commands (``python -m stir.reporting.dashboard ...``)::

    build --entity E --project P   # the workspace in the W&B app (needs wandb-workspaces and the network)
    check RUN.wandb ...            # the keys the panels use exist in these (offline) runs
    png --runs runs --results results --out dashboard.png   # the same panels from local files

The PNG needs no W&B at all: training curves from each run folder's CSV log, evaluation panels
from the report folders (``matrix_stir.csv``, ``record.json``'s ``summary``, ``incremental.csv``).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from stir.reporting.wandb_read import OfflineRun, read_run


@dataclass(frozen=True)
class Panel:
    section: str  # "Training" | "Evaluation"
    title: str
    kind: str  # "line" (history against x) | "scatter" (summary against summary) | "media" (an image key)
    y: Sequence[str]
    x: str = ""
    job_type: str = "train"
    kinds: Sequence[str] = ()  # evaluation: the experiment kinds whose runs carry it (empty: every run)


GROUP_BY = "recipe_group"  # run config field: the recipe without its seed
PANELS: List[Panel] = [
    Panel("Training", "Training loss", "line", ["train/epoch_loss"], "epoch"),
    Panel("Training", "Training accuracy", "line", ["train/epoch_acc"], "epoch"),
    Panel("Training", "Validation accuracy", "line", ["val/acc"], "epoch"),
    Panel("Training", "Validation robust accuracy", "line", ["val/robust_acc"], "epoch"),
    Panel("Training", "Robust vs clean test accuracy", "scatter", ["test/robust_acc"], "test/acc"),
    Panel("Evaluation", "STIR matrix", "media", ["figures/matrix_stir"], job_type="evaluate", kinds=("matrix",)),
    Panel("Evaluation", "Directional STIR vs CKA", "scatter", ["stir_m2_given_m1", "stir_m1_given_m2"], "linear_cka",
          job_type="evaluate", kinds=("pair",)),
    Panel("Evaluation", "Incremental STIR", "media", ["figures/incremental"], job_type="evaluate",
          kinds=("incremental",)),
]


def missing_keys(run: OfflineRun, panels: Sequence[Panel] = PANELS) -> List[str]:
    """The keys that the panels for this run's job type (and experiment kind) read and the run lacks."""
    missing = []
    kind = (run.config.get("experiment") or {}).get("kind") if run.job_type == "evaluate" else None
    for panel in panels:
        if panel.job_type != run.job_type or (panel.kinds and kind not in panel.kinds):
            continue
        if panel.kind == "line":
            have = run.history_keys
            needed = [*panel.y, panel.x]
        elif panel.kind == "scatter":
            have = set(run.summary)
            needed = [*panel.y, panel.x]
        else:  # media: logged images appear in the summary as "<key>/_type" = "image-file"
            have = {k.rsplit("/_type", 1)[0] for k in run.summary if k.endswith("/_type")}
            needed = list(panel.y)
        missing += [f"{panel.title}: {k}" for k in needed if k not in have]
    if run.job_type == "train" and GROUP_BY not in run.config:
        missing.append(f"grouping: config {GROUP_BY}")
    return missing


def build_workspace(entity: str, project: str, name: str = "STIR"):
    """The W&B workspace of ``PANELS`` (wandb-workspaces); ``.save()`` it to create it in the app."""
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws

    sections: Dict[str, list] = defaultdict(list)
    for p in PANELS:
        if p.kind == "line":
            panel = wr.LinePlot(title=p.title, x=p.x, y=list(p.y), groupby=wr.Config(GROUP_BY),
                                groupby_aggfunc="mean", groupby_rangefunc="stddev")
        elif p.kind == "scatter":
            panel = wr.ScatterPlot(title=p.title, x=wr.SummaryMetric(p.x), y=wr.SummaryMetric(p.y[0]))
        else:
            panel = wr.MediaBrowser(title=p.title, media_keys=list(p.y))
        sections[p.section].append(panel)
    return ws.Workspace(entity=entity, project=project, name=name,
                        sections=[ws.Section(name=s, panels=panels, is_open=True) for s, panels in sections.items()])


# ------------------------------------------------------------------------------ local PNG
def _training_curves(runs: Path) -> Dict[str, Dict[str, Dict[int, List[float]]]]:
    """recipe (run folder without seed) -> key -> epoch -> values over seeds, from the CSV logs."""
    curves: Dict[str, Dict[str, Dict[int, List[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for log in sorted(runs.glob("**/csv/version_*/metrics.csv")):
        run = log.parents[2]
        recipe = str(run.parent.relative_to(runs))
        for row in csv.DictReader(open(log)):
            for key in ("train/epoch_loss", "val/acc", "val/robust_acc"):
                if row.get(key) and row.get("epoch"):
                    curves[recipe][key][int(float(row["epoch"]))].append(float(row[key]))
    return curves


def _latest(results: Path, pattern: str) -> Optional[Path]:
    found = sorted((p for p in results.glob(pattern) if not p.parent.is_symlink()), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _empty(ax: Any, why: str) -> None:
    """Say in an empty panel why it is empty, not leave blank axes."""
    ax.text(0.5, 0.5, why, ha="center", va="center", wrap=True, fontsize=8, transform=ax.transAxes, color="0.4")


def draw_local(runs: Path, results: Path, out: Path) -> Path:
    """The dashboard's panels from local files (no W&B): training curves, STIR matrix, STIR vs CKA, incremental."""
    fig = Figure(figsize=(16, 8), dpi=110, layout="constrained")
    axes = fig.subplots(2, 3)
    curves = _training_curves(Path(runs))
    for ax, key, label in ((axes[0, 0], "train/epoch_loss", "training loss"), (axes[0, 1], "val/acc", "validation accuracy"),
                           (axes[0, 2], "val/robust_acc", "validation robust accuracy")):
        for recipe, by_key in sorted(curves.items()):
            if key in by_key:
                epochs = sorted(by_key[key])
                mean = [np.mean(by_key[key][e]) for e in epochs]
                ax.plot([e + 1 for e in epochs], mean, marker="o", label=recipe)
        ax.set(title=f"Training: {label} (mean over seeds)", xlabel="epoch", ylabel=label)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole numbers
        if ax.has_data():
            ax.legend(fontsize=6)
        else:
            _empty(ax, f"no training CSV logs under {runs} (train.py writes them)")
    ax = axes[1, 0]
    matrix = _latest(Path(results), "*/matrix_stir.csv")
    if matrix is not None:
        rows = list(csv.DictReader(open(matrix)))
        names = [k for k in rows[0] if k != "m1 (ref) \\ m2 (target)"]
        values = np.array([[float(r[n]) for n in names] for r in rows])
        im = ax.imshow(values, vmin=0, vmax=1, cmap="viridis")
        ax.set_xticks(range(len(names)), names, rotation=45, fontsize=8)
        ax.set_yticks(range(len(rows)), [r["m1 (ref) \\ m2 (target)"] for r in rows], fontsize=8)
        for i in range(len(rows)):
            for j in range(len(names)):
                ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", color="w", fontsize=8)
        fig.colorbar(im, ax=ax)
    else:
        _empty(ax, f"no matrix report under {results} (e.g. experiment=relative_robustness)")
    ax.set(title="STIR matrix: STIR(column | row)", xlabel="m2 (target)", ylabel="m1 (ref)")
    ax = axes[1, 1]
    points: Dict[str, list] = defaultdict(list)  # direction -> [(cka, stir, pair)]
    for record in sorted(Path(results).glob("*/record.json")):
        if record.parent.is_symlink():  # results/<name> links the latest report: counted once, by its folder
            continue
        content = json.loads(record.read_text())
        keys = content.get("summary", {})
        # the zoo profile beside the name: a cpu and a laptop report of one pair are two points, told apart
        profile = ((content.get("config") or {}).get("zoo") or {}).get("profile")
        label = record.parent.name.rsplit("-", 1)[0] + (f" ({profile})" if profile else "")
        for direction in ("stir_m2_given_m1", "stir_m1_given_m2"):
            if "linear_cka" in keys and direction in keys:
                points[direction].append((keys["linear_cka"], keys[direction], label))
    for direction, marker in (("stir_m2_given_m1", "o"), ("stir_m1_given_m2", "^")):
        if points[direction]:
            xs, ys, labels = zip(*points[direction])
            ax.scatter(xs, ys, marker=marker, label=direction.replace("stir_", "STIR ").replace("_given_", " | "))
            for x, y, label in zip(xs, ys, labels):
                ax.annotate(label.removeprefix("pair_"), (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set(title="Directional STIR vs CKA (one point per pair report)", xlabel="linear CKA", ylabel="STIR")
    if ax.has_data():
        ax.legend(fontsize=7)
    else:
        _empty(ax, f"no pair report with STIR and CKA under {results} (evaluate.py ref=... target=...)")
    ax = axes[1, 2]
    incremental = _latest(Path(results), "*/incremental.csv")
    if incremental is not None:
        by_chain: Dict[str, list] = defaultdict(list)
        for row in csv.DictReader(open(incremental)):
            by_chain[row["chain"]].append(row)
        for chain, rows in by_chain.items():
            xs = [float(r["train_size"]) for r in rows]
            for key, label in (("stir_m2_given_m1", "STIR(m_t | m_t-1)"), ("stir_m1_given_m2", "STIR(m_t-1 | m_t)")):
                ys = [float(r[key]) if r.get(key) else math.nan for r in rows]
                ax.plot(xs, ys, marker="o", label=f"{chain}: {label}")
        ax.legend(fontsize=7)
    else:
        _empty(ax, f"no incremental report under {results} (experiment=incremental)")
    ax.set(title="Incremental STIR along growing training sets", xlabel="training set size of m_t", ylabel="STIR")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig).print_png(str(out))
    return out


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m stir.reporting.dashboard", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="create the workspace in the W&B app (wandb-workspaces, network)")
    b.add_argument("--entity", required=True)
    b.add_argument("--project", default="stir")
    c = sub.add_parser("check", help="the panels' keys exist in these run files")
    c.add_argument("runs", nargs="+", type=Path)
    p = sub.add_parser("png", help="draw the panels from local run and report folders")
    p.add_argument("--runs", type=Path, default=Path("runs"))
    p.add_argument("--results", type=Path, default=Path("results"))
    p.add_argument("--out", type=Path, default=Path("dashboard.png"))
    args = parser.parse_args(argv)
    if args.command == "build":
        workspace = build_workspace(args.entity, args.project).save()
        print(f"workspace: {workspace.url}")
    elif args.command == "check":
        absent = [str(r) for r in args.runs if not r.exists()]
        if absent:  # an unmatched shell glob arrives as its own text: one line, not read_run's traceback
            sys.stderr.write(f"error: no W&B run folder at {', '.join(absent)}: pass the offline-run-* folders a report "
                             "wrote (the command's W&B line names them; W&B off writes none)\n")
            raise SystemExit(2)
        # a run that has just finished may still be being flushed by wandb's service: wait for its exit record
        problems = {str(r): missing_keys(read_run(r, wait_s=30.0)) for r in args.runs}
        for run, missing in problems.items():
            print(f"{run}: {'ok' if not missing else 'missing ' + ', '.join(missing)}")
        if any(problems.values()):
            raise SystemExit(1)
    else:
        print(draw_local(args.runs, args.results, args.out))


if __name__ == "__main__":
    main()
