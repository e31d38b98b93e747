"""Faithful inversion at engineering speed: each lever's share, and the STIR it gives (issue 12).

    python bench/bench_levers.py --pair A_RUN,B_RUN [--pair ...] [--images 128] [--draws 2] [--threads 2]
    python bench/bench_levers.py --quick --pair A_RUN,B_RUN        # 32 images, 100 steps, ~1 min

The baseline is a plain re-implementation of the published update, written here from its
description (no stir inversion code): per seed draw, one batch of all n images, the full forward
pass to the logits with the penultimate representation read by a forward hook (as the original
reads its latent), loss mean_i ||m(x'_i) - m(x_i)|| / ||m(x_i)||, the model reading clamp(x', 0, 1)
with the gradient passed inside [0, 1], x' <- clamp(x' - 0.5 g_i / (||g_i|| + 1e-10), 0, 1),
strictly better iterates kept, FakeReLU on layer4's output ReLUs by straight-through hooks.

Part 1, speed (``--time-steps`` steps of k draws of n images, the same model; variants run in turn,
each ``--repeats`` times, interleaved; median seconds): every lever is added to the one before,

    plain                    the baseline above
    engine, forward to tap   stir's engine with no lever: one draw at a time, batch = n, BN unfolded, NCHW
    + draws in one call      ``invert_draws``: the k draws as one batch of n k images
    + automatic batch        ``execution.batch_size=None``: 128-image chunks on CPU
    + folded batch norm      ``inversion.fold_batch_norm=True``
    + channels-last          ``execution.channels_last=True``
    + torch.compile          ``execution.compile=True`` (opt-in), its compilation included
    channels-last, 1 thread  the same with ``torch.set_num_threads(1)`` (the threads lever)
    + kept CPU memory        ``execution.keep_cpu_memory=True`` (``stir.allocator``): the shipped default
    plain, kept CPU memory   the baseline with that process-wide allocator setting too
    default, bf16 autocast   ``inversion.precision=bf16``: NOT the published estimator (another rounding
                             regime); timed to say what it would buy, its STIR gap measured by ``--bf16``

and the x' of the exact levers (draws in one call, automatic batch) is compared bit for bit.

Part 2, value (``--steps`` steps, default 1000, both directions of every ``--pair``): the plain
baseline, the same baseline in channels-last memory (the same arithmetic in another order: how much
the published procedure itself moves with floating-point rounding) and the shipped default, all
from the same seeds; STIR (linear CKA at the penultimate tap of the other model) and the median
residual at steps 100, 250, 500 and the end, the drifts (default - plain, plain in channels-last -
plain) and the spread of the plain value over the seed draws. With ``--bf16`` also the default under
bf16 autocast (``inversion.precision=bf16``), and its drift from the plain baseline. Written to ``bench/out/bench_levers.json`` and ``bench/out/bench_levers.md``.
"""
from __future__ import annotations

import argparse
import copy
import json
import logging
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Dict, List, Sequence

import torch
from torch import Tensor, nn

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `python bench/bench_levers.py`: bench.bench_cost's network builder
    sys.path.insert(0, str(REPO))

from bench.bench_cost import network as random_network  # noqa: E402
from bench.bench_estimators import SOURCE, TAP, model_at, stir_of  # noqa: E402  (the same models and STIR)
from stir.atomic import write_text  # noqa: E402
from stir.config.schema import DataConfig  # noqa: E402
from stir.data import load_dataset, to_float
from stir.inversion import ExecutionConfig, InversionConfig, invert, invert_draws, make_seed, seed_generator
from stir.models import frozen, representation
from stir.reporting import to_markdown

log = logging.getLogger("bench_levers")
OUT = Path(__file__).resolve().parent / "out"
RECORD = (100, 250, 500)


# -- the baseline: the published update, plainly ---------------------------------------------------


