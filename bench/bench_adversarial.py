"""Adversarial IRIs on two trained models: are they IRIs of m1, and how far do they move m2?

    python bench/bench_adversarial.py RUN_M1 RUN_M2 [--weights 0.1,1,3] [--images 64] [--steps 150]

RUN_M1 / RUN_M2 are run folders (or checkpoints) that ``train.py`` wrote. On ``--images`` real
CIFAR-10 test images at the penultimate tap, with the engine's fast mode and the given step budget:
arbitrary IRIs of m1 (the baseline), then adversarial IRIs (maximise r2 subject to r1 <= b, the
switching objective of ``stir.inversion.objectives``) for each push weight w. Reported per run: the
fraction of m1-IRIs (r1 <= tolerance), the median r1, the median relative distance r2 of m2, the
ratio of that r2 to the arbitrary IRIs' r2, and the linear CKA of m2 between X and X' (what
STIR_adv averages). Results go to the log and to ``bench/out/bench_adversarial.json``.
"""
from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import replace
from pathlib import Path

import torch

from stir.atomic import write_text
from stir.data import load_dataset, to_float
from stir.config.schema import DataConfig
from stir.inversion import InversionConfig, invert, invert_adversarial
from stir.models import representation
from stir.similarity import linear_cka
from stir.zoo.checkpoints import network

log = logging.getLogger("bench_adversarial")
SOURCE = "/work/shared/data/cifar10-jpg.tar.gz"
OUT = Path(__file__).resolve().parent / "out"
TAP = "penultimate"


def model_at(path: str) -> torch.nn.Module:
    """The network of a run folder or checkpoint (architecture from its files), eval mode, on the CPU."""
    return network(Path(path))


def figures(name: str, r, m2, x, baseline_r2=None) -> dict:
    with torch.no_grad():
        cka = linear_cka(representation(m2, x, TAP).double(), representation(m2, r.x_prime, TAP).double()).item()
    row = {"run": name, "fraction_iri": r.fraction_iri, "median_r1": r.residual.median().item(),
           "median_r2": r.m2_distance.median().item(), "cka_m2": cka}
    row["r2_vs_arbitrary"] = row["median_r2"] / baseline_r2 if baseline_r2 else 1.0
    log.info("%-16s IRIs %.2f  median r1 %.4f  median r2 %.3f (%.1fx arbitrary)  CKA(m2(X), m2(X')) %.3f",
             name, row["fraction_iri"], row["median_r1"], row["median_r2"], row["r2_vs_arbitrary"], cka)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("m1")
    parser.add_argument("m2")
    parser.add_argument("--weights", default="0.1,1,3")
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--source", default=SOURCE)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--quick", action="store_true", help="8 images, 20 steps, weight 1 only: a smoke test")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.quick:
        args.images, args.steps, args.weights = 8, 20, "1"
    if args.threads:
        torch.set_num_threads(args.threads)

    data = load_dataset(DataConfig(name="cifar10", source=args.source, root="data", num_classes=10))
    g = torch.Generator().manual_seed(0)
    x = to_float(data.test_images[torch.randperm(len(data.test_images), generator=g)[: args.images]])
    m1, m2 = model_at(args.m1), model_at(args.m2)
    cfg = InversionConfig(mode="fast", steps=args.steps)  # the figures of docs/benchmarks/adversarial.md were measured in fast mode

    start = time.perf_counter()
    arbitrary = invert(m1, x, TAP, cfg, m2=m2)
    rows = [figures("arbitrary", arbitrary, m2, x) | {"seconds": time.perf_counter() - start}]
    base = rows[0]["median_r2"]
    for w in (float(v) for v in args.weights.split(",")):
        start = time.perf_counter()
        adv = invert_adversarial(m1, m2, x, TAP, cfg=replace(cfg, adversarial_weight=w))
        rows.append(figures(f"adversarial w={w:g}", adv, m2, x, base) | {"seconds": time.perf_counter() - start})
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "bench_adversarial.json"
    write_text(out, json.dumps({"m1": args.m1, "m2": args.m2, "images": args.images, "steps": args.steps,
                                "tolerance": cfg.tolerance, "rows": rows}, indent=2))
    log.info("wrote %s", out)


if __name__ == "__main__":
    main()
