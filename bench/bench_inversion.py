"""Benchmark of the inversion engine: faithful (published) mode against fast mode.

On one small CIFAR network (ResNet18 at width 16, trained briefly here and cached under
``bench/out/``) and the same 64 real CIFAR-10 test images, at the paper's tap ("penultimate"):

1. faithful mode, 1000 steps (the published procedure);
2. fast mode (the engine's defaults).

Reported: the median relative residual each reaches, the model evaluations and the wall time each
needs to reach the faithful mode's final median residual, IRIs per second, and the ratios.
Results go to the log and to ``bench/out/bench_inversion.json``.

    python bench/bench_inversion.py --threads 1                  # ~8 min on one CPU core (+5 min training once)
    python bench/bench_inversion.py --threads 1 --alternatives   # + the methods fast mode was chosen from (~12 min)
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from stir.atomic import torch_save, write_text
from stir.config.schema import DataConfig, ModelConfig
from stir.data import augment_batch, load_dataset, to_float
from stir.descent import Adam, Constant, Cosine, InverseTime, ScheduledLengthStep, descend
from stir.inversion import ExecutionConfig, InversionConfig, InversionResult, invert, make_seed, seed_generator
from stir.inversion.objectives import Forward, InversionObjective, make_term
from stir.models import build, frozen
from stir.models.normalize import CIFAR10_MEAN, CIFAR10_STD

log = logging.getLogger("bench_inversion")

SOURCE = "/work/shared/data/cifar10-jpg.tar.gz"
OUT = Path(__file__).resolve().parent / "out"
TAP = "penultimate"
RUN = ExecutionConfig()  # how both modes run: the shipped execution defaults (automatic batch, channels-last)


def load_data(source: str, root: Path):
    """The CIFAR-10 JPEG archive through the data layer (decoded once, cached under ``root``)."""
    return load_dataset(DataConfig(name="cifar10", source=source, root=str(root), num_classes=10))


def bench_images(data, n: int) -> Tensor:
    """(n, 3, 32, 32) float test images in [0, 1], class-balanced: image k of each class in turn."""
    labels = data.test_labels
    per_class = [torch.nonzero(labels == c).flatten() for c in range(data.num_classes)]
    order = torch.stack([idx[: math.ceil(n / data.num_classes)] for idx in per_class], dim=1).flatten()[:n]
    return to_float(data.test_images[order])


def trained_model(data, width: int, train_size: int, epochs: int, path: Path) -> torch.nn.Module:
    """ResNet18 at ``width``, trained ``epochs`` on ``train_size`` training images (cached at ``path``)."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = build(ModelConfig("resnet18", width), 10, CIFAR10_MEAN, CIFAR10_STD)
    if path.exists():
        model.load_state_dict(torch.load(path, weights_only=True))
        return model.eval()
    gen = torch.Generator().manual_seed(0)
    idx = torch.randperm(len(data.train_labels), generator=gen)[:train_size]
    x_all, y_all = data.train_images[idx], data.train_labels[idx]
    steps_per_epoch = math.ceil(train_size / 128)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4, nesterov=True)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=epochs * steps_per_epoch)
    start = time.perf_counter()
    model.train()
    for epoch in range(epochs):
        perm = torch.randperm(train_size, generator=gen)
        for i in range(steps_per_epoch):
            b = perm[i * 128:(i + 1) * 128]
            x = to_float(augment_batch(x_all[b], gen))
            loss = F.cross_entropy(model(x), y_all[b])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
        log.info("epoch %d: loss %.3f (%.0f s)", epoch, loss.item(), time.perf_counter() - start)
    model.eval()
    with torch.no_grad():
        acc = (model(to_float(data.test_images[:2000])).argmax(1) == data.test_labels[:2000]).float().mean().item()
    log.info("trained ResNet18-w%d on %d images, %d epochs, in %.0f s: test accuracy %.3f",
             width, train_size, epochs, time.perf_counter() - start, acc)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch_save(model.state_dict(), path)
    return model


def test_accuracy(model, data, n: int = 2000) -> float:
    with torch.no_grad():
        return (model(to_float(data.test_images[:n])).argmax(1) == data.test_labels[:n]).float().mean().item()


