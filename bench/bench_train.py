"""Training benchmarks: the pipeline against a plain loop, the fast recipe's levers, time to accuracy.

    python bench/bench_train.py [--threads 1]            # pipeline vs plain PyTorch loop (below)
    python bench/bench_train.py levers [--threads 1]     # images/s of each lever of the fast recipe
    python bench/bench_train.py curve NAME [overrides]   # train.py to the end, test accuracy per epoch vs wall time
    python bench/bench_train.py plot                     # the accuracy-vs-wall-time PNG from bench/results/
    python bench/bench_train.py device [--width 64]      # images/s on CUDA (bench/gpu.sh), device-resident data
    python bench/bench_train.py profile NAME [overrides] # torch.profiler table of a few training steps
    python bench/bench_train.py verify RUN_FOLDER        # robust accuracy under APGD-CE / APGD-DLR / PGD-100 too
    python bench/bench_train.py --quick / levers --quick / curve NAME --quick   # smoke runs

pipeline (the default): both sides train the same width-16 ResNet18 on the same real CIFAR-10
batches (uint8 in memory, batched crop+flip, SGD): the pipeline through ``RobustClassifier`` under
``lightning.Trainer`` (no logger, no checkpoint, no validation), the baseline as a hand-written loop.
Timing excludes the first two (warm-up) steps of each run. AT (PGD-l2, 10 steps) runs three ways:

  * ``plain, network``: the plain loop attacking the network itself (the attack before the
    ``AttackNetwork`` copy; shows the gain);
  * ``plain, copy``: the plain loop attacking ``AttackNetwork``'s copy (batch norm folded,
    channels-last, refreshed every step): the same work as the pipeline, its baseline;
  * ``pipeline``: ``RobustClassifier`` with the default ``attack`` config (the copy).

Reported: ms/step and images/s, pipeline/plain time ratio (vanilla; AT against ``plain, copy``),
and the cost of an AT step relative to a vanilla step.

levers: training steps of train.py's own system (``build_system`` of the composed config, the
real data module) for each lever of the fast recipe, one change at a time from the `paper` recipe
and one removed at a time from the fast recipe, at one width; median images/s over the timed steps
(``bench_levers`` in ``bench/results/bench_train_levers_*.json|md``), and the 2-thread / 1-thread
step-time ratio of the paper's and the fast recipe's vanilla step.

curve, plot: time to accuracy (``bench/train_curve.py``).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import lightning as L
import torch
import torch.nn.functional as F

from stir.atomic import write_text
from stir.attacks import AttackNetwork, pgd_l2
from stir.config.schema import AttackConfig, DataConfig, LossConfig, ModelConfig, OptimConfig, TrainConfig
from stir.config.store import compose_train
from stir.data import StirDataModule, augment_batch, load_dataset, to_float
from stir.models import build, channel_stats
from stir.training.system import RobustClassifier

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # `python bench/bench_train.py` puts bench/ first on sys.path, not the repository
    sys.path.insert(0, str(REPO))
from bench.train_curve import curve_main, plot_main  # noqa: E402  (curve, plot: time to accuracy)

WARMUP = 2
CONFIGS = REPO / "configs"
RESULTS = REPO / "bench" / "results"
SOURCE = REPO.parent / "shared/data/cifar10-jpg.tar.gz"
log = logging.getLogger("bench_train")


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


def pipeline_main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench_train.py")
    parser.add_argument("--source", default=str(SOURCE))
    parser.add_argument("--root", default="data")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--quick", action="store_true", help="3 timed steps, width 8, batch 64 (a smoke run)")
    args = parser.parse_args(argv)
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


# ------------------------------------------------------------------------------------------ levers
# (name, overrides of `python train.py`): one change at a time from the `paper` recipe, then the
# fast recipe and one lever removed at a time. The widths and data come from the command line.
VANILLA_LEVERS = [
    ("paper", ["recipe=paper"]),
    ("paper + batch 256", ["recipe=paper", "data.batch_size=256"]),
    ("paper + bf16 autocast", ["recipe=paper", "trainer.precision=bf16-mixed"]),
    ("paper + channels-last", ["recipe=paper", "trainer.cpu_channels_last=true"]),
    ("paper + EMA", ["recipe=paper", "ema.decay=0.99"]),
    ("paper + label smoothing", ["recipe=paper", "loss.label_smoothing=0.2"]),
    ("paper + reflect crop", ["recipe=paper", "data.padding_mode=reflect", "data.crop_padding=2"]),
    ("paper + device-resident data", ["recipe=paper", "data.device_resident=true"]),
    ("fast", ["recipe=fast"]),
    ("fast - bf16", ["recipe=fast", "trainer.precision=32-true"]),
    ("fast - channels-last", ["recipe=fast", "trainer.cpu_channels_last=false"]),
    ("fast - batch 256 (128)", ["recipe=fast", "data.batch_size=128"]),
    ("fast, batch 512", ["recipe=fast", "data.batch_size=512"]),
    ("fast + device-resident data", ["recipe=fast", "data.device_resident=true"]),
    ("fast + EMA", ["recipe=fast", "ema.decay=0.99"]),
]
COMPILE_LEVERS = [("fast + torch.compile", ["recipe=fast", "trainer.compile=true"])]
ROBUST_LEVERS = [
    ("paper AT (PGD-10)", ["recipe=paper", "loss=at"]),
    ("fast AT, PGD-10", ["recipe=fast", "loss=at", "attack.steps=10"]),
    ("fast AT, PGD-2", ["recipe=fast", "loss=at", "attack.steps=2"]),
    ("fast AT, FGSM-RS (1 step of 1.25 eps)", ["recipe=fast", "loss=at", "attack.steps=1", "attack.step_size=1.25"]),
    ("fast TRADES, 2 steps", ["recipe=fast", "loss=trades", "attack.steps=2"]),
    ("fast MART, 2 steps", ["recipe=fast", "loss=mart", "attack.steps=2"]),
]


def _quiet() -> None:
    """Only this benchmark's lines: no per-run Lightning / data-module banners."""
    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "stir"):
        logging.getLogger(name).setLevel(logging.WARNING)


