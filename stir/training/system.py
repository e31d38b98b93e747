"""The LightningModule: a plain network trained with one objective, checked clean and under attack."""
from __future__ import annotations

import copy
import math
import random
from typing import Optional

import lightning as L
import numpy as np
import torch
from torch import Tensor, nn

from stir.attacks import AttackNetwork, robust_accuracy
from stir.config.schema import AttackConfig, EmaConfig, LossConfig, OptimConfig
from stir.data import Augment, to_float
from stir.training.ema import ema_decay, ema_update
from stir.training.losses import get_loss, loss_spec
from stir.training.tta import tta_logits


def accuracy(logits: Tensor, labels: Tensor) -> Tensor:
    """Fraction of rows of logits (b, C) whose argmax is the label (b,)."""
    return (logits.argmax(dim=1) == labels).float().mean()


class RobustClassifier(L.LightningModule):
    """System = network + objective (a registered loss, ``stir.training.losses``) + SGD + robust evaluation.

    Attacks (training and evaluation) differentiate ``stir.attacks.AttackNetwork``'s copy of the
    network (its eval-mode function up to rounding: batch norm folded, channels-last; switched by
    ``attack.fold_batch_norm`` / ``attack.channels_last``), refreshed before every use.

    Batches arrive as uint8 images (b, 3, h, w) on the training device; ``augment`` (a
    ``stir.data.Augment``; None when the batches come augmented, from the device-resident loader,
    or for no augmentation) runs there, on the whole batch. Robust accuracy uses PGD-l2
    (``eval_attack``) on the first ``robust_val_size`` held-out images every ``robust_val_every``
    epochs, and on the first ``robust_test_size`` test images (by their index in the split, so under
    DDP the ranks together attack the same images as one process); ``<stage>/robust_subset_acc`` is the
    clean accuracy on those same images (``<stage>/acc`` covers the whole split). Evaluation runs in
    float32 whatever the training precision; with ``tta`` other than "none", ``<stage>/acc_tta`` is
    the clean accuracy under test-time augmentation (``stir.training.tta``), reported beside, never
    instead of, ``<stage>/acc``.

    With ``ema`` (a decay), ``ema_network`` (a submodule: in checkpoints, not in the optimiser)
    averages the network's weights after every ``ema.every_n_steps`` optimiser steps, and
    ``eval_network`` (what validation, testing, the guard and the run's weights.pt use) is the
    average; otherwise it is the network itself.
    """

    def __init__(
        self,
        network: nn.Module,
        loss: LossConfig,
        attack: AttackConfig,
        eval_attack: AttackConfig,
        optim: OptimConfig,
        augment: Optional[Augment] = Augment(),
        robust_val_every: int = 5,
        robust_val_size: int = 500,
        robust_test_size: int = 1000,
        channels_last: bool = True,
        cpu_channels_last: bool = False,
        ema: EmaConfig = EmaConfig(),
        tta: str = "none",
        compile: bool = False,
    ):
        super().__init__()
        self.network = network
        self.loss_cfg, self.attack_cfg, self.eval_attack, self.optim_cfg = loss, attack, eval_attack, optim
        self.objective = get_loss(loss.name)
        self.adversarial = loss_spec(loss.name).adversarial  # it attacks: hand it the attacked copy
        self.augment = augment
        self.robust_val_every, self.robust_val_size, self.robust_test_size = robust_val_every, robust_val_size, robust_test_size
        self.channels_last, self.cpu_channels_last = channels_last, cpu_channels_last
        self.memory_format = torch.contiguous_format
        self.ema_cfg, self.tta, self.compile_network = ema, tta, compile
        self.ema_network: Optional[nn.Module] = None
        if ema.decay is not None:
            self.ema_network = copy.deepcopy(network).requires_grad_(False)
            self.register_buffer("ema_updates", torch.zeros((), dtype=torch.long))
        # What the attacks differentiate: a frozen eval-mode copy of the network (batch norm folded,
        # channels-last), built lazily on the network's device and refreshed before each use. Plain
        # objects, not submodules: never in the state dict, a checkpoint or the optimiser.
        self._attack_net = AttackNetwork(attack.fold_batch_norm, attack.channels_last)
        self._eval_attack_net = AttackNetwork(eval_attack.fold_batch_norm, eval_attack.channels_last)
        self._eval_means: dict = {}  # name -> CountedMean of the evaluation epoch under way

    def setup(self, stage: str) -> None:
        # NHWC on CUDA, on the CPU only when asked (see TrainerConfig.channels_last). Only strides
        # change: values and state dicts are the same either way.
        if self.channels_last and (self.device.type == "cuda" or self.cpu_channels_last):
            self.memory_format = torch.channels_last
            for net in (self.network, self.ema_network):
                if net is not None:
                    net.to(memory_format=self.memory_format)
        if self.compile_network and stage == "fit":
            self.network.compile()  # in place: parameter names and the state dict are unchanged

    @property
    def eval_network(self) -> nn.Module:
        """What is evaluated and saved: the weight average with EMA, else the network."""
        return self.ema_network if self.ema_network is not None else self.network

    def eval_attack_model(self) -> nn.Module:
        """The eval attack's copy of ``eval_network`` (AttackNetwork), refreshed from its current weights."""
        return self._eval_attack_net.get(self.eval_network)

    def _images(self, images: Tensor) -> Tensor:
        """uint8 (b, 3, h, w) -> float in [0, 1] in the network's memory format."""
        return to_float(images).contiguous(memory_format=self.memory_format)

    def forward(self, x: Tensor) -> Tensor:  # (b, 3, h, w) in [0, 1] -> logits (b, C)
        return self.network(x)

    def training_step(self, batch, batch_idx: int) -> Tensor:
        images, labels = batch  # (b, 3, h, w) uint8, (b,)
        x = self._images(self.augment(images) if self.augment is not None else images)
        # The attack of an adversarial objective sees the network's eval-mode function through the
        # copy, re-read from the network's current weights and batch-norm statistics once per step;
        # the training forward and backward below are the network's own.
        attack_model = self._attack_net.get(self.network) if self.adversarial else None
        out = self.objective(self.network, x, labels, self.loss_cfg, self.attack_cfg, attack_model=attack_model)
        b = len(labels)
        self.log("train/loss", out.loss, prog_bar=True, batch_size=b)
        # Epoch means over every rank's batches (sync_dist: Lightning reduces the sums of value x batch
        # size and of batch sizes), not rank 0's alone. Exact here: every rank trains as many images
        # (EpochShards), so the count's integer division by the world size (see CountedMean) is exact.
        self.log("train/epoch_loss", out.loss.detach(), on_step=False, on_epoch=True, batch_size=b, sync_dist=True)
        for name, value in out.extra.items():
            self.log(f"train/{name}", value, batch_size=b)
        # Accuracy from the forwards the objective already made, per step and as the epoch's mean (the
        # curves a dashboard groups by recipe). train/acc is on the inputs the network trains on: clean
        # images, or for AT (which makes no clean forward) its adversarial examples, so that every run
        # has train/epoch_acc; train/adv_acc is on the adversarial examples of every robust objective.
        logits = out.logits_clean if out.logits_clean is not None else out.logits_adv
        if logits is not None:
            acc = accuracy(logits.detach(), labels)
            self.log("train/acc", acc, prog_bar=True, batch_size=b)
            self.log("train/epoch_acc", acc, on_step=False, on_epoch=True, batch_size=b, sync_dist=True)
        if out.logits_adv is not None:
            adv_acc = accuracy(out.logits_adv.detach(), labels)
            self.log("train/adv_acc", adv_acc, batch_size=b)
            self.log("train/epoch_adv_acc", adv_acc, on_step=False, on_epoch=True, batch_size=b, sync_dist=True)
        return out.loss

    def on_train_batch_end(self, outputs, batch, batch_idx: int) -> None:
        # After the optimiser step of this batch (global_step has counted it).
        if self.ema_network is not None and self.trainer.global_step % self.ema_cfg.every_n_steps == 0:
            ema_update(self.ema_network, self.network, ema_decay(self.ema_cfg.decay, int(self.ema_updates)))
            self.ema_updates += 1

    def _evaluate(self, batch, batch_idx: int, stage: str, robust_size: int) -> None:
        # Float32 whatever the training precision: the numbers a run reports (and the 20-step attack's
        # gradients) are the network's own, not bf16 rounding's.
        with torch.autocast(self.device.type, enabled=False):
            self._evaluate_fp32(batch, batch_idx, stage, robust_size)

    def _evaluate_fp32(self, batch, batch_idx: int, stage: str, robust_size: int) -> None:
        images, labels, rows = self._eval_batch(batch, batch_idx, stage)
        x = self._images(images)
        network = self.eval_network
        logits = network(x)  # (b, C)
        real = rows >= 0  # (b,): not the padding that evens out the ranks' batches
        self._count_correct(f"{stage}/acc", logits, labels, real)
        if self.tta != "none":  # an extra number beside acc; robust accuracy never uses it
            self._count_correct(f"{stage}/acc_tta", tta_logits(network, x, self.tta), labels, real)
        if robust_size <= 0:
            return
        # Robust accuracy on the images of rows 0..robust_size-1 of the (unshuffled) split, wherever
        # they fall (one process: the first batches; DDP: every rank holds some), and the clean accuracy
        # on exactly those images: the pair to compare (acc is over the whole split).
        subset = real & (rows < robust_size)  # (b,)
        k = int(subset.sum())
        robust_correct = logits.new_zeros(())
        if k:  # the attack turns gradients on itself (evaluation loops run under no_grad)
            # The attack on the refreshed copy (cheap next to a 20-step attack), the verdict on the network.
            robust = robust_accuracy(network, x[subset], labels[subset], self.eval_attack,
                                     attack_model=self.eval_attack_model())
            robust_correct = robust * k
        self._mean(f"{stage}/robust_acc").update(robust_correct, k)
        self._count_correct(f"{stage}/robust_subset_acc", logits, labels, subset)

    def _count_correct(self, name: str, logits: Tensor, labels: Tensor, counted: Tensor) -> None:
        """Add the ``counted`` rows (b,) bool, and how many of them ``logits`` classify correctly, to ``name``'s
        epoch mean (logged at the end of the epoch, over every rank: ``_log_eval_epoch``)."""
        correct = (logits.argmax(dim=1) == labels) & counted
        self._mean(name).update(correct.sum(), int(counted.sum()))

    def _mean(self, name: str) -> "CountedMean":
        return self._eval_means.setdefault(name, CountedMean())

    def _log_eval_epoch(self) -> None:
        """The epoch's evaluation accuracies: correct / counted over every rank (one collective per name;
        every rank holds the same names: each is counted on every batch, with 0 where none applies)."""
        for name in sorted(self._eval_means):
            value = self._eval_means[name].compute(self.device)
            # The same value on every rank; sync_dist only keeps Lightning from warning about it, and
            # batch_size=1 keeps its weighted mean of identical values exact (not the last batch's size).
            self.log(name, value, prog_bar=name.endswith("/acc") or name.endswith("/robust_acc"), batch_size=1,
                     sync_dist=True)

    def on_validation_epoch_start(self) -> None:
        self._eval_means = {}

    def on_test_epoch_start(self) -> None:
        self._eval_means = {}

    def on_validation_epoch_end(self) -> None:
        self._log_eval_epoch()

    def on_test_epoch_end(self) -> None:
        self._log_eval_epoch()

    def _eval_batch(self, batch, batch_idx: int, stage: str) -> tuple[Tensor, Tensor, Tensor]:
        """(images, labels, rows (b,) int64: each image's index in the split, -1 for padding).

        StirDataModule's batches carry their rows; a plain (images, labels) loader is read as one
        process's split in order (its rows follow from the batch index). Under DDP such a loader
        would give every rank rows 0.. of its own share, so it is refused there.
        """
        if len(batch) == 3:
            return batch
        images, labels = batch
        if self.trainer.world_size > 1:
            raise ValueError(f"{stage} batches under DDP must be (images, labels, rows) (StirDataModule's): without "
                             "their rows every rank would count its own first images as the robust subset")
        loader = self.trainer.val_dataloaders if stage == "val" else self.trainer.test_dataloaders
        start = batch_idx * loader.batch_size
        return images, labels, torch.arange(start, start + len(labels), device=labels.device)

    def validation_step(self, batch, batch_idx: int) -> None:
        epoch = self.current_epoch + 1
        due = self.robust_val_every > 0 and (epoch % self.robust_val_every == 0 or epoch == self.trainer.max_epochs)
        self._evaluate(batch, batch_idx, "val", self.robust_val_size if due else 0)

    def on_test_start(self) -> None:
        # Under DDP every rank's batch-norm running statistics follow its own last training forward
        # (DDP broadcasts rank 0's buffers at the start of each forward, not after it, and testing runs
        # without the DDP wrapper): every rank tests with rank 0's, the ones weights.pt saves.
        broadcast_buffers(self.eval_network)

    def test_step(self, batch, batch_idx: int) -> None:
        self._evaluate(batch, batch_idx, "test", self.robust_test_size)

    # A resumed run continues the random streams of the uninterrupted one: augmentation crops and
    # flips and the attacks' random starts draw from the global RNGs, saved with every checkpoint.
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["rng_states"] = rng_states()

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        if "rng_states" in checkpoint:
            set_rng_states(checkpoint["rng_states"])

    def configure_optimizers(self):
        cfg = self.optim_cfg
        # No weight decay on batch-norm parameters and biases (1-d tensors), the usual CIFAR recipe.
        decay = [p for p in self.network.parameters() if p.ndim > 1]
        no_decay = [p for p in self.network.parameters() if p.ndim <= 1]
        optimizer = torch.optim.SGD(
            [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov and cfg.momentum > 0,
        )
        total = max(1, int(self.trainer.estimated_stepping_batches))
        warmup = int(cfg.warmup_epochs * total / max(1, self.trainer.max_epochs))
        schedule = {"cosine": _cosine, "onecycle": _onecycle, "constant": lambda t, total, warmup: 1.0}[cfg.schedule]
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda t: schedule(t, total, warmup))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class CountedMean:
    """sum of values / sum of counts over an epoch's batches and every rank: an accuracy with each image
    counted once (``update(correct, counted)`` per batch; ``compute`` all-reduces both sums).

    Not Lightning's ``self.log(..., batch_size=k, sync_dist=True)``: its mean reduction divides the
    summed integer count by the world size in integer arithmetic (lightning 2.6 ``_sync_ddp``), so
    counts that differ between ranks (41 test images on two ranks) come out wrong (41 // 2 = 20).
    """

    def __init__(self) -> None:
        self.total, self.count = 0.0, 0

    def update(self, value: Tensor, count: int) -> None:
        self.total += float(value)
        self.count += int(count)

    def compute(self, device: torch.device) -> Tensor:
        sums = torch.tensor([self.total, float(self.count)], dtype=torch.float64, device=device)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(sums)
        return (sums[0] / sums[1].clamp(min=1)).float()


