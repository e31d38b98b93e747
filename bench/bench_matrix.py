"""One matrix, N inversions: count the model evaluations an N x N STIR matrix really costs.

    PYTHONPATH=. python bench/bench_matrix.py               # N = 3 and 4, n = 32, k = 2, 20 faithful steps
    PYTHONPATH=. python bench/bench_matrix.py --quick       # N = 3, n = 8, k = 2, 5 steps (seconds)
    PYTHONPATH=. python bench/bench_matrix.py --calibrated  # calibrated, with the independent ceiling

Runs ``evaluate.py`` itself, in this process (the real Hydra entry point, ``open_context``, the
matrix experiment, the result store and the inversion cache), on N randomly initialised registered
ResNet18s (``stir.models.build``, width 4; zoo entries ``python:bench.bench_matrix:resnet18``, so
nothing is trained) and n CIFAR-10 training images (``data.source``: the local archive), with
arbitrary IRIs only (``iri=arbitrary``), the faithful mode and ``inversion.steps`` steps. Every
model carries a forward pre-hook that adds the batch size of each call to a counter, split by where
the call happens: inside the inversion's descent loop (``stir.descent.descend``) with gradients
(forward + backward of one iterate), inside it without (the last iterate's value), or outside it
(measurement passes: targets m(X), representations of X and X', residuals, the similarity).

What is counted is the published STIR alone, as the original code computes it: the calibration is
switched off (``calibration.ceiling=none``, no floor permutations, no bootstrap). With
``--calibrated`` (``calibrated=True``) evaluate.py's calibration is on with the ``independent``
ceiling (``calibration.ceiling=independent``), which inverts each reference once more, from seed
``inversion.seed + k``: k + 1 inversions per reference instead of k. The default ceiling
(``same_draws``) measures m1 on the k draws' X' and costs no inversion, like the floor (closed form
or permutations) and the interval.

The same matrix is run twice, in fresh output folders: with the inversion cache (what
``evaluate.py`` does by default: ``execution.cache_dir`` = ``out_dir/inversion-cache``) and with
the cache switched off in the context ``open_context`` returns (every ordered pair re-inverts its
reference, as the original code does). Counts are per image and iterate; the faithful loop
evaluates ``steps + 1`` iterates (the seed, then one after each step, the best kept; the last
without gradient), so one inversion of n images costs n (steps + 1) evaluations, n steps of them
with a backward pass. The engine's own count (``InversionResult.evaluations`` of the inversions
the rows computed) is summed beside the hooks' as a cross-check. Expected: N n k (steps + 1) with
the cache, N^2 n k (steps + 1) without (the diagonal, a model against itself, inverts too); k + 1
for k when calibrated. The example-IRI grid of the report (``iri_grid_images``, here = n, the same
images) is counted apart: it never inverts (it reads the X' the matrix put in the cache,
``stir.inversion.cached``; without a cache it is left out), so it costs no inversion evaluations.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import importlib.util
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # `python bench/bench_matrix.py`: the zoo's factory imports bench.bench_matrix
    sys.path.insert(0, str(REPO))

from stir.atomic import write_text  # noqa: E402

SOURCE = "/work/shared/data/cifar10-jpg.tar.gz"
OUT = Path(__file__).resolve().parent / "out"
FACTORY = "python:bench.bench_matrix:resnet18"
CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)

# (phase, kind) -> image evaluations, summed over models; kind: "step" (a call inside the inversion's
# descent loop with gradients: forward + backward of one iterate), "final" (inside the loop without
# gradient: the last iterate's value), "measurement" (every call outside the loop). Read it through
# counts_module(): run as a script this file is __main__, while the zoo's factory lives in
# bench.bench_matrix, a second copy of the module with its own globals.
COUNTS: Counter = Counter()
PHASE = ["matrix"]  # "matrix" (the rows) | "grid" (the report's example IRIs)
DESCENT = [False]  # inside stir.descent.descend (the inversion's optimisation)


def resnet18(seed: int = 0, width: int = 4, num_classes: int = 10) -> nn.Module:
    """A registered ResNet18 (random init from ``seed``, takes [0, 1] images) whose calls are counted."""
    from stir.config.schema import ModelConfig
    from stir.models import build

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        net = build(ModelConfig(arch="resnet18", width=width), num_classes, CIFAR_MEAN, CIFAR_STD)

    def count(module: nn.Module, inputs) -> None:
        kind = ("step" if torch.is_grad_enabled() else "final") if DESCENT[0] else "measurement"
        COUNTS[(PHASE[0], kind)] += int(inputs[0].shape[0])

    net.register_forward_pre_hook(count)
    return net


def counts_module():
    return importlib.import_module("bench.bench_matrix")


@contextlib.contextmanager
def _instrumented(entry, cache: bool) -> Iterator[Dict[str, int]]:
    """Attribute counts to the matrix rows or the example grid; sum the engine's own
    ``InversionResult.evaluations``; optionally switch the cache off in the context that
    ``entry`` (the loaded evaluate.py module) opens."""
    from stir.experiments import context, matrix  # evaluate.py imports open_context from context at each run
    from stir.inversion import engine as inversion_engine
    from stir.measure import direction

    mod = counts_module()
    engine = {"inversions": 0, "cache_hits": 0, "evaluations": 0}
    real = {"invert_draws": direction.invert_draws, "invert_adversarial_draws": direction.invert_adversarial_draws,
            "iri_examples": matrix.iri_examples, "open_context": context.open_context,
            "descend": inversion_engine.descend}

    def descend(*args, **kwargs):
        mod.DESCENT[0] = True
        try:
            return real["descend"](*args, **kwargs)
        finally:
            mod.DESCENT[0] = False

    def counted(name: str):
        def invert(*args, **kwargs):  # every draw of a direction in one call: count each draw
            runs = real[name](*args, **kwargs)
            for run in runs:
                engine["cache_hits" if run.from_cache else "inversions"] += 1
                engine["evaluations"] += 0 if run.from_cache else run.evaluations
            return runs
        return invert

    def examples(*args, **kwargs):
        mod.PHASE[0] = "grid"
        try:
            return real["iri_examples"](*args, **kwargs)
        finally:
            mod.PHASE[0] = "matrix"

    def open_context(*args, **kwargs):
        ctx = real["open_context"](*args, **kwargs)
        if not cache:  # evaluate.py always sets a cache (out_dir/inversion-cache): undo it here
            ctx.run = dataclasses.replace(ctx.run, cache_dir=None)
        return ctx

    direction.invert_draws = counted("invert_draws")
    direction.invert_adversarial_draws = counted("invert_adversarial_draws")
    matrix.iri_examples, context.open_context, inversion_engine.descend = examples, open_context, descend
    try:
        yield engine
    finally:
        direction.invert_draws = real["invert_draws"]
        direction.invert_adversarial_draws = real["invert_adversarial_draws"]
        matrix.iri_examples, context.open_context = real["iri_examples"], real["open_context"]
        inversion_engine.descend = real["descend"]


# evaluate.py's calibration switched off: the published STIR alone (no ceiling draw, floor or interval)
UNCALIBRATED = ["calibration.ceiling=none", "calibration.permutations=0", "calibration.resamples=0"]


def evaluate_args(workdir: Path, n_models: int, n: int, k: int, steps: int, data: Sequence[str],
                  verbose: bool = False, calibrated: bool = False) -> List[str]:
    names = [f"m{i}" for i in range(n_models)]
    return [
        f"zoo.file={workdir / 'zoo.yaml'}", "zoo.allow_code=true",  # our zoo file names python: models
        f"out_dir={workdir / 'results'}",
        # the matrix kind through one of its presets, with our models
        "experiment=relative_robustness", "experiment.name=bench_matrix", f"experiment.models=[{','.join(names)}]",
        "experiment.description=bench_matrix", "iri=arbitrary",
        f"n={n}", f"k={k}", "inversion.mode=faithful", f"inversion.steps={steps}", "min_fraction_iri=0",
        "execution.warn_below=0", f"iri_grid_images={n}", "device=cpu", "logger.wandb.mode=disabled",
        f"hydra/job_logging={'stdout' if verbose else 'none'}", *(["calibration.ceiling=independent"] if calibrated else UNCALIBRATED), *data,
    ]


def count_matrix(n_models: int, n: int, k: int, steps: int, *, width: int = 4, cache: bool = True,
                 data: Sequence[str] = (), workdir: Optional[Path] = None, verbose: bool = False,
                 calibrated: bool = False) -> Dict[str, float]:
    """Run ``evaluate.py`` on an n_models x n_models matrix; what it cost, counted at the models.

    ``data``: evaluate.py overrides that say where the images come from (data.source=..., data.root=...).
    ``verbose``: evaluate.py's own log (hydra/job_logging=stdout) instead of none (``none`` leaves logging as it
    is; ``disabled`` would disable every existing logger of the process, other tests' too).
    ``calibrated``: evaluate.py's default calibration (its ceiling inverts each reference once more)
    instead of the published STIR alone.
    Returns inversion / measurement evaluations of the matrix rows, those of the example grid, the
    engine's own count, inversions computed and cache hits, cache entries written, and seconds.
    """
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench_matrix_")))
        workdir.mkdir(parents=True, exist_ok=True)
        write_text(workdir / "zoo.yaml", "".join(
            f'm{i}: {{source: "{FACTORY}", normalize: false, kwargs: {{seed: {i}, width: {width}}}}}\n'
            for i in range(n_models)))
        mod = counts_module()
        mod.COUNTS.clear()
        spec = importlib.util.spec_from_file_location("stir_entry_evaluate", REPO / "evaluate.py")
        entry = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(entry)
        argv = sys.argv
        sys.argv = ["evaluate.py", *evaluate_args(workdir, n_models, n, k, steps, data, verbose, calibrated)]
        start = time.perf_counter()
        try:
            with _instrumented(entry, cache) as engine:
                entry.main()
        finally:
            sys.argv = argv
        seconds = time.perf_counter() - start
        cache_dir = workdir / "results" / "inversion-cache"
        entries = len(list(cache_dir.glob("*.pt"))) if cache_dir.is_dir() else 0
    c = mod.COUNTS
    return {
        "models": n_models, "n": n, "k": k, "steps": steps, "width": width, "cache": cache, "calibrated": calibrated,
        "inversion_evaluations": c[("matrix", "step")] + c[("matrix", "final")],
        "gradient_evaluations": c[("matrix", "step")], "measurement_evaluations": c[("matrix", "measurement")],
        "grid_inversion_evaluations": c[("grid", "step")] + c[("grid", "final")],
        "engine_evaluations": engine["evaluations"],
        "inversions": engine["inversions"], "cache_hits": engine["cache_hits"], "cache_entries": entries,
        "seconds": seconds,
    }


def formula(n_models: int, n: int, k: int, steps: int, pairs: bool = False, calibrated: bool = False) -> int:
    """N n k (steps + 1): one inversion per reference and draw; ``pairs``: N^2 n k (steps + 1) (every
    ordered pair inverts its reference); ``calibrated``: k + 1 draws (the ceiling's independent draw)."""
    draws = k + 1 if calibrated else k
    return (n_models ** 2 if pairs else n_models) * n * draws * (steps + 1)


def table(rows: List[Dict[str, Dict[str, float]]], calibrated: bool = False) -> str:
    draws, original = ("(k+1)", "") if calibrated else ("k", " (original)")
    head = (f"| N | n | k | steps | measured, cache (evaluate.py default) | N·n·{draws}·(steps+1) "
            f"| measured, no cache | N²·n·{draws}·(steps+1){original} | no cache / cache |")
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        a, b = r["cache"], r["no_cache"]
        N, n, k, s = a["models"], a["n"], a["k"], a["steps"]
        lines.append(f"| {N} | {n} | {k} | {s} | {a['inversion_evaluations']:,} "
                     f"| {formula(N, n, k, s, calibrated=calibrated):,} "
                     f"| {b['inversion_evaluations']:,} | {formula(N, n, k, s, pairs=True, calibrated=calibrated):,} "
                     f"| {b['inversion_evaluations'] / a['inversion_evaluations']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="N = 3, n = 8, k = 2, 5 steps")
    parser.add_argument("--models", default="3,4", help="matrix sizes N, comma-separated")
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--draws", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--width", type=int, default=4)
    parser.add_argument("--source", default=SOURCE, help="CIFAR-10 archive (data.source)")
    parser.add_argument("--data-root", default=str(OUT / "data"), help="where the decoded archive is cached")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (tiny nets: 1 is fastest)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--verbose", action="store_true", help="evaluate.py's own log too")
    parser.add_argument("--calibrated", action="store_true",
                        help="evaluate.py's default calibration (one more inversion per reference: the ceiling)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.quick:
        args.models, args.images, args.steps = "3", 8, 5
    data = [f"data.source={args.source}", f"data.root={args.data_root}"]
    rows = []
    for n_models in (int(m) for m in args.models.split(",")):
        row = {}
        for label, cache in (("cache", True), ("no_cache", False)):
            row[label] = count_matrix(n_models, args.images, args.draws, args.steps, width=args.width,
                                      cache=cache, data=data, verbose=args.verbose, calibrated=args.calibrated)
            r = row[label]
            print(f"N={n_models} {label}: {r['inversions']} inversions ({r['cache_hits']} cache hits, "
                  f"{r['cache_entries']} entries), {r['inversion_evaluations']} inversion evaluations "
                  f"({r['gradient_evaluations']} with gradient; engine: {r['engine_evaluations']}; example grid: "
                  f"{r['grid_inversion_evaluations']} more), {r['measurement_evaluations']} measurement evaluations, "
                  f"{r['seconds']:.1f} s", flush=True)
        rows.append(row)
    text = table(rows, args.calibrated)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    write_text(args.out / "bench_matrix.json", json.dumps(rows, indent=2))
    print(f"wrote {args.out / 'bench_matrix.json'}")


if __name__ == "__main__":
    main()