# -- measuring a run ---------------------------------------------------------------------------------


def best_so_far(history: Tensor) -> Tensor:
    """(T + 1, n) objective history, NaN once an image stopped -> (T + 1, n) running minimum."""
    return torch.fmin(history, torch.full_like(history, float("inf"))).cummin(0).values


def first_reach(history: Tensor, target: float) -> Optional[int]:
    """First iterate t at which the median over images of the best residual so far is <= target."""
    hit = (best_so_far(history).median(dim=1).values <= target).nonzero()
    return int(hit[0]) if len(hit) else None


def evaluations_until(history: Tensor, t: int) -> int:
    """Model evaluations spent on iterates 0..t (one per image still running at each)."""
    return int((~history[: t + 1].isnan()).sum())


@dataclass
class Figures:
    name: str
    median_residual: float  # fp32, at the returned x'
    max_residual: float
    fraction_iri: float  # at the config's tolerance
    evaluations: int  # the whole run
    seconds: float  # the whole run (wall clock, includes targets and the final measurement)
    images_per_second: float
    iris_per_second: float
    reach_step: Optional[int]  # first iterate whose median best residual <= the target
    reach_evaluations: Optional[int]
    reach_seconds: Optional[float]


def figures(name: str, r: InversionResult, seconds: float, target: float) -> Figures:
    t = first_reach(r.history, target)
    n = r.residual.numel()
    return Figures(
        name=name,
        median_residual=r.residual.median().item(),
        max_residual=r.residual.max().item(),
        fraction_iri=r.fraction_iri,
        evaluations=r.evaluations,
        seconds=seconds,
        images_per_second=n / seconds,
        iris_per_second=int(r.is_iri.sum()) / seconds,
        reach_step=t,
        reach_evaluations=None if t is None else evaluations_until(r.history, t),
        reach_seconds=None if t is None else float(r.elapsed[t]),
    )


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    """a / b, or None when either is unknown (a run that never reached the target) or b is 0."""
    return a / b if a is not None and b else None


def timed_invert(model, x, cfg: InversionConfig):
    if x.is_cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    r = invert(model, x, TAP, cfg, run=RUN)
    if x.is_cuda:
        torch.cuda.synchronize()
    return r, time.perf_counter() - start


# -- the alternatives the fast mode was chosen from ------------------------------------------------------


@dataclass(frozen=True)
class SignStep:
    """Signed-gradient steps with a schedule: x <- clamp(x - lr * s(t) * sign(g), 0, 1) (bench only)."""

    lr: float
    schedule: Callable[[Tensor], Tensor]

    def init(self, origin, generator):
        return origin.clamp(0, 1), {"t": torch.zeros(origin.shape[0], dtype=torch.long, device=origin.device)}

    def step(self, x, grad, origin, state, index, loss=None):
        t = state["t"][index] + 1
        state["t"][index] = t
        return (x - (self.lr * self.schedule(t)).view(-1, 1, 1, 1).to(x.dtype) * grad.sign()).clamp(0, 1)


ALTERNATIVES = [  # (name, geometry, steps); all keep the best iterate, no early stopping
    ("L2 steps, length 2 cosine-decayed", ScheduledLengthStep(2.0, Cosine(100)), 100),
    ("L2 steps, length 5 cosine-decayed", ScheduledLengthStep(5.0, Cosine(100)), 100),
    ("sign steps 0.03, inverse-time(20)", SignStep(0.03, InverseTime(20)), 100),
    ("Adam 0.1 unit-grad, cosine(100)", Adam(0.1, Cosine(100), normalize=True), 100),
    ("Adam 0.1 raw grad, cosine(100)", Adam(0.1, Cosine(100)), 100),
    ("Adam 0.05 raw grad, constant", Adam(0.05, Constant()), 200),
    ("Adam 0.2 raw grad, cosine(200)", Adam(0.2, Cosine(200)), 200),
    ("Adam 0.2 raw grad, cosine(300)", Adam(0.2, Cosine(300)), 300),
    ("Adam 0.2 unit-grad, inverse-time(20)", Adam(0.2, InverseTime(20), normalize=True), 200),
    ("Adam 0.1 raw grad, inverse-time(20)", Adam(0.1, InverseTime(20)), 200),
    ("Adam 0.2 raw grad, inverse-time(20) [fast]", Adam(0.2, InverseTime(20)), 200),
]