class IntervalTimer(L.Callback):
    """Seconds between the ends of consecutive training batches: fetch + augment + step, all of it."""

    def __init__(self):
        self.times: List[float] = []
        self._last: Optional[float] = None

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if module.device.type == "cuda":
            torch.cuda.synchronize(module.device)
        now = time.perf_counter()
        if self._last is not None:
            self.times.append(now - self._last)
        self._last = now


def data_module(cfg: TrainConfig, loaded) -> StirDataModule:
    """The real data module of ``cfg`` over an already decoded data set (prepare_data's hook)."""
    data = StirDataModule(cfg.data, shuffle_seed=cfg.seed)
    data._data = loaded
    return data


def step_speed(overrides: Sequence[str], common: Sequence[str], loaded, steps: int, accelerator: str = "cpu") -> Dict[str, float]:
    """Median images/s of ``steps`` training steps of train.py's system for ``overrides`` (after warm-up).

    The interval between batch ends includes fetching (and, device-resident, augmenting) the batch;
    on CUDA each interval ends with a synchronisation, so it is the device's time, not the launch's.
    """
    from stir.training.pipeline import build_system

    cfg = compose_train(CONFIGS, [*overrides, *common])
    torch.manual_seed(0)
    system = build_system(cfg, build(cfg.model, cfg.data.num_classes, *channel_stats(cfg.data.name)))
    timer = IntervalTimer()
    trainer = L.Trainer(max_epochs=1, limit_train_batches=steps + WARMUP + 1, limit_val_batches=0,
                        precision=cfg.trainer.precision, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[timer], accelerator=accelerator,
                        devices=1, inference_mode=False, num_sanity_val_steps=0)
    trainer.fit(system, datamodule=data_module(cfg, loaded))
    times = sorted(timer.times[WARMUP:])
    median = times[len(times) // 2]
    return {"batch_size": cfg.data.batch_size, "ms_per_step": 1e3 * median, "images_per_s": cfg.data.batch_size / median,
            "fastest_images_per_s": cfg.data.batch_size / times[0], "steps": len(times)}


def tta_speed(width: int, loaded, images: int = 2000) -> Dict[str, float]:
    """Evaluation images/s of a float32 network without and with test-time augmentation."""
    from stir.training.tta import tta_logits

    torch.manual_seed(0)
    net = build(ModelConfig("resnet18", width), 10, *channel_stats("cifar10")).eval()
    x = to_float(loaded.test_images[:images])
    out = {}
    for mode in ("none", "flip", "flip_translate"):
        start = time.perf_counter()
        with torch.no_grad():
            for chunk in x.split(500):
                tta_logits(net, chunk, mode)
        out[mode] = images / (time.perf_counter() - start)
    return out


def levers_main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench_train.py levers")
    parser.add_argument("--source", default=str(SOURCE))
    parser.add_argument("--root", default="data")
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--steps", type=int, default=6, help="timed steps per lever (after 2 warm-up steps)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2, help="round-robin passes; each lever keeps its best")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile (minutes of compilation)")
    parser.add_argument("--no-robust", action="store_true", help="skip the AT / TRADES / MART steps")
    parser.add_argument("--quick", action="store_true", help="width 4, 2 steps, a few levers: a smoke run")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    _quiet()
    loaded = load_dataset(DataConfig(source=args.source, root=args.root))
    levers = VANILLA_LEVERS + (COMPILE_LEVERS if args.compile else []) + ([] if args.no_robust else ROBUST_LEVERS)
    if args.quick:  # not a measurement: written to bench/out/
        args.width, args.steps, args.rounds, args.out = 4, 2, 1, REPO / "bench" / "out"
        levers = [VANILLA_LEVERS[0], VANILLA_LEVERS[8], ROBUST_LEVERS[3]]
    common = [f"model.width={args.width}", f"data.source={args.source}", f"data.root={args.root}",
              "logger.wandb.mode=disabled"]
    # Round-robin over the levers, `rounds` times: a busy neighbour slows a whole stretch of time, so
    # each lever keeps its least disturbed round (highest median images/s); all rounds are recorded.
    measured = {name: [] for name, _ in levers}
    for r in range(args.rounds):
        for name, overrides in levers:
            m = step_speed(overrides, common, loaded, args.steps)
            measured[name].append(m)
            log.info("round %d %-40s batch %4d  %8.1f ms/step  %7.1f img/s (fastest %7.1f)", r, name, m["batch_size"],
                     m["ms_per_step"], m["images_per_s"], m["fastest_images_per_s"])
    rows = [{"lever": name, "overrides": overrides, **max(measured[name], key=lambda m: m["images_per_s"]),
             "rounds": measured[name]} for name, overrides in levers]
    # The 2-thread / 1-thread ratio of the same steps, 1 and 2 threads alternated `rounds` times (the
    # best of each kept), for the extrapolation to an idle 2-core machine.
    threads = {}
    for name, overrides in (levers[0], next(lv for lv in levers if lv[0] == "fast")):
        by_threads = {1: [], 2: []}
        for _ in range(args.rounds):
            for t in (1, 2):
                torch.set_num_threads(t)
                by_threads[t].append(step_speed(overrides, common, loaded, args.steps))
        torch.set_num_threads(args.threads)
        best = {t: max(ms, key=lambda m: m["images_per_s"]) for t, ms in by_threads.items()}
        threads[name] = {"images_per_s_1_thread": best[1]["images_per_s"], "images_per_s_2_threads": best[2]["images_per_s"],
                         "speedup": best[2]["images_per_s"] / best[1]["images_per_s"],
                         "speedup_fastest_steps": best[2]["fastest_images_per_s"] / best[1]["fastest_images_per_s"],
                         "rounds": {str(t): ms for t, ms in by_threads.items()}}
        log.info("%-40s 1 thread %7.1f img/s, 2 threads %7.1f img/s: %.2fx (fastest steps %.2fx)", name,
                 best[1]["images_per_s"], best[2]["images_per_s"], threads[name]["speedup"],
                 threads[name]["speedup_fastest_steps"])
    tta = tta_speed(args.width, loaded)
    log.info("evaluation img/s (float32): %s", {k: round(v) for k, v in tta.items()})
    report = {"width": args.width, "threads": args.threads, "steps": args.steps, "rounds": args.rounds, "torch": torch.__version__,
              "load_average": os.getloadavg(), "levers": rows, "threads_ratio": threads, "tta_eval_images_per_s": tta,
              "date": time.strftime("%Y-%m-%d %H:%M")}
    stem = f"bench_train_levers_w{args.width}" + ("_quick" if args.quick else "")
    args.out.mkdir(parents=True, exist_ok=True)
    write_text(args.out / f"{stem}.json", json.dumps(report, indent=1))
    write_text(args.out / f"{stem}.md", levers_table(report))
    log.info("wrote %s", args.out / f"{stem}.md")


