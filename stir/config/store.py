"""Register the typed schema with Hydra and turn a composed DictConfig into checked dataclasses."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence, Type, TypeVar

from hydra import compose as hydra_compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.initialize import get_gh_backup, restore_gh_from_backup
from omegaconf import DictConfig, OmegaConf

from stir.config.schema import TrainConfig
from stir.config.validate import validate_train

T = TypeVar("T")


def register_configs() -> None:
    """Make ``train_schema`` available to ``defaults:`` lists. Called by the entry points."""
    ConfigStore.instance().store(name="train_schema", node=TrainConfig)


def to_dataclass(cfg: DictConfig, schema: Type[T]) -> T:
    """The composed config as an instance of its schema (types already checked by OmegaConf)."""
    obj = OmegaConf.to_object(cfg)
    if not isinstance(obj, schema):
        raise TypeError(f"config is a {type(obj).__name__}, expected {schema.__name__}: is the schema first in defaults?")
    return obj


def train_config(cfg: DictConfig) -> TrainConfig:
    """Composed ``train.yaml`` -> a validated ``TrainConfig``; raises ValueError naming the key."""
    out = to_dataclass(cfg, TrainConfig)
    validate_train(out)
    return out


def compose(config_dir: Path, config_name: str, overrides: Sequence[str]) -> DictConfig:
    """``config_name`` under ``config_dir`` composed with ``overrides``, as the entry point would.

    Works inside another Hydra app (evaluate.py resolving zoo recipes): the caller's Hydra state
    is saved and restored around this private composition.
    """
    backup = get_gh_backup()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(Path(config_dir).resolve()), version_base="1.3"):
            return hydra_compose(config_name=config_name, overrides=list(overrides))
    finally:
        restore_gh_from_backup(backup)


def compose_train(config_dir: Path, overrides: Sequence[str]) -> TrainConfig:
    """The TrainConfig that ``python train.py *overrides`` would run, composed without running it."""
    register_configs()
    return train_config(compose(config_dir, "train", overrides))