def broadcast_buffers(module: nn.Module) -> None:
    """Copy rank 0's buffers (batch-norm statistics) into every rank's ``module``; nothing outside DDP."""
    if torch.distributed.is_available() and torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
        for buffer in module.buffers():
            torch.distributed.broadcast(buffer, src=0)


def rng_states() -> dict:
    """The global random states that training draws from: torch (CPU and each CUDA device), numpy, random."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    # Tensors and plain Python values only, so the checkpoint loads with torch.load(weights_only=True).
    numpy_state = {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                   "has_gauss": int(has_gauss), "gauss": float(gauss)}
    states = {"torch": torch.get_rng_state(), "numpy": numpy_state, "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict) -> None:
    torch.set_rng_state(states["torch"])
    n = states["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    random.setstate(tuple(tuple(x) if isinstance(x, list) else x for x in states["python"]))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def _cosine(t: int, total: int, warmup: int) -> float:
    """Linear warm-up, then cosine decay to 0 over the remaining steps (a factor on the base lr)."""
    if t < warmup:
        return (t + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * min(1.0, (t - warmup) / max(1, total - warmup))))


def _onecycle(t: int, total: int, warmup: int) -> float:
    """Triangular one-cycle: up for the first 30% (or the warm-up), then linearly down to 0."""
    peak = warmup if warmup > 0 else max(1, int(0.3 * total))
    return (t + 1) / peak if t < peak else max(0.0, (total - t) / max(1, total - peak))