def levers_table(report: dict) -> str:
    base = {r["lever"].split(" ")[0]: r for r in report["levers"] if r["lever"] in ("paper", "fast")}
    lines = [f"Training step, ResNet18 width {report['width']}, {report['threads']} thread(s), torch {report['torch']}, "
             f"load average {report['load_average'][0]:.1f} ({report['date']}); median of {report['steps']} steps, "
             f"best of {report['rounds']} round-robin rounds.", "",
             "| lever | batch | ms/step | images/s | x paper | x fast | fastest step: images/s | x paper | x fast |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in report["levers"]:
        f = r["fastest_images_per_s"]
        lines.append(f"| {r['lever']} | {r['batch_size']} | {r['ms_per_step']:.0f} | {r['images_per_s']:.0f} | "
                     f"{r['images_per_s'] / base['paper']['images_per_s']:.2f} | "
                     f"{r['images_per_s'] / base['fast']['images_per_s']:.2f} | {f:.0f} | "
                     f"{f / base['paper']['fastest_images_per_s']:.2f} | {f / base['fast']['fastest_images_per_s']:.2f} |")
    lines += ["", "2 threads against 1 (same steps, same run):", ""]
    lines += [f"- {k}: 1 thread {v['images_per_s_1_thread']:.0f} img/s, 2 threads {v['images_per_s_2_threads']:.0f} "
              f"img/s: {v['speedup']:.2f}x (fastest steps: {v['speedup_fastest_steps']:.2f}x)"
              for k, v in report["threads_ratio"].items()]
    tta = report["tta_eval_images_per_s"]
    lines += ["", "Evaluation (float32, no gradient) images/s: " + ", ".join(f"TTA {k}: {v:.0f}" for k, v in tta.items())]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------- profile
def profile_main(argv: Sequence[str]) -> None:
    """Where a training step's time goes: torch.profiler over train.py's steps for some overrides."""
    parser = argparse.ArgumentParser(prog="bench_train.py profile")
    parser.add_argument("name")
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--source", default=str(SOURCE))
    parser.add_argument("--root", default="data")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_intermixed_args(argv)
    torch.set_num_threads(args.threads)
    _quiet()
    from torch.profiler import ProfilerActivity, profile

    from stir.training.pipeline import build_system

    loaded = load_dataset(DataConfig(source=args.source, root=args.root))
    cfg = compose_train(CONFIGS, [*args.overrides, f"data.source={args.source}", f"data.root={args.root}",
                                  "logger.wandb.mode=disabled"])
    torch.manual_seed(0)
    system = build_system(cfg, build(cfg.model, cfg.data.num_classes, *channel_stats(cfg.data.name)))

    class Profiled(L.Callback):  # profile steps WARMUP .. WARMUP + steps (the first ones warm the allocator)
        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            if batch_idx == WARMUP:
                self.prof = profile(activities=[ProfilerActivity.CPU])
                self.prof.__enter__()
                self.start = time.perf_counter()

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            if batch_idx == WARMUP + args.steps - 1:
                self.seconds = time.perf_counter() - self.start
                self.prof.__exit__(None, None, None)

    prof = Profiled()
    trainer = L.Trainer(max_epochs=1, limit_train_batches=WARMUP + args.steps, limit_val_batches=0,
                        precision=cfg.trainer.precision, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[prof], accelerator="cpu", devices=1, inference_mode=False)
    trainer.fit(system, datamodule=data_module(cfg, loaded))
    table = prof.prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25)
    head = (f"{args.name}: {' '.join(args.overrides)}; {args.steps} steps of batch {cfg.data.batch_size}, "
            f"{args.threads} thread(s), {prof.seconds / args.steps * 1e3:.0f} ms/step under the profiler, "
            f"load average {os.getloadavg()[0]:.1f}, torch {torch.__version__}\n\n")
    args.out.mkdir(parents=True, exist_ok=True)
    write_text(args.out / f"bench_train_profile_{args.name}.txt", head + table + "\n")
    log.info("%s%s", head, table)


