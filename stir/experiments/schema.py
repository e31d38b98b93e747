"""The typed schema of ``python evaluate.py`` as plain dataclasses: the common settings
(``EvaluateConfig``), what every experiment kind's config has (``ExperimentConfig``, ``AtIRIsFields``)
and the registry of the kinds' configs (``kind_config``, ``KIND_CONFIGS``).

Each kind's config dataclass lives beside the kind's code, in ``stir/experiments/<module>_config.py``
(``matrix_config.py`` beside ``matrix.py``, ``paper_config.py`` beside ``paper/``), declared there with
``@kind_config(name)``; ``KIND_CONFIGS`` imports those modules, and only those, on first use. Nothing
here or in them imports torch or Lightning: the command line is checked, and ``--help`` answered,
against these classes before the application is imported (``stir.experiments.commands``).
``stir.experiments.config`` checks a composed config against them; each kind's module
(``stir.experiments.<kind>``) registers its runner with its config class.
"""
from __future__ import annotations

import dataclasses
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional

from hydra.core.config_store import ConfigStore

from stir.config.schema import ImagesConfig, LoggerConfig
from stir.inversion.config import ControversialConfig, ExecutionConfig, InversionConfig
from stir.measure.settings import CalibrationConfig
from stir.registry import Registry


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


@dataclass(frozen=True)
class ImagesSpec:
    """Which images X are measured: ``n`` images of ``split``, chosen by ``seed`` (one set per draw
    j, seed + j, with ``resample``)."""

    n: int
    split: str
    seed: int
    resample: bool


@dataclass
class DataSources:
    """A local copy (data.source: an image-folder tree or tar of one) per data set; None: not named."""

    cifar10: Optional[str] = None
    cifar100: Optional[str] = None

    def named(self) -> Dict[str, str]:
        return {name: path for name, path in dataclasses.asdict(self).items() if path is not None}


@dataclass
class ZooConfig:
    """How zoo names become trained models."""

    file: str = "configs/zoo.yaml"  # relative paths are taken from the repository root
    profile: str = "full"  # the train.py profile of every zoo recipe (a name of configs/profile/*.yaml)
    # Added to every recipe. On the command line quote the elements: 'zoo.overrides=["model.width=8"]'.
    overrides: List[str] = field(default_factory=list)
    # Deprecated: data.source=PATH says where CIFAR lives for the images and the zoo alike. Where given,
    # the zoo's recipes read this copy (a one-line warning says so).
    data_source: Optional[str] = None
    # Local copies of the zoo's other data sets: zoo.sources.cifar100=PATH. data.source is the copy of
    # data.name's (CIFAR-10 by default); a recipe reads the copy of its own data set only, and
    # torchvision's files under data.root where none is named.
    sources: DataSources = field(default_factory=DataSources)
    runs_dir: str = "runs"
    # The shipped models (weights in the repository, stir.zoo.shipped): a zoo name without a finished
    # run folder resolves to the entry of its name, profile and recipe; relative paths are taken from
    # the repository root; null: none (train_missing=true then trains every missing model).
    shipped_dir: Optional[str] = "zoo"
    # Results measured on the shipped models and committed with them (<shipped_dir>/store, filled by
    # python -m stir.zoo.ship_results): a measurement whose key is there is copied from it, not
    # computed (its record says where and when it was computed); false: compute everything here.
    shipped_results: bool = True
    # A zoo file entry whose source (or tap) is python:module:name runs that code when named: only with
    # allow_code=true (a zoo file is data; opt in for your own zoo file's python: entries).
    allow_code: bool = False
    # The folder of the real pretrained networks (realnet: sources, the zoo's r20, r56_b, rob_* ...);
    # None: $STIR_REALNETS, else ../shared/realnets beside the repository.
    weights_root: Optional[str] = None


