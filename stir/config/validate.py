"""Checks that types alone cannot express: each error names the key, the value and the choices."""
from __future__ import annotations

from typing import Iterable

from stir.config.schema import TrainConfig

DATA_NAMES = ("cifar10", "cifar100")
LOSS_NAMES = ("vanilla", "at", "trades", "mart")
ATTACK_NORMS = ("l2",)
SCHEDULES = ("cosine", "onecycle", "constant")
WANDB_MODES = ("offline", "online", "disabled")


class ConfigError(ValueError):
    """A configuration value that is the wrong choice or out of range."""


def check_choice(key: str, value: object, choices: Iterable[object]) -> None:
    choices = tuple(choices)
    if value not in choices:
        raise ConfigError(f"{key}={value!r} is not a valid choice; choose one of {list(choices)}")


def check_positive(key: str, value: float, allow_zero: bool = False) -> None:
    if value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"{key}={value!r} must be {'>= 0' if allow_zero else '> 0'}")


def validate_train(cfg: TrainConfig) -> None:
    from stir.models import names as arch_names

    check_choice("data.name", cfg.data.name, DATA_NAMES)
    check_choice("model.arch", cfg.model.arch, arch_names())
    check_choice("loss.name", cfg.loss.name, LOSS_NAMES)
    check_choice("attack.norm", cfg.attack.norm, ATTACK_NORMS)
    check_choice("optim.schedule", cfg.optim.schedule, SCHEDULES)
    check_choice("logger.wandb.mode", cfg.logger.wandb.mode, WANDB_MODES)
    check_positive("model.width", cfg.model.width)
    check_positive("attack.eps", cfg.attack.eps)
    check_positive("attack.steps", cfg.attack.steps)
    if cfg.attack.step_size is not None:
        check_positive("attack.step_size", cfg.attack.step_size)
    check_positive("loss.beta", cfg.loss.beta, allow_zero=True)
    check_positive("optim.lr", cfg.optim.lr)
    check_positive("data.batch_size", cfg.data.batch_size)
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
