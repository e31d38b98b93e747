"""Images per second of one training step: the Lightning pipeline against a plain PyTorch loop.

    python bench/bench_train.py [--source ../shared/data/cifar10-jpg.tar.gz] [--steps 12] [--width 16] [--threads 2]
    python bench/bench_train.py --quick     # 3 steps, width 8, batch 64: a smoke run (~1 min)

Both sides train the same width-16 ResNet18 on the same real CIFAR-10 batches (uint8 in memory,
batched crop+flip, SGD): the pipeline through ``RobustClassifier`` under ``lightning.Trainer``
(no logger, no checkpoint, no validation), the baseline as a hand-written loop. Timing excludes
the first two (warm-up) steps of each run. AT (PGD-l2, 10 steps) runs three ways:

  * ``plain, network``: the plain loop attacking the network itself (the attack before the
    ``AttackNetwork`` copy; shows the gain);
  * ``plain, copy``: the plain loop attacking ``AttackNetwork``'s copy (batch norm folded,
    channels-last, refreshed every step): the same work as the pipeline, its baseline;
  * ``pipeline``: ``RobustClassifier`` with the default ``attack`` config (the copy).

Reported: ms/step and images/s, pipeline/plain time ratio (vanilla; AT against ``plain, copy``),
and the cost of an AT step relative to a vanilla step.
"""
from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import lightning as L
import torch
import torch.nn.functional as F

from stir.attacks import AttackNetwork, pgd_l2
from stir.config.schema import AttackConfig, DataConfig, LossConfig, ModelConfig, OptimConfig
from stir.data import augment_batch, load_dataset, to_float
from stir.models import build, channel_stats
from stir.training.system import RobustClassifier

WARMUP = 2


class StepTimer(L.Callback):
    def __init__(self):
        self.times = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self._t = time.perf_counter()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.times.append(time.perf_counter() - self._t)


def batches(images, labels, steps, batch_size, seed=0):
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(images), generator=g)[: steps * batch_size]
    return [(images[i], labels[i]) for i in order.split(batch_size)]


def plain_loop(net, data, loss_name, attack, lr=0.1, copy=False):
    """The same work without Lightning: augment, (attack), forward, backward, SGD step.

    ``copy``: the attack runs on ``AttackNetwork``'s copy, refreshed every step (as the pipeline);
    else on the network itself.
    """
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    attack_net = AttackNetwork(attack.fold_batch_norm, attack.channels_last) if copy else None
    times = []
    for images, labels in data:
        t = time.perf_counter()
        net.train()
        x = to_float(augment_batch(images))
        if loss_name == "at":
            x = pgd_l2(attack_net.get(net) if copy else net, x, labels, attack)
        loss = F.cross_entropy(net(x), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t)
    return times


def pipeline(net, data, loss_name, attack):
    system = RobustClassifier(net, LossConfig(loss_name), attack, attack, OptimConfig(schedule="constant"),
                              robust_val_every=0)
    timer = StepTimer()
    loader = torch.utils.data.DataLoader(data, batch_size=None, shuffle=False)
    trainer = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[timer], accelerator="cpu", devices=1,
                        limit_val_batches=0, inference_mode=False)
    trainer.fit(system, train_dataloaders=loader)
    return timer.times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", default=str(Path(__file__).resolve().parents[2] / "shared/data/cifar10-jpg.tar.gz"))
    parser.add_argument("--root", default="data")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--quick", action="store_true", help="3 timed steps, width 8, batch 64 (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.width, args.batch_size = 3, 8, 64
    if args.threads:
        torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.WARNING)

    ds = load_dataset(DataConfig(source=args.source, root=args.root))
    data = batches(ds.train_images, ds.train_labels, args.steps + WARMUP, args.batch_size)
    attack = AttackConfig()  # PGD-l2, eps 1, 10 steps, alpha 2.5 * eps / steps
    runs = [("vanilla", "plain", lambda *a: plain_loop(*a)), ("vanilla", "pipeline", pipeline),
            ("at", "plain, network", lambda *a: plain_loop(*a, copy=False)),
            ("at", "plain, copy", lambda *a: plain_loop(*a, copy=True)), ("at", "pipeline", pipeline)]
    results, fastest = {}, {}
    for loss_name, side, run in runs:
        torch.manual_seed(0)
        net = build(ModelConfig("resnet18", args.width), 10, *channel_stats("cifar10"))
        times = run(net, data, loss_name, attack)[WARMUP:]
        times = sorted(times)
        per_step = times[len(times) // 2]  # median: robust to a busy neighbour
        results[(loss_name, side)] = per_step
        fastest[(loss_name, side)] = times[0]  # the least disturbed step: on a busy machine, compare these
        print(f"{loss_name:8s} {side:15s} {per_step * 1e3:8.1f} ms/step  {args.batch_size / per_step:8.1f} img/s"
              f"  (fastest step {times[0] * 1e3:.1f} ms)", flush=True)
    for label, r in (("median", results), ("fastest", fastest)):
        print(f"-- ratios of the {label} steps")
        report(r)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, batch {args.batch_size}, width {args.width}, "
          f"steps {args.steps} (+{WARMUP} warm-up)")


def report(r) -> None:
    print(f"vanilla: pipeline / plain time = {r[('vanilla', 'pipeline')] / r[('vanilla', 'plain')]:.3f}  (target <= 1.10)")
    print(f"at: pipeline / plain (copy) time = {r[('at', 'pipeline')] / r[('at', 'plain, copy')]:.3f}  (target <= 1.10)")
    print(f"at: attack on the copy / on the network, plain loop = "
          f"{r[('at', 'plain, copy')] / r[('at', 'plain, network')]:.3f}")
    print(f"AT / vanilla step cost: pipeline = {r[('at', 'pipeline')] / r[('vanilla', 'pipeline')]:.2f}  (target <= 8); "
          f"plain, network = {r[('at', 'plain, network')] / r[('vanilla', 'plain')]:.2f}; "
          f"plain, copy = {r[('at', 'plain, copy')] / r[('vanilla', 'plain')]:.2f}")


if __name__ == "__main__":
    main()