@dataclass
class RobustBenchConfig:
    """Where ``robustbench:NAME`` models come from (RobustBench's own coordinates and weights layout)."""

    dataset: str = "cifar10"  # cifar10 | cifar100 | imagenet
    threat_model: str = "L2"  # Linf | L2 | corruptions
    model_dir: str = "models"  # weights at <model_dir>/<dataset>/<threat_model>/<name>.pt (RobustBench's layout)


# A kind's config module: stir/experiments/<module>_config.py, beside the kind's module (or package).
CONFIG_MODULE_SUFFIX = "_config"
_MODULES = [m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])]

# The experiment kinds' config dataclasses, each declared with its kind's name where it is defined
# (@kind_config("matrix") above its class in matrix_config.py). Collected on first use by importing every
# config module of stir.experiments and nothing else: the kinds' own modules import torch, and the
# command line is checked against these classes first.
KIND_CONFIG: Registry[type] = Registry("experiment kind config", package="stir.experiments",
                                       skip=[m for m in _MODULES if not m.endswith(CONFIG_MODULE_SUFFIX)])


def kind_config(name: str) -> Callable[[type], type]:
    """Class decorator: ``cls`` is the config dataclass of experiment kind ``name`` (``cls.kind_name``)."""

    def declare(cls: type) -> type:
        cls.kind_name = name  # a plain class attribute, not a dataclass field
        return KIND_CONFIG.add(name, cls)

    return declare


# The convention of a preset's ``compute`` text: what the full run costs and what ``profile=cpu`` runs
# instead, "full: <cost>; profile=cpu: <what shrinks>" (docs/presets.md shows it; test_presets asks
# compute_problem of every preset). A preset's own cpu variant (experiment_profile/<preset>_cpu.yaml)
# may restate the text for that profile: "profile=cpu: ..." alone.
COMPUTE_CONVENTION = "full: <what the full preset costs>; profile=cpu: <its small-compute version>"


def compute_problem(compute: str, profile: str = "full") -> Optional[str]:
    """None when ``compute`` (as composed under ``profile``) follows :data:`COMPUTE_CONVENTION`, else
    what is missing, in one line."""
    needed = ("profile=cpu",) if profile == "cpu" else ("full:", "profile=cpu")
    missing = [part for part in needed if part not in compute]
    if missing:
        return f"experiment.compute {compute!r} lacks {' and '.join(repr(m) for m in missing)}: write {COMPUTE_CONVENTION!r}"
    return None


def once(names: Any) -> List[str]:
    """``names`` as strings, in order, each once (what a kind config's ``model_names`` returns)."""
    return list(dict.fromkeys(str(n) for n in names))


@dataclass
class ExperimentConfig:
    """What every experiment kind's config has; each kind adds its own fields (``stir.experiments.<module>_config``)."""

    name: str = "pair"
    kind: str = "pair"  # a registered kind: KIND_CONFIGS below (stir.experiments.kinds() lists them)
    description: str = ""
    compute: str = ""  # the compute this preset needs, as documentation: COMPUTE_CONVENTION

    def model_names(self, common: Any = None) -> List[str]:
        """The model names (zoo names, sources) this experiment measures, in order, once each; ``common``
        is the evaluation's common settings (``EvaluateConfig``: its ``ref`` and ``target``)."""
        return []


