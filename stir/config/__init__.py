"""Typed configuration: dataclass schema, Hydra registration, validation."""
from stir.config.schema import (
    AttackConfig, DataConfig, ImagesConfig, LoggerConfig, LossConfig, ModelConfig, OptimConfig, TrainConfig, TrainerConfig,
    WandbConfig,
)
from stir.config.validate import ConfigError, validate_train

__all__ = [
    "AttackConfig", "ConfigError", "DataConfig", "ImagesConfig", "LoggerConfig", "LossConfig", "ModelConfig", "OptimConfig",
    "TrainConfig", "TrainerConfig", "WandbConfig", "validate_train",
]
