"""Hydra registration and validation of the ``evaluate.py`` schema."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, ListConfig

from stir.config.evaluate_schema import EvaluateConfig
from stir.config.store import compose, to_dataclass
from stir.config.validate import DATA_NAMES, ConfigError, check_choice, check_positive

IRI_KINDS = ("arbitrary", "adversarial", "both")
SPLITS = ("train", "holdout", "test")


def register_evaluate_configs() -> None:
    ConfigStore.instance().store(name="evaluate_schema", node=EvaluateConfig)


def evaluate_config(cfg: DictConfig) -> EvaluateConfig:
    out = to_dataclass(cfg, EvaluateConfig)
    validate_evaluate(out)
    return out


def compose_evaluate(config_dir: Path, overrides: Sequence[str]) -> EvaluateConfig:
    """The EvaluateConfig that ``python evaluate.py *overrides`` would run (config_dir: configs/evaluate)."""
    register_evaluate_configs()
    return evaluate_config(compose(config_dir, "evaluate", overrides))


def validate_evaluate(cfg: EvaluateConfig) -> None:
    from stir.evaluation.experiments import kinds  # the registry of experiment modules
    from stir.similarity import names as measures

    check_choice("measure", cfg.measure, measures())
    check_choice("iri", cfg.iri, IRI_KINDS)
    check_choice("split", cfg.split, SPLITS)
    check_choice("experiment.kind", cfg.experiment.kind, kinds())
    check_choice("zoo.profile", cfg.zoo.profile, ("full", "cpu"))
    check_choice("data.name", cfg.data.name, DATA_NAMES)  # images of models from other sources
    check_positive("shards", cfg.shards)
    if not 0 <= cfg.shard < cfg.shards:
        raise ConfigError(f"shard={cfg.shard} with shards={cfg.shards}: shard must be one of 0..{cfg.shards - 1}")
    if cfg.shards > 1 and cfg.train_missing:
        raise ConfigError(
            "train_missing=true with shards > 1 would train the same models in several processes: train the "
            "zoo models first (one run with train_missing=true, or train.py), then start the shards"
        )
    check_positive("n", cfg.n)
    check_positive("k", cfg.k)
    from stir.models.taps import REDUCTIONS

    layers = cfg.layers
    if isinstance(layers.taps, (list, tuple, ListConfig)):
        layers.taps = [str(t) for t in layers.taps]
        if not layers.taps:
            raise ConfigError("layers.taps=[] names no tap; use layers.taps=penultimate, all, original or [tap,...]")
    elif layers.taps not in ("penultimate", "all", "original"):
        raise ConfigError(f"layers.taps={layers.taps!r}: use penultimate, all, original, or a list of tap names "
                          "like layers.taps=[stem,penultimate]")
    check_choice("layers.reduce", layers.reduce, REDUCTIONS)
    if layers.count is not None and layers.count < 2:
        raise ConfigError(f"layers.count={layers.count}: a layer-wise curve needs at least 2 taps (or null for all)")
    check_choice("experiment.update", cfg.experiment.update, ("scratch", "warm"))
    if cfg.experiment.kind == "pairs" and not cfg.experiment.pairs:
        raise ConfigError(f"experiment {cfg.experiment.name!r} of kind 'pairs' lists no pairs")
    if any(len(p) != 2 for p in cfg.experiment.pairs):
        raise ConfigError(f"experiment.pairs must be [ref, target] pairs, got {cfg.experiment.pairs}")
    if cfg.experiment.kind == "matrix" and len(cfg.experiment.models) < 2:
        raise ConfigError(f"experiment {cfg.experiment.name!r} of kind 'matrix' needs at least 2 models")