def plain_inversion(m: nn.Module, x: Tensor, seeds: Tensor, steps: int, record: Sequence[int] = (),
                    channels_last: bool = False) -> Dict[int, Tensor]:
    """The published inversion of one draw; {t: best iterates among steps 0..t} for t in record + (steps,).

    ``channels_last``: the same computation in channels-last memory (a copy of ``m``): the same
    arithmetic in another order, i.e. the baseline's own sensitivity to floating-point rounding.
    """
    if channels_last:
        m = copy.deepcopy(m).to(memory_format=torch.channels_last)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    latent: Dict[str, Tensor] = {}
    pool = m.get_submodule("pool")  # the penultimate representation, read as the original reads its latent
    hooks = [pool.register_forward_hook(lambda _m, _i, out: latent.__setitem__("rep", out))]
    for site in getattr(m, "fake_relu_sites", ()):  # FakeReLU: value relu(x), gradient identity
        hooks.append(m.get_submodule(site).register_forward_hook(lambda _m, i, out: i[0] + (out - i[0]).detach()))

    def rep(v: Tensor) -> Tensor:
        m(v.contiguous(memory_format=fmt))  # the full forward pass, to the logits
        return latent["rep"].flatten(1)

    wanted, kept = set(record) | {steps}, {}
    try:
        with frozen(m):
            with torch.no_grad():
                target = rep(x)
            best_x, best_loss = None, None
            cur = seeds.clone()
            for t in range(steps + 1):
                cur = cur.detach().requires_grad_(t < steps)
                with torch.set_grad_enabled(t < steps):
                    inside = (cur >= 0) & (cur <= 1)
                    seen = torch.where(inside, cur, cur.clamp(0, 1).detach())  # gradient passed inside [0, 1]
                    losses = (rep(seen) - target).norm(dim=1) / target.norm(dim=1)
                if best_loss is None:
                    best_x, best_loss = cur.detach().clone(), losses.detach().clone()
                else:
                    better = losses.detach() < best_loss
                    best_x[better], best_loss[better] = cur.detach()[better], losses.detach()[better]
                if t in wanted:
                    kept[t] = best_x.clamp(0, 1)
                if t == steps:
                    break
                (g,) = torch.autograd.grad(losses.mean(), cur)
                g_norm = g.flatten(1).norm(dim=1).view(-1, 1, 1, 1)
                cur = (cur - 0.5 * g / (g_norm + 1e-10)).clamp(0, 1)
    finally:
        for h in hooks:
            h.remove()
    return kept


def seeds_of(x: Tensor, draw: int) -> Tensor:
    """The seeds the engine draws for draw j (``inversion.seed + j`` with base seed 0)."""
    return make_seed("normal", x, seed_generator(draw))


# -- part 1: speed ----------------------------------------------------------------------------------


def speed(m: nn.Module, x: Tensor, draws: int, steps: int, repeats: int, threads: int) -> List[Dict]:
    """Part 1: median seconds of every variant (module docstring), each lever added to the one before."""
    # Each variant is (the estimator's InversionConfig, how it runs: ExecutionConfig); only
    # fold_batch_norm and precision are the estimator's, every other lever is execution.
    unfolded, folded = (InversionConfig(steps=steps, record_steps=(), fold_batch_norm=f) for f in (False, True))
    none = ExecutionConfig(warn_below=0.0, keep_cpu_memory=False, channels_last=False, batch_size=x.shape[0])
    joint = replace(none, batch_size=x.shape[0] * draws)
    auto = replace(none, batch_size=None)
    layout = replace(auto, channels_last=True)
    compiled = replace(layout, compile=True)  # compiles anew in every call (new working copies): timed with it
    shipped = replace(layout, keep_cpu_memory=True)

    def engine(cfg: InversionConfig, run: ExecutionConfig) -> Callable[[], List[Tensor]]:
        return lambda: [r.x_prime for r in invert_draws(m, [x] * draws, TAP, cfg, run=run)]

    plain = lambda: [plain_inversion(m, x, seeds_of(x, j), steps)[steps] for j in range(draws)]  # noqa: E731
    # glibc's allocator setting is process-wide and cannot be undone: every variant without it runs
    # first (phase 1), then the default and, for fairness, the plain baseline with it (phase 2).
    phases = [{
        "plain": plain,
        "engine, forward to tap": lambda: [invert(m, x, TAP, replace(unfolded, seed=j), run=none).x_prime
                                           for j in range(draws)],
        "+ draws in one call": engine(unfolded, joint),
        "+ automatic batch": engine(unfolded, auto),
        "+ folded batch norm": engine(folded, auto),
        "+ channels-last": engine(folded, layout),
        "+ torch.compile (opt-in)": engine(folded, compiled),
        "channels-last, 1 thread": engine(folded, layout),
    }, {
        "+ kept CPU memory (default)": engine(folded, shipped),
        "plain, kept CPU memory": plain,
        "default, bf16 autocast (another estimator)": engine(replace(folded, precision="bf16"), shipped),
    }]
    chain = ["plain", "engine, forward to tap", "+ draws in one call", "+ automatic batch", "+ folded batch norm",
             "+ channels-last", "+ kept CPU memory (default)"]
    times: Dict[str, List[float]] = {}
    outputs: Dict[str, List[Tensor]] = {}
    for phase in phases:
        for _ in range(repeats):
            for name, run in phase.items():
                torch.set_num_threads(1 if name.endswith("1 thread") else threads)
                start = time.perf_counter()
                outputs[name] = run()
                times.setdefault(name, []).append(time.perf_counter() - start)
                log.info("  %-30s %7.2f s", name, times[name][-1])
    torch.set_num_threads(threads)

    def median(name: str) -> float:
        return statistics.median(times[name])

    def max_diff(a: str, b: str) -> str:
        return f"{max((p - q).abs().max().item() for p, q in zip(outputs[a], outputs[b])):.1e}"

    rows = []
    for name in [v for phase in phases for v in phase]:
        before = chain[chain.index(name) - 1] if name in chain[1:] else None
        if name == "+ torch.compile (opt-in)":
            before = "+ channels-last"
        if name.startswith("default, bf16"):
            before = "+ kept CPU memory (default)"
        rows.append({
            "variant": name, "seconds": round(median(name), 2), "speedup_vs_plain": round(median("plain") / median(name), 2),
            "lever_share": round(median(before) / median(name), 2) if before else "",
            "max_abs_x_diff_vs_previous": max_diff(before, name) if before else "",
        })
    return rows


