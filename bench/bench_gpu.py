"""One device, the paper's settings: the wall time of a STIR pair, peak memory, training throughput.

    bash bench/gpu.sh                 # ResNet18 width 64, n=1000, k=5, 1000 faithful steps, both directions
    bash bench/gpu.sh --smoke         # tiny sizes: checks the script end to end on a CPU in seconds

What is timed (on ``cuda`` when there is one, else the CPU):

* one STIR pair: ``stir.measure.evaluate_pair`` of two ResNet18s (random weights: the cost does
  not depend on them) on n images, k draws, arbitrary IRIs, both directions, the published
  (faithful) inversion; wall seconds and peak device memory (``torch.cuda.max_memory_allocated``;
  peak RSS on the CPU); the k draws are inverted together, chunked automatically to fit
  ``--memory-gb`` (16 GiB). The published STIR alone is timed: the calibration every STIR now
  carries is off (``CalibrationConfig(permutations=0, resamples=0, ceiling="none")``; its ceiling
  would add one more inversion per direction, k + 1 instead of k);
* training throughput: images/s of vanilla and AT (PGD-l2, 10 steps) SGD steps of ResNet18 on
  batches of 128 (bf16 autocast and channels-last on CUDA), after warm-up steps, and the time of a
  100-epoch vanilla run on 50,000 images extrapolated from it.

Issue 12's target for the pair: under 60 s on one H200. Results: the log and
``bench/out/bench_gpu.json`` (``--out``).
"""
from __future__ import annotations

import argparse
import json
import logging
import resource
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Dict, Iterator

import torch
import torch.nn.functional as F

from stir.atomic import write_text
from stir.attacks import pgd_l2
from stir.config.schema import AttackConfig, ModelConfig
from stir.inversion import ExecutionConfig, InversionConfig
from stir.measure import CalibrationConfig, Estimator, evaluate_pair
from stir.models import build, channel_stats

log = logging.getLogger("bench_gpu")
OUT = Path(__file__).resolve().parent / "out"
# The published STIR alone: no floor permutations, no bootstrap interval, no ceiling draw.
UNCALIBRATED = CalibrationConfig(permutations=0, resamples=0, ceiling="none")


def network(width: int, seed: int, device: torch.device) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build(ModelConfig("resnet18", width=width), 10, *channel_stats("cifar10")).to(device).eval()


def smooth_images(n: int, device: torch.device) -> torch.Tensor:
    """(n, 3, 32, 32) in [0, 1]: upsampled 4x4 noise, image-like smoothness."""
    low = torch.rand(n, 3, 4, 4, generator=torch.Generator().manual_seed(0))
    return F.interpolate(low, size=32, mode="bilinear", align_corners=False).to(device)


def peak_memory_mib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextmanager
def counted_inversions() -> Iterator[Dict[str, int]]:
    """Count the inversion draws a measurement computes (``stir.measure.direction.invert_draws``)."""
    from stir.measure import direction

    real, count = direction.invert_draws, {"draws": 0}

    def invert_draws(*args, **kwargs):
        runs = real(*args, **kwargs)
        count["draws"] += sum(not r.from_cache for r in runs)
        return runs

    direction.invert_draws = invert_draws
    try:
        yield count
    finally:
        direction.invert_draws = real


def time_pair(args, device: torch.device) -> dict:
    m1, m2 = network(args.width, 0, device), network(args.width, 1, device)
    x = smooth_images(args.images, device)
    cfg = InversionConfig(steps=args.steps)
    estimator = Estimator(k=args.draws, iri="arbitrary", inversion=cfg, calibration=UNCALIBRATED)
    run = ExecutionConfig(batch_size=args.batch_size, memory_gb=args.memory_gb, warn_below=0.0)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    sync(device)
    with counted_inversions() as inversions:
        start = time.perf_counter()
        result = evaluate_pair(m1, m2, x, "penultimate", "penultimate", estimator, run=run)
        sync(device)
        seconds = time.perf_counter() - start
    stir = {d: result.stat(d, "stir").mean for d in ("m2|m1", "m1|m2")}
    row = {"seconds": seconds, "peak_memory_mib": peak_memory_mib(device),
           "stir_m2_given_m1": stir["m2|m1"], "stir_m1_given_m2": stir["m1|m2"],
           "inversions": inversions["draws"], "images": args.images, "steps": cfg.num_steps,
           "precision": cfg.model_precision,
           "memory_gb_allowed": args.memory_gb, "batch_size": args.batch_size or "automatic",
           "calibration": "off (the published STIR alone)"}
    log.info("STIR pair: %.1f s, peak memory %.0f MiB (n=%d, k=%d, %d faithful steps, both directions)",
             seconds, row["peak_memory_mib"], args.images, args.draws, cfg.num_steps)
    return row


def train_throughput(args, device: torch.device, adversarial: bool) -> float:
    """Images/s of SGD steps (forward, backward, update; AT: + a 10-step PGD-l2 attack)."""
    net = network(args.width, 2, device).train()
    on_cuda = device.type == "cuda"
    if on_cuda:
        net = net.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    attack = AttackConfig(eps=1.0, steps=10)
    g = torch.Generator().manual_seed(0)
    times = []
    for step in range(args.train_warmup + args.train_steps):
        x = torch.rand(args.train_batch, 3, 32, 32, generator=g).to(device)
        y = torch.randint(0, 10, (args.train_batch,), generator=g).to(device)
        sync(device)
        start = time.perf_counter()
        if on_cuda:
            x = x.contiguous(memory_format=torch.channels_last)
        if adversarial:
            x = pgd_l2(net, x, y, attack)
        with torch.autocast("cuda", dtype=torch.bfloat16) if on_cuda else nullcontext():
            loss = F.cross_entropy(net(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sync(device)
        if step >= args.train_warmup:
            times.append(time.perf_counter() - start)
    times.sort()
    return args.train_batch / times[len(times) // 2]  # median step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", "--quick", action="store_true", help="tiny sizes (width 4, 8 images, 5 steps)")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=None, help="images inverted together (default: automatic)")
    parser.add_argument("--memory-gb", type=float, default=16.0,
                        help="GPU memory the automatic batch may take (issue 12: the k x n images fit 16 GiB by chunking)")
    parser.add_argument("--train-batch", type=int, default=128)
    parser.add_argument("--train-steps", type=int, default=20)
    parser.add_argument("--train-warmup", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if args.smoke:
        args.width, args.images, args.draws, args.steps = 4, 8, 1, 5
        args.train_batch, args.train_steps, args.train_warmup = 16, 2, 1
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    log.info("device: %s, torch %s, width %d", name, torch.__version__, args.width)

    report = {"device": name, "torch": torch.__version__, "settings": {k: (str(v) if isinstance(v, Path) else v)
                                                                          for k, v in vars(args).items()}}
    report["stir_pair"] = time_pair(args, device)
    vanilla, at = train_throughput(args, device, False), train_throughput(args, device, True)
    report["train"] = {"vanilla_images_per_s": vanilla, "at_images_per_s": at, "at_over_vanilla": vanilla / at,
                       "vanilla_100_epochs_hours": 100 * 50_000 / vanilla / 3600}
    log.info("training: vanilla %.0f img/s, AT %.0f img/s (%.2fx), 100 vanilla epochs ~ %.2f h",
             vanilla, at, vanilla / at, report["train"]["vanilla_100_epochs_hours"])
    args.out.mkdir(parents=True, exist_ok=True)
    write_text(args.out / "bench_gpu.json", json.dumps(report, indent=2))
    log.info("wrote %s", args.out / "bench_gpu.json")


if __name__ == "__main__":
    main()
