"""Fast vs faithful: the STIR each inversion estimator gives on the same trained models and images.

    python bench/bench_estimators.py --pair A_RUN,B_RUN [--pair ...] [--images 64] [--draws 2] [--threads 1]
    python bench/bench_estimators.py --quick --pair A_RUN,B_RUN        # 16 images, 100 steps: a smoke test

Each ``--pair`` names two run folders that ``train.py`` wrote. For both directions of each pair
(IRIs of one model at the penultimate tap, STIR measured on the other with linear CKA) and each
seed draw, on the first ``--images`` training images (a fixed shuffle, seed 0), it runs:

* ``faithful``: the published procedure (``InversionConfig(mode="faithful")``: 1000 steps of 0.5,
  clamped first step, FakeReLU on ResNets), with STIR and the median residual recorded at steps
  100, 250, 500 and 1000 (the convergence record);
* ``fast``: fast mode as shipped (Adam, 300 steps, early stop at tolerance 0.02);
* ``fast @ faithful residual``: fast mode stopping each image once r1 <= the faithful run's median
  final residual (equal residual);
* ``fast @ equal steps``: fast mode for the faithful budget, no early stop (equal steps).

Reported per row: STIR (mean over draws), its gap to faithful, median residual, fraction of IRIs
(tolerance 0.02), model evaluations and wall seconds. Results go to the log, to
``bench/out/bench_estimators.json`` and, as a Markdown table, to ``bench/out/bench_estimators.md``.
"""
from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Dict, List

import torch

from stir.atomic import write_text
from stir.config.schema import DataConfig
from stir.data import load_dataset, to_float
from stir.inversion import InversionConfig, invert
from stir.models import frozen, representation
from stir.reporting import to_markdown
from stir.similarity import linear_cka
from stir.zoo.checkpoints import network

log = logging.getLogger("bench_estimators")
SOURCE = "/work/shared/data/cifar10-jpg.tar.gz"
OUT = Path(__file__).resolve().parent / "out"
TAP = "penultimate"


def model_at(path: str) -> torch.nn.Module:
    """The network of a run folder or checkpoint (architecture from its files), eval mode, on the CPU."""
    return network(Path(path))


def stir_of(m2: torch.nn.Module, x: torch.Tensor, x_prime: torch.Tensor) -> float:
    with frozen(m2), torch.no_grad():
        return linear_cka(representation(m2, x, TAP).double(), representation(m2, x_prime, TAP).double()).item()


def run_estimators(m1, m2, x, draws: int, steps: int) -> List[Dict]:
    """Rows for one direction: IRIs of m1, STIR measured on m2."""
    faithful = InversionConfig(mode="faithful", steps=steps, record_steps=tuple(s for s in (100, 250, 500) if s < steps))
    variants: Dict[str, List[Dict]] = {}
    for j in range(draws):
        start = time.perf_counter()
        f = invert(m1, x, TAP, replace(faithful, seed=j))
        seconds = time.perf_counter() - start
        for t, xt in f.snapshots.items():
            variants.setdefault(f"faithful, {t} steps", []).append(
                {"stir": stir_of(m2, x, xt), "residual": f.snapshot_residual[t].median().item(),
                 "iri": (f.snapshot_residual[t] <= 0.02).float().mean().item(),
                 "evaluations": f.evaluations * t / steps, "seconds": seconds * t / steps})
        target = f.residual.median().item()
        fast_cfgs = {
            "fast (shipped: 300 steps, stop at 0.02)": InversionConfig(mode="fast", seed=j),
            "fast @ faithful residual": InversionConfig(mode="fast", seed=j, steps=steps,
                                                        tolerance=target / InversionConfig().stop_fraction),
            f"fast @ equal steps ({steps})": InversionConfig(mode="fast", seed=j, steps=steps, early_stop=False),
        }
        for name, cfg in fast_cfgs.items():
            start = time.perf_counter()
            r = invert(m1, x, TAP, cfg)
            variants.setdefault(name, []).append(
                {"stir": stir_of(m2, x, r.x_prime), "residual": r.residual.median().item(),
                 "iri": (r.residual <= 0.02).float().mean().item(), "evaluations": r.evaluations,
                 "seconds": time.perf_counter() - start})
    reference = sum(d["stir"] for d in variants[f"faithful, {steps} steps"]) / draws
    rows = []
    for name, ds in variants.items():
        mean = {k: sum(d[k] for d in ds) / len(ds) for k in ds[0]}
        spread = max(d["stir"] for d in ds) - min(d["stir"] for d in ds)
        rows.append({"estimator": name, "stir": round(mean["stir"], 4), "gap_to_faithful": round(mean["stir"] - reference, 4),
                     "stir_range_over_draws": round(spread, 4), "median_residual": round(mean["residual"], 5),
                     "fraction_iri": round(mean["iri"], 3), "evaluations": int(mean["evaluations"]),
                     "seconds": round(mean["seconds"], 1)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pair", action="append", required=True, help="RUN_A,RUN_B (both directions are measured)")
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--draws", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="16 images, 1 draw, 100 steps")
    parser.add_argument("--source", default=SOURCE)
    parser.add_argument("--root", default="data")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.quick:
        args.images, args.draws, args.steps = 16, 1, 100
    if args.threads:
        torch.set_num_threads(args.threads)

    data = load_dataset(DataConfig(name="cifar10", source=args.source, root=args.root, num_classes=10))
    order = torch.randperm(len(data.train_images), generator=torch.Generator().manual_seed(0))
    x = to_float(data.train_images[order[: args.images]])
    results = []
    for pair in args.pair:
        a, b = pair.split(",")
        models = {a: model_at(a), b: model_at(b)}
        for ref, tgt in ((a, b), (b, a)):
            label = f"STIR({Path(tgt).parent.name}/{Path(tgt).name} | {Path(ref).parent.name}/{Path(ref).name})"
            log.info("%s: %d images, %d draws", label, args.images, args.draws)
            for row in run_estimators(models[ref], models[tgt], x, args.draws, args.steps):
                results.append({"direction": label, **row})
                log.info("  %-40s STIR %.4f (gap %+.4f)  residual %.4g  IRIs %.2f  %6.1f s", row["estimator"], row["stir"],
                         row["gap_to_faithful"], row["median_residual"], row["fraction_iri"], row["seconds"])
    args.out.mkdir(parents=True, exist_ok=True)
    write_text(args.out / "bench_estimators.json", json.dumps(
        {"pairs": args.pair, "images": args.images, "draws": args.draws, "steps": args.steps, "rows": results}, indent=2))
    write_text(args.out / "bench_estimators.md", to_markdown(results, floatfmt=".4f"))
    log.info("wrote %s", args.out / "bench_estimators.md")


if __name__ == "__main__":
    main()