# -- part 2: value ----------------------------------------------------------------------------------


def residual_of(m1: nn.Module, x: Tensor, x_prime: Tensor) -> float:
    with frozen(m1), torch.no_grad():
        t = representation(m1, x, TAP)
        return ((representation(m1, x_prime, TAP) - t).norm(dim=1) / t.norm(dim=1)).median().item()


def value(m1: nn.Module, m2: nn.Module, x: Tensor, draws: int, steps: int, bf16: bool = False) -> List[Dict]:
    """STIR(m2|m1) along the budget from the same seeds: the plain baseline, the baseline in
    channels-last memory (its own rounding sensitivity), the shipped default and, with ``bf16``,
    the default under bf16 autocast (another estimator)."""
    record = tuple(s for s in RECORD if s < steps)
    cfg, run = InversionConfig(steps=steps, record_steps=record), ExecutionConfig(warn_below=0.0)

    def engine(c: InversionConfig) -> List[Dict[int, Tensor]]:
        return [{t: r.snapshots[t] for t in record + (steps,)} for r in invert_draws(m1, [x] * draws, TAP, c, run=run)]

    start = time.perf_counter()
    shipped = engine(cfg)
    t_shipped = time.perf_counter() - start
    start = time.perf_counter()
    plain = [plain_inversion(m1, x, seeds_of(x, j), steps, record) for j in range(draws)]
    t_plain = time.perf_counter() - start
    rounding = [plain_inversion(m1, x, seeds_of(x, j), steps, record, channels_last=True) for j in range(draws)]
    start = time.perf_counter()
    half = engine(replace(cfg, precision="bf16")) if bf16 else None
    t_half = time.perf_counter() - start
    rows = []
    for t in record + (steps,):
        per_draw = [stir_of(m2, x, p[t]) for p in plain]
        s_plain = statistics.mean(per_draw)
        s_round = statistics.mean(stir_of(m2, x, p[t]) for p in rounding)
        s_ship = statistics.mean(stir_of(m2, x, p[t]) for p in shipped)
        row = {
            "steps": t,
            "stir_plain": round(s_plain, 4),
            "stir_plain_channels_last": round(s_round, 4),
            "stir_default": round(s_ship, 4),
            "drift_default": round(s_ship - s_plain, 4),
            "drift_plain_rounding": round(s_round - s_plain, 4),
            "seed_spread_plain": round(max(per_draw) - min(per_draw), 4),
            "residual_plain": round(statistics.mean(residual_of(m1, x, p[t]) for p in plain), 4),
            "residual_default": round(statistics.mean(residual_of(m1, x, p[t]) for p in shipped), 4),
        }
        if half is not None:
            s_half = statistics.mean(stir_of(m2, x, p[t]) for p in half)
            row.update(stir_bf16=round(s_half, 4), drift_bf16=round(s_half - s_plain, 4),
                       residual_bf16=round(statistics.mean(residual_of(m1, x, p[t]) for p in half), 4))
        rows.append(row)
    rows[-1]["seconds_plain"], rows[-1]["seconds_default"] = round(t_plain, 1), round(t_shipped, 1)
    if half is not None:
        rows[-1]["seconds_bf16"] = round(t_half, 1)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pair", action="append", required=True, help="RUN_A,RUN_B (both directions are measured)")
    parser.add_argument("--images", type=int, default=128)
    parser.add_argument("--draws", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1000, help="part 2's budget")
    parser.add_argument("--time-steps", type=int, default=50, help="part 1's budget")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-value", action="store_true", help="part 1 only")
    parser.add_argument("--skip-speed", action="store_true", help="part 2 only")
    parser.add_argument("--one-way", action="store_true", help="part 2: only STIR(B|A) of each pair A,B")
    parser.add_argument("--speed-width", type=int, default=None,
                        help="part 1 on a ResNet18 of this width (random weights, batch norms not the identity) "
                             "instead of the first run's model: the cost does not depend on training")
    parser.add_argument("--bf16", action="store_true",
                        help="part 2: also the default under bf16 autocast (another estimator) and its drift")
    parser.add_argument("--quick", action="store_true", help="32 images, 100 steps, 20 timed steps, 1 repeat")
    parser.add_argument("--source", default=SOURCE)
    parser.add_argument("--root", default="data")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.quick:
        args.images, args.steps, args.time_steps, args.repeats = 32, 100, 20, 1
    torch.set_num_threads(args.threads)

    data = load_dataset(DataConfig(name="cifar10", source=args.source, root=args.root, num_classes=10))
    order = torch.randperm(len(data.train_images), generator=torch.Generator().manual_seed(0))
    x = to_float(data.train_images[order[: args.images]])
    first = args.pair[0].split(",")[0]
    log.info("speed: IRIs of %s, %d images x %d draws, %d steps, %d threads",
             first if args.speed_width is None else f"ResNet18 width {args.speed_width}", args.images, args.draws,
             args.time_steps, args.threads)
    timed = model_at(first) if args.speed_width is None else random_network(args.speed_width)
    speed_rows = [] if args.skip_speed else speed(timed, x, args.draws, args.time_steps, args.repeats, args.threads)
    value_rows = []
    if not args.skip_value:
        for pair in args.pair:
            a, b = pair.split(",")
            models = {a: model_at(a), b: model_at(b)}
            for ref, tgt in ((a, b),) if args.one_way else ((a, b), (b, a)):
                label = f"STIR({Path(tgt).parent.name}/{Path(tgt).name} | {Path(ref).parent.name}/{Path(ref).name})"
                log.info("value: %s, %d images, %d draws, %d steps", label, args.images, args.draws, args.steps)
                for row in value(models[ref], models[tgt], x, args.draws, args.steps, args.bf16):
                    value_rows.append({"direction": label, **row})
                    log.info("  %s", row)
    args.out.mkdir(parents=True, exist_ok=True)
    settings = {"pairs": args.pair, "bf16": args.bf16, "speed_width": args.speed_width, "images": args.images, "draws": args.draws, "steps": args.steps,
                "time_steps": args.time_steps, "threads": args.threads, "torch": torch.__version__}
    write_text(args.out / "bench_levers.json", json.dumps({**settings, "speed": speed_rows, "value": value_rows}, indent=2))
    md = f"settings: {json.dumps(settings)}\n\n" + "\n\n".join(to_markdown(rows) for rows in (speed_rows, value_rows) if rows)
    write_text(args.out / "bench_levers.md", md)
    if speed_rows:
        print(to_markdown(speed_rows))
    if value_rows:
        print(to_markdown(value_rows))


if __name__ == "__main__":
    main()
