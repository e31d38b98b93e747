"""Checks that types alone cannot express: each error names the key, the value and the choices."""
from __future__ import annotations

import math
import re

from typing import Iterable

from stir.config.arch_names import arch_names
from stir.config.loss_specs import loss_names
from stir.config.schema import TrainConfig

DATA_NAMES = ("cifar10", "cifar100")
ATTACK_NORMS = ("l2",)
SCHEDULES = ("cosine", "onecycle", "constant")
WANDB_MODES = ("offline", "online", "disabled")
PADDING_MODES = ("zeros", "reflect")
TTA_MODES = ("none", "flip", "flip_translate")
PRECISIONS = ("32-true", "32", "bf16-mixed", "bf16", "16-mixed", "16", "bf16-true", "16-true", "64-true", "64")


def __getattr__(name: str):
    if name == "ARCH_NAMES":  # the architectures of stir.models' registry, read from its source (no torch, no model)
        return arch_names()
    if name == "LOSS_NAMES":  # the losses of stir.training.losses' registry, read from their source (no torch)
        return loss_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ConfigError(ValueError):
    """A configuration value that is the wrong choice or out of range."""


def check_choice(key: str, value: object, choices: Iterable[object]) -> None:
    choices = tuple(choices)
    if value not in choices:
        raise ConfigError(f"{key}={value!r} is not a valid choice; choose one of {list(choices)}")


def check_positive(key: str, value: float, allow_zero: bool = False) -> None:
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):  # NaN compares false: named here
        raise ConfigError(f"{key}={value!r} must be a finite number {'>= 0' if allow_zero else '> 0'}")


def check_trainer_devices(accelerator: str, devices: object) -> None:
    """``trainer.accelerator`` names a device this machine has, and ``trainer.devices`` selects at
    least one (Lightning's tracebacks otherwise come after the run folder was made)."""
    import torch

    wants = {"gpu": "cuda", "cuda": "cuda", "mps": "mps"}.get(str(accelerator))
    has = {"cuda": torch.cuda.is_available(),
           "mps": bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())}
    if wants is not None and not has[wants]:
        raise ConfigError(f"trainer.accelerator={accelerator} but this machine has no {wants.upper()} device; "
                          "use trainer.accelerator=cpu (or auto)")
    none = devices in (0, "0", "") or (isinstance(devices, (list, tuple)) and not devices) or \
        (isinstance(devices, int) and not isinstance(devices, bool) and devices < -1)
    if none:
        raise ConfigError(f"trainer.devices={devices!r} selects no device: give a count >= 1, a list of device ids, "
                          "-1 (all) or auto")


def validate_train(cfg: TrainConfig) -> None:
    check_choice("data.name", cfg.data.name, DATA_NAMES)
    check_choice("model.arch", cfg.model.arch, arch_names())  # the registry's, read from its source
    check_choice("loss.name", cfg.loss.name, loss_names())  # the registry's, read from its source
    check_choice("attack.norm", cfg.attack.norm, ATTACK_NORMS)
    check_choice("optim.schedule", cfg.optim.schedule, SCHEDULES)
    check_choice("logger.wandb.mode", cfg.logger.wandb.mode, WANDB_MODES)
    check_positive("model.width", cfg.model.width)
    if not re.fullmatch(r"[a-z0-9_]*", cfg.variant):
        raise ConfigError(f"variant={cfg.variant!r} must be lower-case letters, digits and _ (it names a run folder)")
    check_positive("attack.eps", cfg.attack.eps)
    check_positive("attack.steps", cfg.attack.steps)
    if cfg.attack.step_size is not None:
        check_positive("attack.step_size", cfg.attack.step_size)
    check_positive("loss.beta", cfg.loss.beta, allow_zero=True)
    check_positive("optim.lr", cfg.optim.lr)
    check_choice("data.padding_mode", cfg.data.padding_mode, PADDING_MODES)
    check_positive("data.crop_padding", cfg.data.crop_padding, allow_zero=True)
    check_choice("trainer.test_time_augmentation", cfg.trainer.test_time_augmentation, TTA_MODES)
    check_choice("trainer.precision", str(cfg.trainer.precision), PRECISIONS)
    if not 0 <= cfg.loss.label_smoothing < 1:
        raise ConfigError(f"loss.label_smoothing={cfg.loss.label_smoothing!r} must be in [0, 1)")
    if cfg.ema.decay is not None and not 0 < cfg.ema.decay < 1:
        raise ConfigError(f"ema.decay={cfg.ema.decay!r} must be in (0, 1), or null for no average")
    check_positive("ema.every_n_steps", cfg.ema.every_n_steps)
    check_positive("robust_check.images", cfg.robust_check.images, allow_zero=True)
    check_positive("robust_check.steps", cfg.robust_check.steps)
    if not 0 < cfg.robust_check.max_drop <= 1:
        raise ConfigError(f"robust_check.max_drop={cfg.robust_check.max_drop!r} must be in (0, 1]")
    check_positive("data.batch_size", cfg.data.batch_size)
    check_sync_batchnorm(cfg.trainer.sync_batchnorm, cfg.trainer.accelerator)
    check_trainer_devices(cfg.trainer.accelerator, cfg.trainer.devices)
    check_positive("optim.weight_decay", cfg.optim.weight_decay, allow_zero=True)
    check_positive("optim.momentum", cfg.optim.momentum, allow_zero=True)
    check_positive("data.num_classes", cfg.data.num_classes)
    check_positive("trainer.max_epochs", cfg.trainer.max_epochs)
    if cfg.data.train_size is not None:
        check_positive("data.train_size", cfg.data.train_size)
    expected_classes = {"cifar10": 10, "cifar100": 100}[cfg.data.name]
    if cfg.data.source is None and cfg.data.num_classes != expected_classes:
        raise ConfigError(
            f"data.num_classes={cfg.data.num_classes} but data.name={cfg.data.name} has {expected_classes} classes; "
            f"select the data set with data={cfg.data.name} instead of setting data.name alone"
        )


def check_sync_batchnorm(sync_batchnorm: bool, accelerator: str) -> None:
    """Refuse ``trainer.sync_batchnorm=true`` where training would run on the CPU.

    torch's SyncBatchNorm runs on CUDA / XPU (HPU, a PrivateUse1 backend) only: under DDP on the CPU
    the first training step fails (after the processes started and the run folder was made); on one
    process it does nothing.
    """
    import torch

    has_gpu = torch.cuda.is_available() or (hasattr(torch, "xpu") and torch.xpu.is_available())
    on_cpu = accelerator == "cpu" or (accelerator == "auto" and not has_gpu)
    if sync_batchnorm and on_cpu:
        raise ConfigError(
            f"trainer.sync_batchnorm=true needs CUDA devices (torch's SyncBatchNorm does not run on the CPU), and "
            f"trainer.accelerator={accelerator} trains on the CPU here; drop it (each process then normalises its "
            "own share of the batch) or train on GPUs")
