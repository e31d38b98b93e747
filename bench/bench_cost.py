"""How the cost of a faithful inversion grows with the number of images and the network's width.

    python bench/bench_cost.py [--threads 1] [--steps 20]      # the table of docs/benchmarks/cost.md, ~10 min
    python bench/bench_cost.py --quick                           # n 64/128, widths 4/8, 5 steps: ~20 s

For ResNet18 at widths 8, 16, 32 (random weights with batch norms that are not the identity: cost
does not depend on training) and n = 128, 256, 512, 1000 CIFAR-sized images, it times
``invert(model, X, "penultimate", InversionConfig(steps=S), run=ExecutionConfig())`` (the
shipped faithful defaults: folded batch norm, channels-last, automatic batch) and reports seconds
per step, milliseconds per image-step, and the log-log slopes of time against n (per width) and
against width (per n). Each n x width case runs ``--repeats`` times and the median is kept.

Peak memory: in a fresh subprocess, ``invert`` of 1000 images at width 16 for a few steps, with
the automatic batch (128 on CPU) and with ``ExecutionConfig(batch_size=1000)``; the process's peak
RSS (``ru_maxrss``) and its growth over the RSS it held just before inverting.

Presets at full size: the architectures' cost relative to ResNet18 (measured here), the inversions
each preset runs (``PRESETS``, with the calibration ceiling's extra draw per reference), and from
them the model evaluations and the CPU hours on this machine at ResNet18 width 64 (extrapolated
with the measured width slope). Results: ``bench/out/bench_cost.json``.
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

from stir.atomic import write_text
from stir.config.schema import ModelConfig
from stir.inversion import ExecutionConfig, InversionConfig, invert
from stir.models import build
from stir.models.synthetic import with_trained_batch_norms
from stir.reporting import to_markdown

log = logging.getLogger("bench_cost")
OUT = Path(__file__).resolve().parent / "out"


def network(width: int) -> nn.Module:
    torch.manual_seed(0)
    m = build(ModelConfig("resnet18", width=width), 10, (0.49, 0.48, 0.45), (0.25, 0.24, 0.26))
    return with_trained_batch_norms(m).eval()


def images(n: int) -> torch.Tensor:
    low = torch.rand(n, 3, 8, 8, generator=torch.Generator().manual_seed(n))
    return nn.functional.interpolate(low, size=32, mode="bilinear", align_corners=False)


def seconds(m: nn.Module, x: torch.Tensor, steps: int, batch_size: Optional[int] = None) -> float:
    cfg = InversionConfig(steps=steps, record_steps=())
    run = ExecutionConfig(batch_size=batch_size, warn_below=0.0)
    start = time.perf_counter()
    invert(m, x, "penultimate", cfg, run=run)
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


# -- what the presets cost at full size --------------------------------------------------------------

# Inversions each preset runs at full size (n = 1000, k = 5, 1000 faithful steps; the inversion cache
# shares a reference's arbitrary IRIs across targets), by architecture: {arch: (arbitrary inversions
# per draw, adversarial inversions per draw)}; taps of layer-wise presets counted as full-depth
# inversions (an upper bound: an early tap's forward pass stops there). Difficulty walks (200 steps
# from x, one per adversarial inversion) come with the adversarial ones. Every STIR is calibrated
# (evaluate.py's default, ``stir.measure.calibration``): its ceiling inverts each reference (and tap)
# once more from an independent seed, cached like the k draws, so each arbitrary inversion counted
# here runs k + 1 times (``ceiling_draws``); the floor and the interval cost no model evaluations.
PRESETS = {
    "seeds (3 pairs, iri=both)": {"resnet18": (4, 6)},
    "relative_robustness (3-model matrix)": {"resnet18": (3, 0)},
    "architectures (8-model matrix)": {"resnet18": (2, 0), "resnet34": (2, 0), "vgg16": (2, 0), "vgg19": (2, 0)},
    "incremental (2 chains of 9)": {"resnet18": (18, 0)},
    "layers (10 pairs, original taps)": {"resnet18": (6 * 18, 0), "resnet34": (4 * 34, 0), "vgg16": (4 * 14, 0),
                                         "vgg19": (4 * 17, 0)},
    "at_methods (12 pairs, all taps)": {"resnet18": (5 * 11, 0), "vgg16": (5 * 15, 0)},
}
PAPER = {"n": 1000, "k": 5, "steps": 1000, "difficulty_steps": 200, "ceiling_draws": 1}
# A GPU figure that is NOT measured here (no GPU was lent): ResNet18 width 64 on 32x32 inputs is
# 0.56 GMAC per forward pass; an input-gradient pass adds about as much again, so one model
# evaluation is ~2.2 GFLOP. At an ASSUMED sustained 100 TFLOP/s (about a fifth of an H200's dense
# TF32 peak) that is ~45,000 image-evaluations per second. bench/gpu.sh measures the real rate.
GPU_GFLOP_PER_EVALUATION = 2.2
GPU_ASSUMED_TFLOPS = 100.0


def architecture_factors(width: int, n: int, steps: int) -> Dict[str, float]:
    """Seconds per inversion step of each architecture relative to ResNet18, measured at ``width``."""
    times = {}
    for arch in ("resnet18", "resnet34", "vgg16", "vgg19"):
        torch.manual_seed(0)
        m = build(ModelConfig(arch, width=width), 10, (0.49, 0.48, 0.45), (0.25, 0.24, 0.26)).eval()
        seconds(m, images(8), 1)
        times[arch] = seconds(m, images(n), steps)
    return {arch: round(t / times["resnet18"], 2) for arch, t in times.items()}


def preset_budget(factors: Dict[str, float], ms_per_image_step: float) -> List[Dict]:
    """Model evaluations (ResNet18-equivalent) of each preset at full size, and CPU hours at the
    given ResNet18 cost per image-step (width 64, extrapolated from the table)."""
    rows = []
    n, k, steps, walk = PAPER["n"], PAPER["k"], PAPER["steps"], PAPER["difficulty_steps"]
    k_arb = k + PAPER["ceiling_draws"]  # arbitrary IRIs of a reference: k draws and the ceiling's draw
    for name, archs in PRESETS.items():
        evaluations = sum(factors[a] * n * (k_arb * arb * (steps + 1) + k * adv * (steps + 1 + walk + 1))
                          for a, (arb, adv) in archs.items())
        rows.append({"preset": name, "inversions": sum(k_arb * a + k * b for a, b in archs.values()),
                     "resnet18_equivalent_evaluations": f"{evaluations:.3g}",
                     "cpu_hours_here": round(evaluations * ms_per_image_step / 1e3 / 3600, 1),
                     "gpu_minutes_assumed_100_tflops": round(
                         evaluations * GPU_GFLOP_PER_EVALUATION / (GPU_ASSUMED_TFLOPS * 1e3) / 60, 1)})
    return rows


def peak_rss_child(n: int, width: int, steps: int, batch_size: Optional[int]) -> None:
    """In a fresh process: print the peak-RSS growth (MiB) of one inversion."""
    m, x = network(width), images(n)
    before = _current_rss_kib()  # what the process holds now (its peak so far may be an import spike)
    seconds(m, x, steps, batch_size)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"rss_before_mib": round(before / 1024, 1), "peak_mib": round(after / 1024, 1),
                      "peak_growth_mib": round(max(0, after - before) / 1024, 1)}))


def _current_rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


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
    factors = architecture_factors(widths[-1] if args.quick else 16, ns[0], args.steps)
    # ResNet18 at width 64 per image-step: the widest measured cost at the largest n, scaled by the width slope
    widest = max(widths)
    per_image = table["rows"][-1]["ms_per_image_step"] * (64 / widest) ** table["slope_vs_width"][ns[-1]]
    budget = preset_budget(factors, per_image)
    result = {"threads": args.threads, "steps": args.steps, "torch": torch.__version__, **table, "memory": memory,
              "architecture_factors": factors, "ms_per_image_step_width64_extrapolated": round(per_image, 3),
              "presets": budget}
    args.out.mkdir(parents=True, exist_ok=True)
    write_text(args.out / "bench_cost.json", json.dumps(result, indent=2, default=str))
    print(to_markdown(table["rows"]))
    print("slope of time vs n (per width):", table["slope_vs_n"])
    print("slope of time vs width (per n):", table["slope_vs_width"])
    print(to_markdown(memory))
    print("architecture cost relative to ResNet18:", factors)
    print(f"ResNet18 width 64, extrapolated: {per_image:.3f} ms per image-step")
    print(to_markdown(budget))


if __name__ == "__main__":
    main()
