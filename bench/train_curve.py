"""Time to accuracy, ``bench_train.py curve`` and ``plot`` (run through ``bench/bench_train.py``).

    python bench/bench_train.py curve NAME [overrides]   # train.py to the end, test accuracy per epoch vs wall time
    python bench/bench_train.py plot                     # the accuracy-vs-wall-time PNG from bench/results/

curve: ``stir.training.pipeline.train`` (what ``python train.py`` runs) of a composed config into a
run folder, with a callback that after every epoch measures the test accuracy of the evaluated
network (float32; robust accuracy with ``eval_attack`` on the first ``--robust-images`` test
images every ``--robust-every`` epochs) with the training clock stopped and the random streams
saved and restored around it, so the run is the one train.py makes. Wall time counts everything
train.py does from the first training step (its own validation included). Written after every
epoch to ``bench/results/bench_train_curve_<NAME>.json``; ``plot`` draws all of them.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import lightning as L
import torch

from stir.atomic import write_figure, write_text
from stir.attacks import robust_accuracy
from stir.config.schema import AttackConfig
from stir.config.store import compose_train
from stir.data import to_float
from stir.models import frozen
from stir.training.system import rng_states, set_rng_states

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"
RESULTS = REPO / "bench" / "results"
SOURCE = REPO.parent / "shared/data/cifar10-jpg.tar.gz"
log = logging.getLogger("bench_train")


# ------------------------------------------------------------------------------------------- curve
class TestCurve(L.Callback):
    """After each training epoch: test accuracy (and robust accuracy) with the clock stopped.

    Measures ``module.eval_network`` in float32 inside ``frozen`` (eval mode, modes restored), with
    the global random states saved and restored, so the training run is the one train.py makes.
    Writes the curve to ``out`` after every epoch.
    """

    def __init__(self, out: Path, meta: dict, robust_images: int, robust_every: int, eval_attack: AttackConfig):
        self.out, self.meta = out, meta
        self.robust_images, self.robust_every, self.eval_attack = robust_images, robust_every, eval_attack
        self.rows: List[dict] = []
        self.paused = 0.0

    def on_train_start(self, trainer, module):
        self.start, self.start_cpu, self.paused_cpu = time.perf_counter(), time.process_time(), 0.0
        self.meta["setup_seconds"] = self.start - self.meta.pop("_process_start")

    def on_train_epoch_end(self, trainer, module):
        stop, stop_cpu = time.perf_counter(), time.process_time()
        wall = stop - self.start - self.paused
        states = rng_states()
        images, labels = trainer.datamodule.split_tensors("test")
        net = module.eval_network
        # cpu_s: the process's CPU time (all its threads): on a shared machine, the wall time the same
        # work takes on as many otherwise idle cores (cache and memory contention aside).
        row = {"epoch": trainer.current_epoch + 1, "wall_s": wall, "cpu_s": stop_cpu - self.start_cpu - self.paused_cpu,
               "val_acc": _metric(trainer, "val/acc"), "train_loss": _metric(trainer, "train/epoch_loss")}
        with torch.autocast(module.device.type, enabled=False):
            with frozen(net), torch.no_grad():
                correct = sum(int((net(to_float(x.to(module.device))).argmax(1) == y.to(module.device)).sum())
                              for x, y in zip(images.split(500), labels.split(500)))
            row["test_acc"] = correct / len(labels)
            last = trainer.current_epoch + 1 == trainer.max_epochs or trainer.should_stop
            if self.robust_images and ((trainer.current_epoch + 1) % self.robust_every == 0 or last):
                n = self.robust_images
                accs = [float(robust_accuracy(net, to_float(x.to(module.device)), y.to(module.device), self.eval_attack,
                                              attack_model=module.eval_attack_model())) * len(y)
                        for x, y in zip(images[:n].split(500), labels[:n].split(500))]
                row["robust_acc"] = sum(accs) / n
        set_rng_states(states)
        self.rows.append(row)
        self.paused += time.perf_counter() - stop
        self.paused_cpu += time.process_time() - stop_cpu
        log.info("epoch %d: %.1f min (CPU %.1f min), test acc %.4f%s", row["epoch"], wall / 60, row["cpu_s"] / 60, row["test_acc"],
                 f", robust {row['robust_acc']:.4f}" if "robust_acc" in row else "")
        self.write()

    def write(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        write_text(self.out, json.dumps({**self.meta, "curve": self.rows}, indent=1))


def _metric(trainer, key: str) -> Optional[float]:
    value = trainer.callback_metrics.get(key)
    return float(value) if value is not None else None


def curve_main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench_train.py curve")
    parser.add_argument("name", help="the curve's name: bench/results/bench_train_curve_<name>.json")
    parser.add_argument("overrides", nargs="*", help="python train.py overrides (e.g. profile=laptop loss=at)")
    parser.add_argument("--source", default=str(SOURCE))
    parser.add_argument("--root", default="data")
    parser.add_argument("--runs-dir", default="runs")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--robust-images", type=int, default=0, help="test images attacked (eval_attack) per measurement")
    parser.add_argument("--robust-every", type=int, default=1, help="epochs between robust measurements")
    parser.add_argument("--quick", action="store_true", help="width 4, 2 epochs of 1,000 images: a smoke run (bench/out/)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_intermixed_args(argv)
    if args.quick:
        args.out = REPO / "bench" / "out"
    process_start = time.perf_counter()
    torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s")
    from stir.training.pipeline import train

    quick = ["model.width=4", "trainer.max_epochs=2", "data.train_size=1000", "data.holdout_size=500",
             "trainer.robust_val_size=50", "trainer.robust_test_size=50"] if args.quick else []
    overrides = [*quick, *args.overrides, f"data.source={args.source}", f"data.root={args.root}",
                 f"runs_dir={args.runs_dir}", "logger.wandb.mode=disabled", "trainer.enable_progress_bar=false",
                 "retrain=true"]  # a curve always trains anew (an earlier run folder is moved aside, not lost)
    cfg = compose_train(CONFIGS, overrides)
    name = args.name + ("_quick" if args.quick else "")
    meta = {"name": name, "overrides": args.overrides, "threads": args.threads, "torch": torch.__version__,
            "load_average_start": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M"),
            "recipe_name": cfg.recipe_name, "arch": cfg.model.arch, "width": cfg.model.width, "loss": cfg.loss.name,
            "epochs": cfg.trainer.max_epochs, "robust_images": args.robust_images, "_process_start": process_start}
    curve = TestCurve(args.out / f"bench_train_curve_{name}.json", meta, args.robust_images, args.robust_every,
                      cfg.eval_attack)
    run_dir = train(cfg, callbacks=[curve])
    metrics = json.loads((run_dir / "metrics.json").read_text())
    meta.update({"run_dir": str(run_dir), "load_average_end": os.getloadavg(),
                 "final": {k: v for k, v in metrics.items() if k.startswith("test/")},
                 "robust_check": metrics.get("robust_check")})
    curve.write()
    log.info("wrote %s", curve.out)


# -------------------------------------------------------------------------------------------- plot
TARGETS = {"vanilla": {"test_acc": 0.85}, "at": {"test_acc": 0.55, "robust_acc": 0.30}}


def time_to(curve: List[dict], targets: Dict[str, float], clock: str = "wall_s") -> Optional[float]:
    """Seconds (``clock``: wall_s | cpu_s) of the first epoch that meets every target (None: never)."""
    for row in curve:
        if all(row.get(k) is not None and row[k] >= v for k, v in targets.items()):
            return row.get(clock)
    return None


def _minutes(seconds: Optional[float]) -> str:
    return "not reached" if seconds is None else f"{seconds / 60:.1f}"


def curves_table(runs: List[dict]) -> str:
    """One row per curve: final accuracies, wall and CPU minutes, time to its loss's target."""
    lines = ["| curve | recipe | loss | width | epochs | threads | wall (min) | CPU (min) | test acc | "
             "robust acc (PGD-l2 20) | to target, wall (min) | to target, CPU (min) |", "|---|" * 12]
    lines[1] = "|---" * 12 + "|"
    for run in runs:
        c = run["curve"]
        final = c[-1] if c else {}
        target = TARGETS["vanilla" if run["loss"] == "vanilla" else "at"]
        robust = final.get("robust_acc")
        has_cpu = "cpu_s" in final  # curves recorded before the CPU clock existed have none
        lines.append(f"| {run['name']} | {run['recipe_name']} | {run['loss']} | {run['width']} | {len(c)} | "
                     f"{run['threads']} | {_minutes(final.get('wall_s'))} | {_minutes(final['cpu_s']) if has_cpu else '-'} | "
                     f"{final.get('test_acc', float('nan')):.4f} | {'-' if robust is None else f'{robust:.4f}'} | "
                     f"{_minutes(time_to(c, target))} | {_minutes(time_to(c, target, 'cpu_s')) if has_cpu else '-'} |")
    text = "\n".join(lines) + "\n\ntargets: vanilla test acc >= 0.85; AT clean >= 0.55 and PGD-l2 (eps 1, 20 steps) >= 0.30\n"
    return text + common_target_line(runs)


