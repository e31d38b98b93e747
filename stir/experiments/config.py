"""The checked config of ``python evaluate.py``: what to compare, how it is measured, how it runs, where it goes.

The dataclasses are in ``stir.experiments.schema`` (no torch: the command line is checked against
them first) and re-exported here. ``EvaluateConfig`` holds what every experiment kind shares, in five groups: the models (``ref``,
``target`` and their source options, the zoo, the data of models of other sources), the images X
(``n``, ``split``, ``image_seed``, ``resample_images``), the estimator (``measure``, ``k``, ``iri``,
``inversion``, ``difficulty``, ``min_fraction_iri``, ``calibration``, ``layers``), how it runs
(``execution``, ``device``, shards) and the output (``out_dir``, ``logger``). ``experiment`` is the
kind's own config: each kind's dataclass (``ExperimentConfig`` and its fields), declared beside the
kind in ``stir/experiments/<module>_config.py``, is in ``stir.experiments.schema.KIND_CONFIGS``; ``evaluate_config`` checks the common part and the kind's.
Every default that depends on another setting (the inversion's steps, the walk's following them) is
filled in by ``evaluate_config``, once (``stir.inversion.config.resolved_budgets``); nothing writes into
a config once it is checked, the run's one ``Estimator`` carries it whole to the descent loop, and a
run's record is a plain copy of it (``stir.experiments.context.record_config``).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence, Tuple

from omegaconf import DictConfig, ListConfig

from stir.config.argv import group_choices
from stir.config.store import compose, to_dataclass
from stir.config.validate import DATA_NAMES, ConfigError, check_choice, check_positive
from stir.experiments.schema import (  # noqa: F401  (re-exported: the schema's classes by their old address)
    KIND_CONFIGS, EvaluateConfig, ExperimentConfig, LayersConfig, RobustBenchConfig, ZooConfig, register_evaluate_configs,
)
from stir.inversion.config import resolved_budgets
from stir.models.taps import REDUCTIONS

SPLITS = ("train", "holdout", "test")
TRAIN_CONFIGS = Path(__file__).resolve().parents[2] / "configs"  # train.py's config folder (the zoo's recipes)


def evaluate_config(cfg: DictConfig) -> Tuple[EvaluateConfig, ExperimentConfig]:
    """The composed config as (the checked common settings, the kind's checked config), every default
    that depends on another setting filled in here, once (``resolved_budgets``: the inversion's and the
    walk's steps as integers); nothing downstream resolves or writes into them."""
    from stir.experiments.registry import get

    common: EvaluateConfig = resolved_budgets(to_dataclass(cfg, EvaluateConfig))
    _validate(common)
    experiment = common.experiment
    kind = get(getattr(experiment, "kind", None) or "pair")
    if not isinstance(experiment, kind.config):
        raise ConfigError(f"experiment (kind {kind.name!r}) is not typed by its kind's schema: a preset's defaults list "
                          f"must start with /experiment_schema/{kind.name}@experiment")
    kind.check(experiment)
    return dataclasses.replace(common, experiment=None), experiment


def compose_evaluate(config_dir: Path, overrides: Sequence[str]) -> Tuple[EvaluateConfig, ExperimentConfig]:
    """The configs that ``python evaluate.py *overrides`` would run (config_dir: configs/evaluate)."""
    register_evaluate_configs()
    return evaluate_config(compose(config_dir, "evaluate", overrides))


def _validate(cfg: EvaluateConfig) -> None:
    from stir.measure.plan import check_estimator  # torch: not needed to check a command line

    try:  # measure, k, iri, min_fraction_*: the library's check of them (stir.measure.plan), no Estimator built
        check_estimator(cfg)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    check_choice("split", cfg.split, SPLITS)
    profiles = group_choices(TRAIN_CONFIGS, ("profile",))["profile"]  # train.py's profiles: configs/profile/*.yaml
    if profiles:  # (a copy of the package without the repository's configs/ leaves it to the zoo's recipes)
        check_choice("zoo.profile", cfg.zoo.profile, profiles)
    check_choice("data.name", cfg.data.name, DATA_NAMES)  # images of models of other sources
    for name in cfg.zoo.sources.named():
        if name == cfg.data.name:
            raise ConfigError(f"zoo.sources.{name}: the copy of data.name's data set ({name}) is data.source=PATH; "
                              "zoo.sources names the copies of the others (zoo.sources.cifar100=PATH)")
    check_positive("shards", cfg.shards)
    if not 0 <= cfg.shard < cfg.shards:
        raise ConfigError(f"shard={cfg.shard} with shards={cfg.shards}: shard must be one of 0..{cfg.shards - 1}")
    if cfg.shards > 1 and cfg.train_missing:
        raise ConfigError(
            "train_missing=true with shards > 1 would train the same models in several processes: train the "
            "zoo models first (one run with train_missing=true, or train.py), then start the shards"
        )
    check_positive("n", cfg.n)
    if cfg.iri_grid_images < 1:  # checked before the work, not when the grid is drawn after it
        raise ConfigError(f"iri_grid_images={cfg.iri_grid_images} must be >= 1 (the originals and IRIs shown in the "
                          "example grid)")
    try:  # an inversion budget that cannot fit: refused before any model loads
        cfg.inversion.check_budget(cfg.n * cfg.k)  # the k draws are inverted together
    except ValueError as err:
        raise ConfigError(str(err)) from None
    layers = cfg.layers
    if isinstance(layers.taps, (list, tuple, ListConfig)):
        if not layers.taps:
            raise ConfigError("layers.taps=[] names no tap; use layers.taps=penultimate, all, original or [tap,...]")
    elif layers.taps not in ("penultimate", "all", "original"):
        raise ConfigError(f"layers.taps={layers.taps!r}: use penultimate, all, original, or a list of tap names "
                          "like layers.taps=[stem,penultimate]")
    check_choice("layers.reduce", layers.reduce, REDUCTIONS)
    if layers.count is not None and layers.count < 2:
        raise ConfigError(f"layers.count={layers.count}: a layer-wise curve needs at least 2 taps (or null for all)")
