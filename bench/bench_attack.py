"""The training attack on the descent loop against torchattacks' PGDL2: time per attack, same inputs.

    python bench/bench_attack.py [--width 16] [--batch 128] [--steps 10] [--repeats 7] [--threads 1] [--quick]

``stir.attacks.pgd_l2`` runs PGD-l2 through ``stir.descent.descend`` (bit-identical to torchattacks,
tests/training/test_attacks.py); this measures what that costs. Both sides attack the same
width-``--width`` ResNet18 (the folded, channels-last ``AttackNetwork`` copy that training attacks)
on the same batch of real CIFAR-10 training images (random ones when the shared copy is absent),
eps 1.0, ``--steps`` steps of 2.5 eps / steps from a random start, alternating, after one warm-up
each; the median time of ``--repeats`` runs and their ratio (descent loop / torchattacks).
Result: bench/results/bench_attack.json.
"""
from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from stir.atomic import write_text  # noqa: E402
from stir.attacks import AttackNetwork, pgd_l2, torchattacks_pgd_l2  # noqa: E402
from stir.attacks.network import attacked  # noqa: E402
from stir.config.schema import AttackConfig, ModelConfig  # noqa: E402
from stir.models import build, channel_stats, frozen  # noqa: E402
from stir.models.synthetic import with_trained_batch_norms  # noqa: E402

log = logging.getLogger("bench_attack")
DATA = REPO.parent / "shared" / "data" / "cifar10-jpg.tar.gz"


def images(batch: int):
    if DATA.is_file():
        from stir.config.schema import DataConfig
        from stir.data import StirDataModule, to_float

        dm = StirDataModule(DataConfig(source=str(DATA), root=str(REPO / "data")))
        dm.setup()
        x, y = dm.split_tensors("train")
        return to_float(x[:batch]), y[:batch]
    g = torch.Generator().manual_seed(0)
    return torch.rand(batch, 3, 32, 32, generator=g), torch.randint(0, 10, (batch,), generator=g)


def torchattacks_once(model, x, y, cfg):
    with frozen(model), torch.enable_grad():
        return torchattacks_pgd_l2(attacked(model), cfg, x.device)(x.clone(), y.clone())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="width 8, batch 32, 2 steps, 3 repeats (smoke run)")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "bench_attack.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.quick:
        args.width, args.batch, args.steps, args.repeats = 8, 32, 2, 3
    torch.set_num_threads(args.threads)
    net = with_trained_batch_norms(build(ModelConfig("resnet18", args.width), 10, *channel_stats("cifar10")), 0).eval()
    copy = AttackNetwork(fold_batch_norm=True, channels_last=True).get(net)
    x, y = images(args.batch)
    cfg = AttackConfig(eps=1.0, steps=args.steps)
    sides = {"descent loop (stir.attacks.pgd_l2)": lambda: pgd_l2(copy, x, y, cfg),
             "torchattacks PGDL2": lambda: torchattacks_once(copy, x, y, cfg)}
    times = {name: [] for name in sides}
    for fn in sides.values():
        fn()  # warm-up
    for _ in range(args.repeats):
        for name, fn in sides.items():
            started = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - started)
    medians = {name: statistics.median(t) for name, t in times.items()}
    ours, theirs = medians.values()
    ratio = ours / theirs
    for name, t in medians.items():
        log.info("%-38s median %.3f s (fastest %.3f s)", name, t, min(times[name]))
    log.info("ratio descent loop / torchattacks: %.3f", ratio)
    record = {"width": args.width, "batch": args.batch, "steps": args.steps, "repeats": args.repeats,
              "threads": args.threads, "medians_s": medians, "times_s": times, "ratio": ratio,
              "torch": torch.__version__, "command": " ".join(sys.argv)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_text(Path(args.out), json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