@dataclass
class EvaluateConfig:
    """Everything ``python evaluate.py`` reads; ``experiment`` is checked against its kind's dataclass."""

    # The models: m1 (ref, whose IRIs are made) and m2 (target): zoo names, run folders, checkpoints,
    # or models of other sources (robustbench:NAME, torchvision:ARCH, timm:ARCH, python:module:factory).
    ref: str = "at"  # m1: the model whose IRIs are made (a zoo name, run folder, checkpoint or source string)
    target: str = "vanilla"  # m2: the model the IRIs are shown to
    tap_ref: Optional[str] = None  # what ref's `penultimate` reads (models of other sources): a module name, NAME:input, python:module:function
    tap_target: Optional[str] = None  # the same for target
    weights_ref: Optional[str] = None  # ref's weights (models of other sources): a state-dict file or the library's pretrained tag
    weights_target: Optional[str] = None  # the same for target
    zoo: ZooConfig = field(default_factory=ZooConfig)
    train_missing: bool = False  # train zoo models that have no finished run first
    # A model with a NaN or Inf in a weight, buffer or output is refused; true: measured, every number of it NaN.
    allow_nonfinite: bool = False
    # An unfinished run folder is refused (with the command that finishes it); true: its last checkpoint is
    # evaluated, and the record and notes say so.
    allow_unfinished: bool = False
    download_weights: bool = False  # let RobustBench / torchvision / timm download weights that are not on disk
    robustbench: RobustBenchConfig = field(default_factory=RobustBenchConfig)
    # Where CIFAR lives: data.source=PATH (a local copy) is the data the zoo's models were trained on
    # and the images X of models with no training data of their own (every source but the zoo);
    # data=cifar10|cifar100 names the data set of the latter. Only what selects images: the zoo's
    # trainings take their batching and augmentation from their recipes (zoo.overrides).
    data: ImagesConfig = field(default_factory=ImagesConfig)
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

    # The command line's keys stay flat (n=, k=, inversion.steps=); each component is handed its own
    # small config: the estimator's keys have its field names (stir.measure.Estimator.of reads them),
    # the others are assembled by one method below: images(), roles(), run().

    def images(self) -> "ImagesSpec":
        """Which images X are measured (``n``, ``split``, ``image_seed``, ``resample_images``)."""
        return ImagesSpec(self.n, self.split, self.image_seed, self.resample_images)

    def roles(self) -> Dict[str, tuple[str, Optional[str], Optional[str]]]:
        """{ref, target: (the name given, its tap option, its weights option)}."""
        return {"ref": (self.ref, self.tap_ref, self.weights_ref),
                "target": (self.target, self.tap_target, self.weights_target)}

    def run(self) -> ExecutionConfig:
        """``execution``, with the inversion cache under out_dir unless one is named (a new object)."""
        if self.execution.cache_dir is not None:
            return self.execution
        return dataclasses.replace(self.execution, cache_dir=str(Path(self.out_dir) / "inversion-cache"))


# ---------------------------------------------------------------------------------- each kind's config


@dataclass
class AtIRIsFields:
    """Beside the published STIR of each direction, STIR at IRIs (issue 53; ``stir.measure.at_iris``: the IRI
    solver's X', at most ``at_iris_steps`` steps per image, each image stopped at r1 <= ``at_iris_level``,
    ``at_iris_draws`` draws, each on the images that reached the level, with that fraction).
    ``at_iris``: stored (the default: served from the results store, as the shipped zoo's are; a
    direction it does not hold says "not measured" and how to measure it) | measure (measured when not
    stored: about 3x the published procedure's model evaluations per reference model) | off."""

    at_iris: str = "stored"
    at_iris_steps: int = 3000
    at_iris_level: float = 0.02
    at_iris_draws: int = 1


class _KindConfigs(Mapping[str, type]):
    """Each kind's config dataclass by kind name, read from the @kind_config declarations (their modules
    imported on first use; the registry's ``Kind.config`` must be the one declared for its name:
    stir.experiments.registry checks it)."""

    def __getitem__(self, name: str) -> type:
        return KIND_CONFIG.collect().view()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(KIND_CONFIG.collect().view())

    def __len__(self) -> int:
        return len(KIND_CONFIG.collect().view())


KIND_CONFIGS: Mapping[str, type] = _KindConfigs()


def register_evaluate_configs() -> None:
    """``evaluate_schema`` and every kind's schema (``experiment_schema/<kind>``) for the defaults lists."""
    store = ConfigStore.instance()
    store.store(name="evaluate_schema", node=EvaluateConfig)
    for kind, config in KIND_CONFIGS.items():
        store.store(group="experiment_schema", name=kind, node=config)