# ------------------------------------------------------------------------------------------ verify
def verify_main(argv: Sequence[str]) -> dict:
    """A trained run's robust accuracy under stronger attacks than eval_attack: a gradient-masking check.

    On the first ``--images`` test images (the start of the subset test/robust_acc attacks), float32,
    eval mode: PGD-l2 as eval_attack (20 steps), PGD-l2 with 100 steps, and torchattacks' APGD-CE and
    APGD-DLR in l2 (Croce & Hein 2020, the first two attacks of AutoAttack), 100 steps each; "worst
    case" counts an image robust only if every attack failed on it. A network whose 20-step PGD
    accuracy is far above the worst case masks its gradients (e.g. through label smoothing).
    """
    import torchattacks

    parser = argparse.ArgumentParser(prog="bench_train.py verify")
    parser.add_argument("run", help="a finished run folder")
    parser.add_argument("--images", type=int, default=500)
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    _quiet()
    from omegaconf import OmegaConf

    from stir.attacks.network import attacked
    from stir.training.runs import load_state_dict

    run = Path(args.run)
    cfg = OmegaConf.load(run / "config.yaml")
    data = StirDataModule(DataConfig(**{**OmegaConf.to_container(cfg.data), "download": False}))
    data.setup()
    images, labels = data.split_tensors("test")
    x, y = to_float(images[: args.images]), labels[: args.images]
    net = build(ModelConfig(cfg.model.arch, cfg.model.width), cfg.data.num_classes, *channel_stats(cfg.data.name))
    net.load_state_dict(load_state_dict(str(run)))
    net.eval().requires_grad_(False)
    model = attacked(net)  # eval mode for torchattacks, NCHW gradients
    torch.manual_seed(0)
    attacks = {
        "pgd20 (eval_attack)": lambda: pgd_l2(net, x, y, AttackConfig(eps=args.eps, steps=20, fold_batch_norm=False,
                                                                   channels_last=False)),
        "pgd100": lambda: pgd_l2(net, x, y, AttackConfig(eps=args.eps, steps=100, fold_batch_norm=False, channels_last=False)),
        "apgd-ce": lambda: torchattacks.APGD(model, norm="L2", eps=args.eps, steps=100, loss="ce")(x, y),
        "apgd-dlr": lambda: torchattacks.APGD(model, norm="L2", eps=args.eps, steps=100, loss="dlr")(x, y),
    }
    with torch.no_grad():
        robust = {"clean": net(x).argmax(1) == y}
    for name, attack in attacks.items():
        start = time.perf_counter()
        x_adv = attack()
        assert float((x_adv - x).flatten(1).norm(dim=1).max()) <= args.eps * (1 + 1e-4)
        with torch.no_grad():
            robust[name] = net(x_adv).argmax(1) == y
        log.info("%-22s robust accuracy %.4f (%.0f s)", name, robust[name].float().mean(), time.perf_counter() - start)
    worst = torch.stack([v for k, v in robust.items()]).all(0)
    report = {"run": str(run), "images": args.images, "eps": args.eps,
              **{k: float(v.float().mean()) for k, v in robust.items()}, "worst_case": float(worst.float().mean())}
    log.info("worst case over the attacks: %.4f", report["worst_case"])
    args.out.mkdir(parents=True, exist_ok=True)
    write_text(args.out / f"bench_train_verify_{run.parent.name}_{run.name}.json", json.dumps(report, indent=1))
    return report