def common_target_line(runs: List[dict]) -> str:
    """Time of each vanilla curve to the lowest final test accuracy among them: a target every one
    of them reaches, so recipes that miss the fixed target are still compared ('' with < 2 curves)."""
    vanilla = [r for r in runs if r["loss"] == "vanilla" and r["curve"]]
    if len(vanilla) < 2:
        return ""
    target = min(r["curve"][-1]["test_acc"] for r in vanilla)
    times = [f"{r['name']} {_minutes(time_to(r['curve'], {'test_acc': target}))} wall / "
             f"{_minutes(time_to(r['curve'], {'test_acc': target}, 'cpu_s')) if 'cpu_s' in r['curve'][-1] else '-'} CPU min"
             for r in vanilla]  # '-': a curve recorded before the CPU clock existed, as in the table
    return f"\nto test acc >= {target:.4f} (the lowest final accuracy of the vanilla curves): " + "; ".join(times) + "\n"


def plot_main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench_train.py plot")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=RESULTS / "bench_train_curves.png")
    parser.add_argument("--clock", choices=("wall_s", "cpu_s"), default="wall_s",
                        help="x axis: wall time, or the process's CPU time (the wall time on idle cores)")
    args = parser.parse_args(argv)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    runs = [json.loads(p.read_text()) for p in sorted(args.results.glob("bench_train_curve_*.json"))
            if not p.stem.endswith("_quick")]
    fig = Figure(figsize=(12, 4.5))  # no pyplot: no global backend, no figure manager left behind
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2, sharey=True)
    for run in runs:
        ax = axes[0] if run["loss"] == "vanilla" else axes[1]
        c = [r for r in run["curve"] if r.get(args.clock) is not None]
        minutes = [r[args.clock] / 60 for r in c]
        (line,) = ax.plot(minutes, [r["test_acc"] for r in c], marker="o", ms=3, label=f"{run['name']} (clean)")
        robust = [(r[args.clock] / 60, r["robust_acc"]) for r in c if r.get("robust_acc") is not None]
        if robust:
            ax.plot(*zip(*robust), ls="--", marker="s", ms=3, color=line.get_color(), label=f"{run['name']} (PGD-l2)")
    clock = "wall time" if args.clock == "wall_s" else "process CPU time"
    for ax, title, target in ((axes[0], "vanilla", [0.85]), (axes[1], "adversarial training (l2, eps 1.0)", [0.55, 0.30])):
        for t in target:
            ax.axhline(t, color="grey", lw=0.8, ls=":")
        ax.set_title(title)
        ax.set_xlabel(f"{clock} (min; 1 thread, evaluation excluded)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("CIFAR-10 test accuracy (JPEG copy)")
    fig.tight_layout()
    write_figure(args.out, fig, dpi=120)
    write_text(args.out.with_suffix(".md"), curves_table(runs))
    log.info("wrote %s and %s", args.out, args.out.with_suffix(".md"))
