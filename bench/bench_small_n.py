"""How far does STIR depend on the number of images n? Linear CKA and debiased linear CKA on real networks.

    python bench/bench_small_n.py [--n 1000] [--steps 1000] [--sizes 100,250,500,1000] [--subsets 50]
                                  [--direction r20:r20_b] [--cache-dir DIR]

Linear CKA is a biased estimator: two unrelated (n, d) representations give a value well above 0 at
small n (its chance level, the STIR floor), and the bias falls as n grows (Murphy et al. 2024,
"Correcting biases in linear CKA"; Nanda et al. use n = 1000). This benchmark inverts ONE set of
``--n`` images of the reference (the images evaluate.py measures: the first n of the training split
sampler at image_seed 0; arbitrary IRIs with the published procedure, ``--steps`` steps, seed 0) and
reads STIR(m2|m1) = S(m2(X), m2(X')) on random subsets of m rows for every m of ``--sizes`` (rows of
X and X' kept together; the inversion of an image does not depend on the other images, so a subset
of m rows is an inversion of m images), with S = linear CKA and debiased linear CKA, beside each
one's floor (S(m2(X), m2(X)[pi]), 20 permutations) and the same-draw ceiling S(m1(X), m1(X')).
The snapshots of the convergence record (steps 100, 250, 500) give the same table at fewer steps.
Results: bench/results/bench_small_n.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import platform
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Dict, List

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from stir import similarity  # noqa: E402
from stir.atomic import write_text  # noqa: E402
from stir.experiments.config import compose_evaluate  # noqa: E402
from stir.experiments.context import open_context  # noqa: E402
from stir.inversion import invert  # noqa: E402
from stir.measure.calibration import permutation_floor  # noqa: E402
from stir.models.taps import collect  # noqa: E402

log = logging.getLogger("bench_small_n")
DATA = REPO.parent / "shared" / "data" / "cifar10-jpg.tar.gz"
MEASURES = ("linear_cka", "linear_cka_debiased")
TAP = "penultimate"


def reps(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    return collect(model, x, [TAP], 500, dtype=torch.float64)[TAP]  # (n, d)


def table(rows: Dict[str, torch.Tensor], sizes: List[int], subsets: int, seed: int) -> List[Dict[str, float]]:
    """Per m: mean and sd over random m-row subsets of STIR, floor, ceiling and normalised value."""
    gen = torch.Generator().manual_seed(seed)
    n = rows["tx"].shape[0]
    out = []
    for m in sizes:
        picks = [torch.arange(n)] if m >= n else [torch.randperm(n, generator=gen)[:m] for _ in range(subsets)]
        row: Dict[str, float] = {"n": min(m, n), "subsets": len(picks)}
        for measure in MEASURES:
            fn = similarity.get(measure)
            vals = {"stir": [], "floor": [], "ceiling": [], "normalised": [], "prefix": math.nan}
            for idx in picks:
                s = float(fn(rows["tx"][idx], rows["txp"][idx]))
                f, _ = permutation_floor(measure, rows["tx"][idx], rows["tx"][idx], 20, gen)
                c = float(fn(rows["rx"][idx], rows["rxp"][idx]))
                vals["stir"].append(s), vals["floor"].append(f), vals["ceiling"].append(c)
                vals["normalised"].append((s - f) / (c - f) if c != f else math.nan)
            prefix = torch.arange(min(m, n))  # what evaluate.py n=m measures
            row[f"{measure}/prefix"] = float(fn(rows["tx"][prefix], rows["txp"][prefix]))
            for key in ("stir", "floor", "ceiling", "normalised"):
                t = torch.tensor(vals[key], dtype=torch.float64)
                row[f"{measure}/{key}"] = float(t.mean())
                row[f"{measure}/{key}_sd"] = float(t.std()) if len(t) > 1 else 0.0
        out.append(row)
    return out


def markdown(result: dict) -> str:
    lines = [f"# STIR({result['target']}|{result['ref']}) against n: linear CKA and debiased linear CKA", "",
             f"One inversion of {result['n']} images (published procedure, seed 0, {result['steps']} steps; "
             f"{result['fraction_iri']:.0%} within the tolerance 0.02, median residual {result['median_residual']:.3f}); "
             f"each n: mean (sd) over {result['subsets']} random subsets of n rows; floor: 20 permutations; "
             "ceiling: S(m1(X), m1(X')) on the same rows; normalised: (STIR - floor) / (ceiling - floor).", ""]
    for step, rows in result["tables"].items():
        lines += [f"## after {step} steps", "",
                  "| n | linear CKA: STIR | floor | ceiling | normalised | debiased: STIR | floor | ceiling | normalised |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            cells = [str(r["n"])]
            for measure in MEASURES:
                for key in ("stir", "floor", "ceiling", "normalised"):
                    cells.append(f"{r[f'{measure}/{key}']:.3f} ({r[f'{measure}/{key}_sd']:.3f})")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines += [f"Command: `{result['command']}` ({result['seconds']:.0f} s; torch {result['torch']}, commit {result['commit']}, "
              f"{result['date']})", ""]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--sizes", default="100,250,500,1000")
    p.add_argument("--subsets", type=int, default=50)
    p.add_argument("--direction", default="r20:r20_b", help="REF:TARGET zoo names")
    p.add_argument("--cache-dir", default=str(REPO / "results" / "inversion-cache"))
    p.add_argument("--data", default=str(DATA))
    p.add_argument("--out", default=str(REPO / "bench" / "results" / "bench_small_n"))
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not Path(args.data).exists():
        raise SystemExit(f"error: no CIFAR-10 copy at {args.data}; pass --data PATH")
    ref, target = args.direction.split(":")
    cfg, exp = compose_evaluate(REPO / "configs" / "evaluate", [
        f"ref={ref}", f"target={target}", f"n={args.n}", f"data.source={args.data}", f"inversion.steps={args.steps}",
        f"execution.cache_dir={args.cache_dir}"])
    ctx = open_context(cfg, exp, repo=REPO)
    m1, m2 = ctx.model(ref), ctx.model(target)
    images = ctx.images(m1)
    start = time.perf_counter()
    result = invert(m1.module, images, TAP, cfg.inversion, m2=m2.module, run=cfg.execution)
    log.info("inversion: %.0f s (from cache: %s), %.0f%% IRIs, median residual %.3f", time.perf_counter() - start,
             result.from_cache, 100 * result.fraction_iri, float(result.residual.median()))
    with torch.no_grad():
        base = {"tx": reps(m2.module, images), "rx": reps(m1.module, images)}
        tables = {}
        for step, xp in sorted(result.snapshots.items()):
            rows = {**base, "txp": reps(m2.module, xp), "rxp": reps(m1.module, xp)}
            tables[str(step)] = table(rows, [int(s) for s in args.sizes.split(",")], args.subsets, seed=0)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    out = {"ref": ref, "target": target, "n": args.n, "steps": args.steps, "subsets": args.subsets,
           "fraction_iri": result.fraction_iri, "median_residual": float(result.residual.median()), "tables": tables,
           "command": "python bench/bench_small_n.py " + " ".join(sys.argv[1:]), "seconds": time.perf_counter() - start,
           "torch": torch.__version__, "python": platform.python_version(), "commit": commit,
           "date": time.strftime("%Y-%m-%d")}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_text(Path(args.out + ".json"), json.dumps(out, indent=1))
    write_text(Path(args.out + ".md"), markdown(out))
    log.info("wrote %s.{json,md}", args.out)


if __name__ == "__main__":
    main()