# ------------------------------------------------------------------------------------------ device
DEVICE_RUNS = [
    ("paper vanilla", ["recipe=paper"]),
    ("fast vanilla, DataLoader", ["recipe=fast"]),
    ("fast vanilla, device-resident data", ["recipe=fast", "data.device_resident=true"]),
    ("paper AT (PGD-10)", ["recipe=paper", "loss=at"]),
    ("fast AT (PGD-2), device-resident data", ["recipe=fast", "loss=at", "attack.steps=2", "data.device_resident=true"]),
    ("fast AT (FGSM-RS), device-resident data", ["recipe=fast", "loss=at", "attack.steps=1", "attack.step_size=1.25",
                                               "data.device_resident=true"]),
]


def device_main(argv: Sequence[str]) -> Dict[str, dict]:
    """Training images/s on the accelerator (CUDA if any, else the CPU): the GPU part of bench/gpu.sh."""
    parser = argparse.ArgumentParser(prog="bench_train.py device")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--source", default=str(SOURCE), help="real images if present, else random uint8 ones")
    parser.add_argument("--root", default="data")
    parser.add_argument("--smoke", "--quick", action="store_true", help="width 4, 2 steps, batch 16: any machine")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    args, _ = parser.parse_known_args(argv)  # gpu.sh passes bench_gpu.py's options too
    from stir.data import synthetic

    _quiet()
    cuda = torch.cuda.is_available()
    accelerator = "cuda" if cuda else "cpu"
    if args.smoke:
        args.width, args.steps = 4, 2
    if Path(args.source).exists() and not args.smoke:
        loaded = load_dataset(DataConfig(source=args.source, root=args.root))
        common = [f"data.source={args.source}", f"data.root={args.root}"]
    else:  # throughput does not depend on the pixels
        loaded = synthetic.make_dataset(10, n_train=6000 if not args.smoke else 200, n_test=100)
        common = ["data.holdout_size=100" if args.smoke else "data.holdout_size=1000"]
    common += [f"model.width={args.width}", "logger.wandb.mode=disabled"]
    if args.smoke:
        common += ["data.batch_size=16"]
    report = {"device": torch.cuda.get_device_name() if cuda else "cpu", "width": args.width, "torch": torch.__version__,
              "runs": {}}
    for name, overrides in DEVICE_RUNS:
        m = step_speed(overrides, common, loaded, args.steps, accelerator)
        report["runs"][name] = m
        log.info("%-42s batch %4d  %7.1f img/s", name, m["batch_size"], m["images_per_s"])
    paper = report["runs"]["paper vanilla"]["images_per_s"]
    report["paper_100_epochs_hours"] = {
        "vanilla": 100 * 45_000 / paper / 3600, "at": 100 * 45_000 / report["runs"]["paper AT (PGD-10)"]["images_per_s"] / 3600}
    log.info("the `paper` recipe, 100 epochs of 45,000 images: vanilla %.2f h, AT %.2f h (extrapolated)",
             report["paper_100_epochs_hours"]["vanilla"], report["paper_100_epochs_hours"]["at"])
    args.out.mkdir(parents=True, exist_ok=True)
    write_text(args.out / "bench_train_device.json", json.dumps(report, indent=1))
    return report


def main() -> None:
    from stir.training.trainer import quiet_lightning

    quiet_lightning()
    for pattern in (r".*GPU available", r".*LeafSpec", r".*does not have many workers"):
        import warnings
        warnings.filterwarnings("ignore", message=pattern)
    modes = {"levers": levers_main, "curve": curve_main, "plot": plot_main, "device": device_main,
             "profile": profile_main, "verify": verify_main}
    argv = sys.argv[1:]
    if argv and argv[0] in modes:
        modes[argv[0]](argv[1:])
    else:
        pipeline_main(argv)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    main()
