"""How the cost of a faithful inversion grows with the number of images and the network's width.

    python bench/bench_cost.py [--threads 1] [--steps 20]      # the table of bench/README.md, ~10 min
    python bench/bench_cost.py --quick                           # n 64/128, widths 4/8, 5 steps: ~20 s

For ResNet18 at widths 8, 16, 32 (random weights with batch norms that are not the identity: cost
does not depend on training) and n = 128, 256, 512, 1000 CIFAR-sized images, it times
``invert(model, X, "penultimate", InversionConfig(steps=S))`` (the shipped faithful defaults:
folded batch norm, channels-last, automatic batch) and reports seconds per step, milliseconds per
image-step, and the log-log slopes of time against n (per width) and against width (per n).
Each n x width case runs ``--repeats`` times and the median is kept.

Peak memory: in a fresh subprocess, ``invert`` of 1000 images at width 16 for a few steps, with
the automatic batch (128 on CPU) and with ``batch_size=1000``; the growth of the process's peak
RSS (``ru_maxrss``) over what it held before inverting. Results: ``bench/out/bench_cost.json``.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import torch
from torch import nn

from stir.config.schema import ModelConfig
from stir.inversion import InversionConfig, invert
from stir.models import build
from stir.reporting import to_markdown

log = logging.getLogger("bench_cost")
OUT = Path(__file__).resolve().parent / "out"


def network(width: int) -> nn.Module:
    torch.manual_seed(0)
    m = build(ModelConfig("resnet18", width=width), 10, (0.49, 0.48, 0.45), (0.25, 0.24, 0.26))
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.3, 0.3)
            mod.running_var.uniform_(0.5, 2.0)
    return m.eval()


def images(n: int) -> torch.Tensor:
    low = torch.rand(n, 3, 8, 8, generator=torch.Generator().manual_seed(n))
    return nn.functional.interpolate(low, size=32, mode="bilinear", align_corners=False)


def seconds(m: nn.Module, x: torch.Tensor, steps: int, batch_size: Optional[int] = None) -> float:
    cfg = InversionConfig(steps=steps, record_steps=(), warn_below=0.0, batch_size=batch_size)
    start = time.perf_counter()
    invert(m, x, "penultimate", cfg)
    return time.perf_counter() - start


def slope(xs: List[float], ys: List[float]) -> float:
    """Least-squares slope of log y against log x."""
    lx, ly = [math.log(v) for v in xs], [math.log(v) for v in ys]
    mx, my = statistics.mean(lx), statistics.mean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def cost_table(ns: List[int], widths: List[int], steps: int, repeats: int) -> Dict:
    rows, per_step = [], {}
    for width in widths:
        m = network(width)
        seconds(m, images(8), 1)  # warm-up: allocator, thread pool
        for n in ns:
            x = images(n)
            t = statistics.median(seconds(m, x, steps) for _ in range(repeats)) / (steps + 1)  # steps + 1 evaluations
            per_step[(width, n)] = t
            rows.append({"width": width, "n": n, "seconds_per_step": round(t, 4),
                         "ms_per_image_step": round(1e3 * t / n, 3),
                         "seconds_1000_steps": round(1001 * t, 1)})
            log.info("width %d, n %d: %.3f s per step (%.3f ms per image-step)", width, n, t, 1e3 * t / n)
    slopes_n = {w: round(slope(ns, [per_step[(w, n)] for n in ns]), 2) for w in widths}
    slopes_w = {n: round(slope(widths, [per_step[(w, n)] for w in widths]), 2) for n in ns}
    return {"rows": rows, "slope_vs_n": slopes_n, "slope_vs_width": slopes_w}


def peak_rss_child(n: int, width: int, steps: int, batch_size: Optional[int]) -> None:
    """In a fresh process: print the peak-RSS growth (MiB) of one inversion."""
    m, x = network(width), images(n)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    seconds(m, x, steps, batch_size)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_growth_mib": round((after - before) / 1024, 1), "peak_mib": round(after / 1024, 1)}))


def peak_rss(n: int, width: int, steps: int, batch_size: Optional[int], threads: int) -> Dict:
    code = (f"import torch, sys; sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r}); "
            f"torch.set_num_threads({threads}); from bench.bench_cost import peak_rss_child; "
            f"peak_rss_child({n}, {width}, {steps}, {batch_size!r})")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return {"n": n, "width": width, "batch_size": batch_size or "auto", **json.loads(out.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--quick", action="store_true", help="n 64/128, widths 4/8, 5 steps, 1 repeat")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(args.threads)
    ns, widths = [128, 256, 512, 1000], [8, 16, 32]
    rss_n, rss_width = 1000, 16
    if args.quick:
        ns, widths, args.steps, args.repeats, rss_n, rss_width = [64, 128], [4, 8], 5, 1, 256, 8

    table = cost_table(ns, widths, args.steps, args.repeats)
    memory = [peak_rss(rss_n, rss_width, 3, b, args.threads) for b in (None, rss_n)]
    result = {"threads": args.threads, "steps": args.steps, "torch": torch.__version__, **table, "memory": memory}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_cost.json").write_text(json.dumps(result, indent=2, default=str))
    print(to_markdown(table["rows"]))
    print("slope of time vs n (per width):", table["slope_vs_n"])
    print("slope of time vs width (per n):", table["slope_vs_width"])
    print(to_markdown(memory))


if __name__ == "__main__":
    main()
