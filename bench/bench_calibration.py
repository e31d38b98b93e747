"""Does a STIR interval cover what it claims? Coverage of the two interval readings on real networks.

    python bench/bench_calibration.py [--samples 200] [--resamples 200] [--sizes 100,250,500,1000] [--quick]

STIR is S_r(m2(X), m2(X')) for n images X: a linear CKA of two row-paired (n, d) representations,
whose value depends on which n images were drawn. This benchmark draws ``--samples`` independent
image sets of size n from a pool (the 10,000 test images of the shared CIFAR-10 copy) and, on each,
the interval of each reading of ``stir.measure.calibration`` (``half_sampling``: value +- z se from
``--resamples`` half-samples; ``jackknife_corrected``: value +- z se from the delete-one jackknife less
half its Efron-Stein bias; and, for comparison, the retired ``bootstrap``: percentile bootstrap with
replacement, computed here from the same resampling code). The quantity the interval is for is the value at this n on another image sample: its
mean over the samples (the "truth" here) and its spread (the true standard error). Reported per
reading and n: coverage of the truth (nominal 95%), the mean interval half-width against the true
standard error, and how often the interval contains its own value.

Paired representations (no inversion needed: the statistic is the same function of two (n, d)
arrays): the penultimate vectors of the ResNet20 seed pair (r20 vs r20_b: high similarity), and the
ResNet20 penultimate vector against the robust CNN's (r20 vs rob_cnn_a: low, STIR-like values), and
the same with the robust CNN's rows shuffled once over the pool (no pairing: the null, value near its
floor).
Results: bench/results/bench_calibration.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from pathlib import Path
from typing import Dict, List

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from stir.atomic import write_text  # noqa: E402
from stir.data import StirDataModule, to_float  # noqa: E402
from stir.config.schema import DataConfig  # noqa: E402
from stir.measure.calibration import (  # noqa: E402
    CalibrationConfig, _Resampler, calibrate, percentile_interval, resample_rows, standard_error_interval)
from stir.models import sources  # noqa: E402
from stir.models.taps import collect  # noqa: E402
from stir.similarity import linear_cka  # noqa: E402

log = logging.getLogger("bench_calibration")
DATA = REPO.parent / "shared" / "data" / "cifar10-jpg.tar.gz"
PAIRS = {"r20 vs r20_b (seed pair)": ("realnet:resnet20-akamaster", "realnet:resnet20-zheng"),
         "r20 vs rob_cnn_a (low similarity)": ("realnet:resnet20-akamaster", "realnet:cnn_a_adv-abcrown"),
         "r20 vs rob_cnn_a shuffled (null)": ("realnet:resnet20-akamaster", "realnet:cnn_a_adv-abcrown")}
READINGS = ("half_sampling", "jackknife_corrected", "bootstrap")  # bootstrap: retired in calibrate, kept here to compare


def pool(spec: str, images: torch.Tensor) -> torch.Tensor:
    model = sources.load(spec).module
    return collect(model, images, ["penultimate"], 500, dtype=torch.float64)["penultimate"]  # (N, d)


def coverage(x: torch.Tensor, y: torch.Tensor, n: int, samples: int, resamples: int, seed: int) -> Dict[str, Dict[str, float]]:
    gen = torch.Generator().manual_seed(seed)
    values, intervals = [], {r: [] for r in READINGS}
    jackknife = CalibrationConfig(permutations=0, ceiling="none", resamples=1, interval="jackknife_corrected", seed=seed)
    for _ in range(samples):
        idx = torch.randperm(x.shape[0], generator=gen)[:n]
        xs, ys = x[idx], y[idx]
        value = float(linear_cka(xs, ys))
        values.append(value)
        cal = calibrate("linear_cka", xs, [ys], [value], xs, [], None, jackknife)  # k = 1, no ceiling: the value's interval
        intervals["jackknife_corrected"].append((cal.low, cal.high, value))
        for reading in ("half_sampling", "bootstrap"):
            rows = resample_rows(n, resamples, gen, without_replacement=reading == "half_sampling")
            b = _Resampler("linear_cka", xs, rows).values(ys)
            lo, hi, _ = (standard_error_interval(value, b, 0.95) if reading == "half_sampling"
                         else percentile_interval(b, 0.95))
            intervals[reading].append((lo, hi, value))
    v = torch.tensor(values, dtype=torch.float64)
    truth, true_se = float(v.mean()), float(v.std())
    out = {"truth": truth, "true_se": true_se}
    for reading, rows in intervals.items():
        covered = sum(lo <= truth <= hi for lo, hi, _ in rows) / len(rows)
        own = sum(lo <= value <= hi for lo, hi, value in rows) / len(rows)
        half = sum((hi - lo) / 2 for lo, hi, _ in rows) / len(rows)
        out[reading] = {"coverage": covered, "contains_own_value": own, "half_width": half,
                        "half_width_over_1.96_true_se": half / (1.96 * true_se)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=200)
    parser.add_argument("--sizes", default="100,250,500,1000")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="20 samples, 50 resamples, n=100 (a smoke run)")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "bench_calibration"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(args.threads)
    if args.quick:
        args.samples, args.resamples, args.sizes = 20, 50, "100"
    sizes = [int(s) for s in args.sizes.split(",")]
    data = StirDataModule(DataConfig(source=str(DATA), root=str(REPO / "data")))
    data.setup()
    images = to_float(data.split_tensors("test")[0])  # (10000, 3, 32, 32) in [0, 1]
    started = time.time()
    results: Dict[str, Dict[str, Dict]] = {}
    features: Dict[str, torch.Tensor] = {}
    for label, (a, b) in PAIRS.items():
        for spec in (a, b):
            if spec not in features:  # each network's pool once
                features[spec] = pool(spec, images)
        x, y = features[a], features[b]
        if "shuffled" in label:  # one fixed permutation of the pool: the pairing broken, both marginals kept
            y = y[torch.randperm(y.shape[0], generator=torch.Generator().manual_seed(0))]
        log.info("%s: CKA on all %d images %.3f", label, x.shape[0], float(linear_cka(x, y)))
        results[label] = {str(n): coverage(x, y, n, args.samples, args.resamples, seed=n) for n in sizes}
        for n in sizes:
            r = results[label][str(n)]
            log.info("  n=%4d truth %.3f se %.4f | %s", n, r["truth"], r["true_se"], " | ".join(
                f"{m} cover {r[m]['coverage']:.2f} width/true {r[m]['half_width_over_1.96_true_se']:.2f}" for m in READINGS))
    record = {"samples": args.samples, "resamples": args.resamples, "sizes": sizes, "seconds": time.time() - started,
              "torch": torch.__version__, "results": results, "command": " ".join(sys.argv)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_text(Path(args.out + ".json"), json.dumps(record, indent=1))
    lines = [f"# Interval coverage ({args.samples} image samples per n, {args.resamples} resamples, nominal 95%)", "",
             "| pair | n | value (mean) | true se | " + " | ".join(f"{m}: coverage | half-width / (1.96 se)" for m in READINGS)
             + " | bootstrap contains its value |", "|---" * (5 + 2 * len(READINGS)) + "|"]
    for label, by_n in results.items():
        for n, r in by_n.items():
            cells = [f"{r[m]['coverage']:.2f} | {r[m]['half_width_over_1.96_true_se']:.2f}" for m in READINGS]
            lines.append(f"| {label} | {n} | {r['truth']:.3f} | {r['true_se']:.4f} | " + " | ".join(cells)
                         + f" | {r['bootstrap']['contains_own_value']:.2f} |")
    lines += ["", f"Command: `{record['command']}` ({record['seconds']:.0f} s, torch {torch.__version__})."]
    write_text(Path(args.out + ".md"), "\n".join(lines) + "\n")
    log.info("wrote %s.{json,md}", args.out)


if __name__ == "__main__":
    main()
