"""Optimiser independence of STIR at IRIs (issue 53): two IRI solvers from the same seeds, one pair.

For a reference m1 and a target m2 of the shipped zoo (default ``r20`` | ``r20_b``, the real ResNet20
seed pair), the same n images and the same k N(0, 1) seed draws, STIR(m2|m1) at IRIs
(``stir.measure.at_iris``, each draw on the images whose X' reached the level) with two solvers:

* ``smoothed``: the IRI solver's default (a softplus-homotopy smoothing phase, then x = sigmoid(z),
  plateau Adam, the raising surrogate);
* ``plain``: the same descent without the smoothing phase (``smooth_share=0``): another path from the
  same seeds, which reaches the level on ``r20`` and ``vgg16`` too;
* ``fixed``: the smoothing phase with fixed targets m1(x) (``smooth_target="fixed"``, the default before
  tracked targets);
* ``box``: projected plateau Adam on x in [0, 1], r1's true gradient (no surrogate; stalls near r1 0.11).

Reported: each solver's value per draw, the gap per draw, its mean with the standard error over
draws, and beside it the seed-draw spread (the sd over draws of one solver's value): where the gap
is within the seed-draw spread, the value does not depend on the optimiser beyond the seed.

    python bench/bench_iri_stir.py --ref r20 --target r20_b --images 32 --draws 3
    python bench/bench_iri_stir.py --solvers plain & python bench/bench_iri_stir.py --solvers smoothed  # two processes
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_iri import OUT, TAP, context  # noqa: E402
from stir.atomic import write_json  # noqa: E402
from stir.inversion.iri import IRIConfig  # noqa: E402
from stir.measure.at_iris import stir_at_iris  # noqa: E402

log = logging.getLogger("bench_iri_stir")
SOLVERS = {"smoothed": IRIConfig(), "plain": IRIConfig(smooth_share=0), "fixed": IRIConfig(smooth_target="fixed"),
           "box": IRIConfig(reparam="box", surrogate="off", lr=0.03, smooth_share=0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ref", default="r20")
    parser.add_argument("--target", default="r20_b")
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--level", type=float, default=0.005)
    parser.add_argument("--solvers", nargs="+", default=["smoothed", "plain"], help="run these (the gap is between the "
                        "first two of --gap; two processes write their rows to --out and a run of both, or --combine, reads them)")
    parser.add_argument("--gap", nargs=2, default=["smoothed", "plain"])
    parser.add_argument("--combine", action="store_true", help="only read --out's solver rows and report the gap")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=OUT / "bench_iri_stir.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(args.threads)
    key = f"{args.target}|{args.ref}|n={args.images}|k={args.draws}|level={args.level}"
    stored = json.loads(args.out.read_text()) if args.out.exists() else {}
    rows = stored.get(key, {})
    if not args.combine:
        ctx = context(args.images)
        ref, target = ctx.model(args.ref), ctx.model(args.target)
        x = ctx.images(ref)
        for name in args.solvers:
            start = time.perf_counter()
            cfg = IRIConfig(**{**SOLVERS[name].__dict__, "target": args.level})
            r = stir_at_iris(ref.module.eval(), target.module.eval(), x, TAP, cfg=cfg, k=args.draws,
                             names=(args.ref, args.target))
            rows[name] = {"values": r.values, "se": r.se, "reached": r.reached, "median_residual": r.median_residual,
                          "evaluations": r.evaluations, "value": r.value, "spread": r.spread,
                          "seconds": time.perf_counter() - start}
            log.info("%s: %s", name, json.dumps(rows[name]))
            stored = json.loads(args.out.read_text()) if args.out.exists() else {}  # another process's rows
            stored.setdefault(key, {})[name] = rows[name]
            args.out.parent.mkdir(parents=True, exist_ok=True)
            write_json(args.out, stored)
        rows = stored[key]
    if set(args.gap) <= set(rows):
        gaps = torch.tensor(rows[args.gap[0]]["values"]) - torch.tensor(rows[args.gap[1]]["values"])
        summary = {"pair": key, "gaps": gaps.tolist(), "gap": float(gaps.mean()),
                   "gap_se": float(gaps.std() / len(gaps) ** 0.5) if len(gaps) > 1 else float("nan"),
                   "seed_spread": {k: v["spread"] for k, v in rows.items()}}
        log.info("gap: %s", json.dumps(summary))


if __name__ == "__main__":
    main()
