"""Register the typed schema with Hydra and turn a composed DictConfig into checked dataclasses."""
from __future__ import annotations

from typing import Type, TypeVar

from hydra.core.config_store import ConfigStore
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