def alternatives(model, x: Tensor, seeds: Tensor, target: float) -> list:
    rows = []
    with frozen(model):
        objective = InversionObjective(make_term(model, TAP, x, Forward()), Forward())
        for name, geometry, steps in ALTERNATIVES:
            start = time.perf_counter()
            run = descend(objective, seeds.clamp(0, 1), geometry, steps, keep_best=True)
            seconds = time.perf_counter() - start
            t = first_reach(run.history, target)
            rows.append({"method": name, "steps": steps, "median": run.loss.median().item(),
                         "max": run.loss.max().item(), "reach_step": t, "seconds": seconds})
            log.info("%-44s %4d steps: median %.4f max %.4f, reaches %.4f at step %s (%.0f s)",
                     name, steps, rows[-1]["median"], rows[-1]["max"], target, t, seconds)
    return rows


# -- main -------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--train-size", type=int, default=10000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--alternatives", action="store_true", help="also run the methods fast mode was chosen from")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--quick", action="store_true",
                        help="8 images, width 8, 1,000 training images, 1 epoch: a smoke test (~1 min)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.quick:
        args.images, args.width, args.train_size, args.epochs = 8, 8, 1000, 1
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    data = load_data(SOURCE, args.out / "data")
    model = trained_model(data, args.width, args.train_size, args.epochs,
                          args.out / f"resnet18_w{args.width}_n{args.train_size}_e{args.epochs}.pt")
    accuracy = test_accuracy(model, data)
    device = torch.device(args.device)
    model = model.to(device)
    x = bench_images(data, args.images).to(device)
    # warm-up: first-call overheads
    invert(model, x[:2], TAP, InversionConfig(steps=2), run=ExecutionConfig(warn_below=0.0))

    faithful_cfg, fast_cfg = InversionConfig(mode="faithful"), InversionConfig(mode="fast")
    faithful, t_faithful = timed_invert(model, x, faithful_cfg)
    target = faithful.residual.median().item()
    fast, t_fast = timed_invert(model, x, fast_cfg)
    rows = [figures("faithful", faithful, t_faithful, target), figures("fast", fast, t_fast, target)]
    for f in rows:
        log.info("%s", f)
    a, b = rows
    # None where a run never reached the target by its own history (the history is the working copy's
    # objective, the target the fp32 re-measurement: at a few images their medians can differ in the last bits)
    speedup = {
        "evaluations_to_target": ratio(a.reach_evaluations, b.reach_evaluations),
        "seconds_to_target": ratio(a.reach_seconds, b.reach_seconds),
        "total_evaluations": a.evaluations / b.evaluations,
        "total_seconds": a.seconds / b.seconds,
    }
    log.info("target (faithful final median residual) %.4f; speedups %s", target, speedup)
    report = {
        "command": " ".join(["python", *sys.argv]),
        "setup": {"model": f"ResNet18 width {args.width}", "test_accuracy": accuracy, "tap": TAP,
                  "images": args.images, "device": str(device), "threads": torch.get_num_threads(),
                  "torch": torch.__version__, "cpu": platform.processor() or platform.machine()},
        "configs": {"faithful": asdict(faithful_cfg), "fast": asdict(fast_cfg)}, "execution": asdict(RUN),
        "target_median_residual": target,
        "runs": [asdict(f) for f in rows],
        "speedup": speedup,
    }
    if args.alternatives:
        seeds = make_seed(fast_cfg.seed_kind, x, seed_generator(fast_cfg.seed))
        report["alternatives"] = alternatives(model, x, seeds, target)
    args.out.mkdir(parents=True, exist_ok=True)
    write_text(args.out / "bench_inversion.json", json.dumps(report, indent=2))
    log.info("report: %s\n%s", args.out / "bench_inversion.json", json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
