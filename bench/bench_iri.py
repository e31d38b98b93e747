"""Benchmark: inversions that reach the IRI tolerance on the shipped zoo (issue 53).

On shipped models as m1 (the laptop profile's ``vanilla``, ``at``, ``vgg16``; the real ResNet20 ``r20``), the
same n CIFAR-10 test images evaluate.py would pick (``image_seed`` 0) and the same N(0, 1) seeds
(``inversion.seed`` 0), at the paper's tap ("penultimate"):

* ``published``: the published procedure (1000 fixed steps of 0.5, FakeReLU on ResNet18's last stage);
* ``continue_fake`` / ``continue_true``: ``inversion.continue_steps`` steps after it, with FakeReLU kept (the
  continuation before issue 53) and off (after); ``continue_iri``: the IRI solver's descent (x = sigmoid(z),
  plateau Adam, r1's true gradient: no surrogate, no smoothing phase) from the published x' instead, each image
  stopped at 0.9 of the tolerance as the continuation is;
* ``iri``: the IRI solver (``stir.inversion.iri.solve_iri``) at its defaults or the settings ``--iri key=value``
  give, each image stopped at ``--target``; an image still above it after its try is tried again from the
  retry draws ``retry_generator(0, a)`` within the batch's budget (``from_a_retry``: X' kept from one).

Reported per run: the fraction of X' within 0.02, within the target, the median r1, the model
evaluations (one per image and iterate, the engine's count) and the wall time. Results go to the log
and ``bench/out/bench_iri.json``; the table is docs/benchmarks/iri.md.

    python bench/bench_iri.py --models vanilla --images 32 --runs published continue_fake continue_true
    python bench/bench_iri.py --models vanilla at vgg16 r20 --images 32 --runs published iri
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

import torch
from torch import Tensor

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from stir.atomic import write_json  # noqa: E402
from stir.descent import HalvingLengthStep, descend  # noqa: E402
from stir.inversion import ExecutionConfig, InversionConfig, invert, make_seed, seed_generator  # noqa: E402
from stir.inversion.batching import working_model  # noqa: E402
from stir.inversion.iri import IRIConfig, solve_iri  # noqa: E402
from stir.inversion.seeds import retry_generator  # noqa: E402
from stir.inversion.objectives import Forward, InversionObjective, make_term, relative_distance  # noqa: E402
from stir.models import frozen  # noqa: E402
from stir.models.fake_relu import fake_relu  # noqa: E402

log = logging.getLogger("bench_iri")
OUT = REPO / "bench" / "out"
TAP = "penultimate"
SOURCE = "/work/shared/data/cifar10-jpg.tar.gz"
TOLERANCE = 0.02


def context(n: int):
    """evaluate.py's context at profile=laptop (the shipped zoo, its image choice) for n images."""
    from hydra import compose, initialize_config_dir

    from stir.experiments.config import evaluate_config
    from stir.experiments.context import open_context
    from stir.experiments.schema import register_evaluate_configs

    register_evaluate_configs()
    with initialize_config_dir(config_dir=str(REPO / "configs" / "evaluate"), version_base="1.3"):
        cfg = compose("evaluate", overrides=["profile=laptop", f"data.source={SOURCE}", f"n={n}"])
    config, experiment = evaluate_config(cfg)
    return open_context(config, experiment, repo=REPO)


def figures(name: str, model: str, residual: Tensor, evaluations: int, seconds: float, target: float) -> Dict:
    r = residual.detach().float().cpu()
    return {"model": model, "run": name, "n": r.numel(), "within_tol": float((r <= TOLERANCE).float().mean()),
            "within_target": float((r <= target).float().mean()), "median_r1": float(r.median()),
            "p90_r1": float(r.quantile(0.9)), "evaluations_per_image": evaluations / r.numel(), "seconds": seconds}


def published(m1, x: Tensor, run: ExecutionConfig):
    start = time.perf_counter()
    result = invert(m1, x, TAP, InversionConfig(), run=run)
    return result, time.perf_counter() - start


