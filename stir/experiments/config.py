"""The typed schema of ``python evaluate.py``: what to compare, how it is measured, how it runs, where it goes.

``EvaluateConfig`` holds what every experiment kind shares, in five groups: the models (``ref``,
``target`` and their source options, the zoo, the data of models of other sources), the images X
(``n``, ``split``, ``image_seed``, ``resample_images``), the estimator (``measure``, ``k``, ``iri``,
``inversion``, ``difficulty``, ``min_fraction_iri``, ``calibration``, ``layers``), how it runs
(``execution``, ``device``, shards) and the output (``out_dir``, ``logger``). ``experiment`` is the
kind's own config: each kind declares its dataclass (``ExperimentConfig`` and its fields) in its
module of ``stir.experiments``; ``evaluate_config`` checks the common part and the kind's.
Nothing writes into a config once it is checked.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, ListConfig

from stir.config.schema import DataConfig, LoggerConfig
from stir.config.store import compose, to_dataclass
from stir.config.validate import DATA_NAMES, ConfigError, check_choice, check_positive
from stir.inversion.config import ControversialConfig, ExecutionConfig, InversionConfig
from stir.measure.calibration import CalibrationConfig
from stir.measure.plan import IRI_KINDS, Estimator
from stir.models.taps import REDUCTIONS

SPLITS = ("train", "holdout", "test")


@dataclass
class LayersConfig:
    """Where the models are read: one tap, or every corresponding tap (layer-wise STIR)."""

    # penultimate | all (the depth list: stem, every block, penultimate) | original (the original
    # STIR code's list: each block's first post-ReLU output and pre-ReLU sum) | [tap, ...]
    taps: Any = "penultimate"
    # How a spatial map (n, c, h, w) becomes (n, d): flatten (every unit; default) | spatial_mean
    # (n, c) | original (the original code's mean over channels and height, (n, w): a defect,
    # for comparison with its numbers only).
    reduce: str = "flatten"
    # At most this many tap pairs, evenly spaced over relative depth (first and last kept); None: all.
    count: Optional[int] = None

    def spec(self) -> Any:
        """``taps`` as the model layer takes it: a name, or a list of tap names."""
        return self.taps if isinstance(self.taps, str) else [str(t) for t in self.taps]


@dataclass
class ZooConfig:
    """How zoo names become trained models."""

    file: str = "configs/zoo.yaml"  # relative paths are taken from the repository root
    profile: str = "full"  # the train.py profile of every zoo recipe (full | cpu | laptop)
    # Added to every recipe. On the command line quote the elements: 'zoo.overrides=["model.width=8"]'.
    overrides: List[str] = field(default_factory=list)
    data_source: Optional[str] = None  # shorthand for data.source=PATH in every recipe (a local data set)
    runs_dir: str = "runs"
    # The shipped models (weights in the repository, stir.zoo.shipped): a zoo name without a finished
    # run folder resolves to the entry of its name, profile and recipe; relative paths are taken from
    # the repository root; null: none (train_missing=true then trains every missing model).
    shipped_dir: Optional[str] = "zoo"
    # The folder of the real pretrained networks (realnet: sources, the zoo's r20, r56_b, rob_* ...);
    # None: $STIR_REALNETS, else ../shared/realnets beside the repository.
    weights_root: Optional[str] = None


@dataclass
class RobustBenchConfig:
    """Where ``robustbench:NAME`` models come from (RobustBench's own coordinates and weights layout)."""

    dataset: str = "cifar10"  # cifar10 | cifar100 | imagenet
    threat_model: str = "L2"  # Linf | L2 | corruptions
    model_dir: str = "models"  # weights at <model_dir>/<dataset>/<threat_model>/<name>.pt (RobustBench's layout)


@dataclass
class ExperimentConfig:
    """What every experiment kind's config has; each kind adds its own fields (``stir.experiments.<kind>``)."""

    name: str = "pair"
    kind: str = "pair"  # pair | pairs | matrix | incremental | stitching | layer_matching | grounding | invariance
    description: str = ""
    compute: str = ""  # the compute this preset needs, as documentation


@dataclass
class EvaluateConfig:
    """Everything ``python evaluate.py`` reads; ``experiment`` is checked against its kind's dataclass."""

    # The models: m1 (ref, whose IRIs are made) and m2 (target): zoo names, run folders, checkpoints,
    # or models of other sources (robustbench:NAME, torchvision:ARCH, timm:ARCH, python:module:factory).
    ref: str = "at"  # m1: the model whose IRIs are made (a zoo name, run folder, checkpoint or source string)
    target: str = "vanilla"  # m2: the model the IRIs are shown to
    tap1: Optional[str] = None  # what ref's `penultimate` reads (models of other sources): a module name, NAME:input, python:module:function
    tap2: Optional[str] = None  # the same for target
    weights1: Optional[str] = None  # ref's weights (models of other sources): a state-dict file or the library's pretrained tag
    weights2: Optional[str] = None  # the same for target
    zoo: ZooConfig = field(default_factory=ZooConfig)
    train_missing: bool = False  # train zoo models that have no finished run first
    # A model with a NaN or Inf in a weight, buffer or output is refused; true: measured, every number of it NaN.
    allow_nonfinite: bool = False
    # An unfinished run folder is refused (with the command that finishes it); true: its last checkpoint is
    # evaluated, and the record and notes say so.
    allow_unfinished: bool = False
    download_weights: bool = False  # let RobustBench / torchvision / timm download weights that are not on disk
    robustbench: RobustBenchConfig = field(default_factory=RobustBenchConfig)
    # The images X of a model with no training data of its own (every source but the zoo): the data
    # set (data=cifar10|cifar100) or a local copy (data.source=PATH; default: zoo.data_source).
    data: DataConfig = field(default_factory=DataConfig)
    # The images X.
    n: int = 1000  # images X (the paper: 1000 training images)
    split: str = "train"  # train | holdout | test: where X comes from
    image_seed: int = 0  # which n images
    # X fixed for the k draws (default; the paper's tables, CKA +- 0.000) or resampled per draw
    # (eq. 6 read literally: draw j uses images chosen by image_seed + j).
    resample_images: bool = False
    # The estimator.
    k: int = 5  # seed draws per STIR value
    measure: str = "linear_cka"  # any name of stir.similarity.names()
    iri: str = "both"  # arbitrary | adversarial | both
    inversion: InversionConfig = field(default_factory=InversionConfig)
    difficulty: ControversialConfig = field(default_factory=ControversialConfig)
    # A draw with fewer IRIs (within inversion.tolerance) than this fraction gives STIR = NaN with the
    # reason. Off (0) by default: the published procedure itself ends near a median residual of
    # 0.04-0.07 on CIFAR ResNets (0-6% within 0.02), so a floor would leave it without a number.
    min_fraction_iri: float = 0.0
    # STIR_adv of the constrained objective is measured only where at least this fraction of the
    # adversarial X' reached the IRI bound (only those were pushed; the rest are arbitrary IRIs, and
    # with none the value equals STIR by construction): below it, STIR_adv is NaN with the count.
    min_fraction_adversarial: float = 0.5
    calibration: CalibrationConfig = field(default_factory=CalibrationConfig)
    layers: LayersConfig = field(default_factory=LayersConfig)
    # How it runs (no reported number depends on these).
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)
    device: str = "auto"  # auto | cpu | cuda | cuda:1 ...
    # Several processes (e.g. one per GPU) share an experiment: process `shard` of `shards` computes
    # every shards-th unit (pair, matrix row, link) into the shared store; a run without them assembles.
    shard: int = 0  # this process's share: units shard, shard + shards, ...
    shards: int = 1  # how many processes share the experiment (1: one process, which also writes the report)
    # The output.
    out_dir: str = "results"  # out_dir/store (results), out_dir/inversion-cache, out_dir/<report>-<hash>/
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    iri_grid_images: int = 8  # originals and IRIs shown in the example grid
    # The experiment kind and its own settings (configs/evaluate/experiment/*.yaml): a node typed by its
    # kind's dataclass (each preset's defaults list names /experiment_schema/<kind>).
    experiment: Any = field(default_factory=lambda: {"name": "pair", "kind": "pair"})

    def estimator(self) -> Estimator:
        """The estimator these settings describe (``stir.measure.Estimator``)."""
        return Estimator(measure=self.measure, k=self.k, iri=self.iri, inversion=self.inversion,
                         difficulty=self.difficulty, min_fraction_iri=self.min_fraction_iri,
                         min_fraction_adversarial=self.min_fraction_adversarial, calibration=self.calibration)

    def run(self) -> ExecutionConfig:
        """``execution``, with the inversion cache under out_dir unless one is named (a new object)."""
        if self.execution.cache_dir is not None:
            return self.execution
        return dataclasses.replace(self.execution, cache_dir=str(Path(self.out_dir) / "inversion-cache"))


