"""Do the calibrated readings recover a known answer? The normalised STIR on synthetic pairs, against n.

    python bench/bench_null.py [--samples 50] [--resamples 100] [--sizes 100,250,1000] [--quick]

A STIR value reads m2(X) against m2(X') row by row. Synthetic representations whose population
answer is known stand in for them (Gaussian rows, d = 16; no network needed):

    m2(X)  = x               rows with a geometrically decaying ("peaked") spectrum
    m2(X') = a x + e         e fresh rows, isotropic or peaked: a = 0 (no pairing at all: the
                             normalised value is 0), a = 0.3 (a weak pairing)
    m1(X') = x + 0.1 e'      the ceiling's X': m1 nearly inverted exactly

The population normalised value is CKA_pop(x, a x + e) / CKA_pop(x, x + 0.1 e') (floors are 0 in the
population), with CKA_pop(A, B) = ||S_AB||_F^2 / (||S_A||_F ||S_B||_F) from the covariances. For each
case and n, ``--samples`` independent draws are calibrated (``stir.measure.calibration.calibrate``)
under the default reading (floor ``iris``, the pairing broken with m2(X')'s distribution kept) and the
reading ``images`` (m2(X) against itself permuted), each with its half-sampling interval of the
normalised value. Reported: the mean normalised value (the known answer beside it), and how often
the interval covers the known answer (nominal 95%).
Results: bench/results/bench_null.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Dict

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from stir.atomic import write_text  # noqa: E402
from stir.measure.calibration import CalibrationConfig, calibrate  # noqa: E402
from stir.similarity import linear_cka  # noqa: E402

log = logging.getLogger("bench_null")
D = 16
CASES = {"no pairing, isotropic X'": (0.0, "iso"), "no pairing, peaked X'": (0.0, "peak"),
         "weak pairing, isotropic X'": (0.3, "iso"), "weak pairing, peaked X'": (0.3, "peak")}


def spectrum(kind: str) -> torch.Tensor:
    """(D,) variances: all 1 ("iso") or 0.7^i ("peak")."""
    return torch.ones(D, dtype=torch.float64) if kind == "iso" else torch.tensor([0.7 ** i for i in range(D)], dtype=torch.float64)


def population_cka(cov_a: torch.Tensor, cov_b: torch.Tensor, cov_ab: torch.Tensor) -> float:
    return float((cov_ab ** 2).sum() / (cov_a.norm() * cov_b.norm()))


def known_answer(a: float, kind: str) -> float:
    """The population normalised value of the case (module docstring)."""
    sx, se = torch.diag(spectrum("peak")), torch.diag(spectrum(kind))
    value = population_cka(sx, a * a * sx + se, a * sx)
    ceiling = population_cka(sx, sx + 0.01 * torch.eye(D, dtype=torch.float64), sx)
    return value / ceiling


def draw(n: int, a: float, kind: str, g: torch.Generator):
    x = torch.randn(n, D, generator=g, dtype=torch.float64) * spectrum("peak").sqrt()
    y = a * x + torch.randn(n, D, generator=g, dtype=torch.float64) * spectrum(kind).sqrt()
    ref_prime = x + 0.1 * torch.randn(n, D, generator=g, dtype=torch.float64)
    return x, y, ref_prime


def case(n: int, a: float, kind: str, samples: int, resamples: int, seed: int) -> Dict[str, Dict[str, float]]:
    g = torch.Generator().manual_seed(seed)
    truth = known_answer(a, kind)
    out: Dict[str, Dict[str, float]] = {}
    sums = {r: {"normalised": 0.0, "covered": 0, "width": 0.0} for r in ("iris", "images")}
    for s in range(samples):
        x, y, ref_prime = draw(n, a, kind, g)
        for reading, acc in sums.items():
            cfg = CalibrationConfig(permutations=0, resamples=resamples, floor=reading, seed=s)
            cal = calibrate("linear_cka", x, [y], [float(linear_cka(x, y))], x, [ref_prime], None, cfg)
            acc["normalised"] += cal.normalised / samples
            acc["covered"] += int(cal.normalised_low <= truth <= cal.normalised_high)
            acc["width"] += (cal.normalised_high - cal.normalised_low) / samples
    for reading, acc in sums.items():
        out[reading] = {"normalised": acc["normalised"], "coverage": acc["covered"] / samples, "width": acc["width"]}
    out["truth"] = {"normalised": truth}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--resamples", type=int, default=100)
    parser.add_argument("--sizes", default="100,250,1000")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="10 samples, 50 resamples, n=100 (a smoke run)")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "bench_null"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(args.threads)
    if args.quick:
        args.samples, args.resamples, args.sizes = 10, 50, "100"
    sizes = [int(s) for s in args.sizes.split(",")]
    started = time.time()
    results: Dict[str, Dict[str, Dict]] = {}
    for label, (a, kind) in CASES.items():
        results[label] = {}
        for n in sizes:
            r = case(n, a, kind, args.samples, args.resamples, seed=n)
            results[label][str(n)] = r
            log.info("%s n=%d: known %.3f | iris %.3f cover %.2f | images %.3f cover %.2f", label, n,
                     r["truth"]["normalised"], r["iris"]["normalised"], r["iris"]["coverage"],
                     r["images"]["normalised"], r["images"]["coverage"])
    record = {"samples": args.samples, "resamples": args.resamples, "sizes": sizes, "seconds": time.time() - started,
              "torch": torch.__version__, "results": results, "command": " ".join(["python", *sys.argv])}
    write_text(Path(args.out + ".json"), json.dumps(record, indent=1) + "\n")
    lines = [f"# Normalised STIR against a known answer ({args.samples} samples per n, {args.resamples} half-samples, "
             "nominal 95%)", "",
             "| case | n | known | `iris` (default): mean | coverage | width | `images`: mean | coverage |",
             "|---|---|---|---|---|---|---|---|"]
    for label, by_n in results.items():
        for n, r in by_n.items():
            i, m = r["iris"], r["images"]
            lines.append(f"| {label} | {n} | {r['truth']['normalised']:.3f} | {i['normalised']:.3f} | {i['coverage']:.2f} | "
                         f"{i['width']:.3f} | {m['normalised']:.3f} | {m['coverage']:.2f} |")
    lines += ["", f"Command: `{record['command']}` ({record['seconds']:.0f} s, torch {torch.__version__})."]
    write_text(Path(args.out + ".md"), "\n".join(lines) + "\n")
    log.info("wrote %s.{json,md}", args.out)


if __name__ == "__main__":
    main()