def continuation(m1, x: Tensor, origin: Tensor, steps: int, fake: bool) -> tuple:
    """The continuation's descent (HalvingLengthStep from 0.25, patience 20, stop at 0.9 * tolerance)
    from the published x', FakeReLU kept (the continuation before issue 53) or off (after)."""
    forward = Forward(channels_last=True)
    with frozen(m1):
        work = working_model(m1, TAP, True, False, True)
        objective = InversionObjective(make_term(work, TAP, x, forward), forward)
        start = time.perf_counter()
        with fake_relu(work, enabled="published" if fake else "off"):
            out = descend(objective, origin, HalvingLengthStep(0.25, 20, 0.5), steps, keep_best=True, x_init=origin,
                          stop=lambda loss, index: loss <= 0.9 * TOLERANCE)
        seconds = time.perf_counter() - start
        residual = relative_distance(m1, TAP, out.x.clamp(0, 1), x)
    return residual, out.evaluations, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["vanilla"])
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--runs", nargs="+", default=["published", "iri"])
    parser.add_argument("--continue-steps", type=int, default=2000)
    parser.add_argument("--target", type=float, default=0.005)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=OUT / "bench_iri.json")
    parser.add_argument("--iri", nargs="*", default=[], help="IRIConfig fields as key=value (the solver's settings)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(args.threads)
    ctx = context(args.images)
    run = ExecutionConfig(cache_dir=str(OUT / "iri-cache"), warn_below=0.0, progress=False)
    rows: List[Dict] = []
    for name in args.models:
        model = ctx.model(name)
        m1, x = model.module.eval(), ctx.images(model)
        pub = None
        for what in args.runs:
            if what in ("published", "continue_fake", "continue_true", "continue_iri") and pub is None:
                pub, pub_seconds = published(m1, x, run)
            if what == "published":
                rows.append(figures(what, name, pub.residual, pub.evaluations, pub_seconds, args.target))
            elif what == "continue_iri":  # the IRI solver's descent (no smoothing phase) from the published x'
                start = time.perf_counter()
                fields = {k: _parse(v) for k, v in (kv.split("=", 1) for kv in args.iri)}
                cfg = IRIConfig(**{"surrogate": "off", **fields, "steps": args.continue_steps, "smooth_share": 0,
                                   "target": 0.9 * TOLERANCE, "seed_map": "clamp", "retries": 0})
                # the engine's continuation: r1's true gradient from the published x' (an image: clamp), one try
                out = solve_iri(m1, TAP, x, pub.x_prime, cfg)
                rows.append(figures(what, name, out.residual, pub.evaluations + out.evaluations,
                                    pub_seconds + time.perf_counter() - start, args.target))
            elif what.startswith("continue_"):
                residual, evals, seconds = continuation(m1, x, pub.x_prime, args.continue_steps, what == "continue_fake")
                rows.append(figures(what, name, residual, pub.evaluations + evals, pub_seconds + seconds, args.target))
            elif what == "iri":
                fields = {k: _parse(v) for k, v in (kv.split("=", 1) for kv in args.iri)}
                cfg = IRIConfig(**fields, target=args.target)
                seeds = make_seed("normal", x, seed_generator(0))
                start = time.perf_counter()
                out = solve_iri(m1, TAP, x, seeds, cfg, redraw=lambda a: make_seed("normal", x, retry_generator(0, a)))
                row = figures(what, name, out.residual, out.evaluations, time.perf_counter() - start, args.target)
                row["settings"] = fields
                row["from_a_retry"] = int((out.tries > 0).sum())  # X' kept from a fresh draw (IRIConfig.retries)
                rows.append(row)
            else:
                raise SystemExit(f"unknown run {what!r}: published, continue_fake, continue_true, continue_iri or iri")
            log.info("%s", json.dumps(rows[-1]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(args.out.read_text()) if args.out.exists() else []
    write_json(args.out, old + rows)


def _parse(value: str):
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


if __name__ == "__main__":
    main()