def register_evaluate_configs() -> None:
    """``evaluate_schema`` and every kind's schema (``experiment_schema/<kind>``) for the defaults lists."""
    from stir.experiments.registry import get, kinds  # the kinds' modules import this one

    store = ConfigStore.instance()
    store.store(name="evaluate_schema", node=EvaluateConfig)
    for kind in kinds():
        store.store(group="experiment_schema", name=kind, node=get(kind).config)


def evaluate_config(cfg: DictConfig) -> Tuple[EvaluateConfig, ExperimentConfig]:
    """The composed config as (the checked common settings, the kind's checked config)."""
    from stir.experiments.registry import get

    common = to_dataclass(cfg, EvaluateConfig)
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
    from stir.similarity import info

    try:
        info(cfg.measure)  # a registered name or a similarity-repository id
    except ValueError as err:
        raise ConfigError(f"measure={cfg.measure!r}: {err}") from None
    check_choice("iri", cfg.iri, IRI_KINDS)
    check_choice("split", cfg.split, SPLITS)
    check_choice("zoo.profile", cfg.zoo.profile, ("full", "cpu", "laptop"))
    check_choice("data.name", cfg.data.name, DATA_NAMES)  # images of models of other sources
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
    try:  # an inversion budget that cannot fit: refused before any model loads
        cfg.inversion.check_budget(cfg.n * cfg.k)  # the k draws are inverted together
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if not 0 <= cfg.min_fraction_iri <= 1:
        raise ConfigError(f"min_fraction_iri={cfg.min_fraction_iri}: a fraction in [0, 1]")
    if not 0 <= cfg.min_fraction_adversarial <= 1:
        raise ConfigError(f"min_fraction_adversarial={cfg.min_fraction_adversarial}: a fraction in [0, 1]")
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
