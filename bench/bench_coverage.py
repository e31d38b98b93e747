"""Do the interval readings cover what they claim? Coverage by simulation at the null and at non-null values.

    python bench/bench_coverage.py [--samples 200] [--pilot 1000] [--resamples 200] [--sizes 100,1000] [--ks 1,5]

A STIR value is S = 1/k sum_j S_r(m2(X), m2(X'_j)): n images, k seed draws. Synthetic representations
with a known generating process stand in for the networks (Gaussian rows, d = 16, no network needed):

    m2(X)    = x                    peaked spectrum (variances 0.7^i)
    m2(X'_j) = a x + e_j            e_j fresh for every draw j (the inversion's seed variance)
    m1(X'_j) = x + 0.1 e'_j         the ceiling's X': m1 nearly inverted exactly

with a chosen so the value lies at 0 (no pairing: the null) and from about 0.2 to 0.9. For each case
(a, n, k) a pilot of ``--pilot`` independent samples (new x, new e_j) gives what each interval is for:
the mean of the reading over samples (the estimator's expectation at this n and k) and its true
standard deviation. Then ``--samples`` further samples are calibrated (``stir.measure.calibration
.calibrate``) under each interval reading it offers (``jackknife_corrected``, the default;
``half_sampling``, the shipped results' reading; the retired ``bootstrap`` and ``jackknife`` are refused by calibrate, their
figures are in the earlier result files), and reported: how often the interval covers the pilot mean (nominal 95%) and its
mean half-width over 1.96 true sd (1: the right width). Readings: the value and the normalised value.
Results: bench/results/bench_coverage.{json,md}; the table is in docs/benchmarks/calibration.md.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Dict, List

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from stir.atomic import write_text  # noqa: E402
from stir.measure.calibration import CalibrationConfig, calibrate  # noqa: E402
from stir.similarity import linear_cka  # noqa: E402

log = logging.getLogger("bench_coverage")
D = 16
PAIRINGS = (0.0, 0.45, 0.9, 1.6, 4.0)  # a: value 0 (null) to about 0.9
READINGS = ["half_sampling", "jackknife_corrected"]  # the readings calibrate offers; --readings narrows it


def draw(n: int, k: int, a: float, g: torch.Generator):
    spec = torch.tensor([0.7 ** i for i in range(D)], dtype=torch.float64).sqrt()
    x = torch.randn(n, D, generator=g, dtype=torch.float64) * spec
    ys = [a * x + torch.randn(n, D, generator=g, dtype=torch.float64) * spec for _ in range(k)]
    refs = [x + 0.1 * torch.randn(n, D, generator=g, dtype=torch.float64) for _ in range(k)]
    return x, ys, refs


def calibrated(x, ys, refs, reading: str, resamples: int, seed: int):
    values = [float(linear_cka(x, y)) for y in ys]
    cfg = CalibrationConfig(permutations=0, resamples=resamples, interval=reading, seed=seed, guard=0.0)
    return calibrate("linear_cka", x, ys, values, x, refs, None, cfg)


def case(n: int, k: int, a: float, samples: int, pilot: int, resamples: int, seed: int) -> Dict:
    g = torch.Generator().manual_seed(seed)
    truth = {"value": [], "normalised": []}
    for _ in range(pilot):
        cal = calibrated(*draw(n, k, a, g), "half_sampling", 0, 0)
        truth["value"].append(cal.value)
        truth["normalised"].append(cal.normalised)
    mean = {r: float(torch.tensor(v).mean()) for r, v in truth.items()}
    sd = {r: float(torch.tensor(v).std()) for r, v in truth.items()}
    out: Dict = {"a": a, "n": n, "k": k, "mean": mean, "sd": sd}
    hits = {(m, r): [] for m in READINGS for r in truth}
    widths = {(m, r): [] for m in READINGS for r in truth}
    for s in range(samples):
        sample = draw(n, k, a, g)
        for reading in READINGS:
            cal = calibrated(*sample, reading, resamples, s)
            for r, (lo, hi) in {"value": (cal.low, cal.high), "normalised": (cal.normalised_low, cal.normalised_high)}.items():
                hits[reading, r].append(float(lo <= mean[r] <= hi))
                widths[reading, r].append((hi - lo) / 2)
    out["coverage"] = {f"{m}/{r}": sum(h) / len(h) for (m, r), h in hits.items()}
    out["width_ratio"] = {f"{m}/{r}": (sum(w) / len(w)) / (1.96 * sd[r]) for (m, r), w in widths.items()}
    return out


def table(rows: List[Dict]) -> List[str]:
    lines = ["| a | n | k | value (mean) | normalised (mean) | " + " | ".join(
        f"{m} {r}: coverage, width" for m in READINGS for r in ("value", "normalised")) + " |",
        "|---" * (5 + 2 * len(READINGS)) + "|"]
    for row in rows:
        cells = [f"{row['coverage'][f'{m}/{r}']:.2f}, {row['width_ratio'][f'{m}/{r}']:.2f}"
                 for m in READINGS for r in ("value", "normalised")]
        lines.append(f"| {row['a']:g} | {row['n']} | {row['k']} | {row['mean']['value']:.3f} | "
                     f"{row['mean']['normalised']:.3f} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--pilot", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=200)
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--ks", default="1,5")
    parser.add_argument("--pairings", default=",".join(str(a) for a in PAIRINGS))
    parser.add_argument("--readings", default=",".join(READINGS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="added to each case's seed (1000 n + 10 k): a replicate")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "bench_coverage"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(args.threads)
    READINGS[:] = args.readings.split(",")
    started = time.time()
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        for k in (int(s) for s in args.ks.split(",")):
            for a in (float(s) for s in args.pairings.split(",")):
                rows.append(case(n, k, a, args.samples, args.pilot, args.resamples, seed=1000 * n + 10 * k + args.seed))
                log.info("%s", json.dumps(rows[-1]))
    record = {"samples": args.samples, "pilot": args.pilot, "resamples": args.resamples, "rows": rows,
              "seconds": time.time() - started, "torch": torch.__version__, "command": " ".join(["python", *sys.argv])}
    write_text(Path(args.out + ".json"), json.dumps(record, indent=1) + "\n")
    lines = [f"# Interval coverage by simulation ({args.samples} samples per case, pilot {args.pilot}, "
             f"{args.resamples} resamples, nominal 95%)", "", *table(rows), "",
             f"Command: `{record['command']}` ({record['seconds']:.0f} s, torch {torch.__version__})."]
    write_text(Path(args.out + ".md"), "\n".join(lines) + "\n")
    log.info("wrote %s.{json,md}", args.out)


if __name__ == "__main__":
    main()
