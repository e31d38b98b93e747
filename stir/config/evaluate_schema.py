"""The typed schema of ``python evaluate.py``: what to compare, how, and where results go."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional

from stir.config.schema import DataConfig, LoggerConfig
from stir.inversion.config import ControversialConfig, InversionConfig


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


@dataclass
class ZooConfig:
    """How zoo names become trained models."""

    file: str = "configs/zoo.yaml"  # relative paths are taken from the repository root
    profile: str = "full"  # the train.py profile of every zoo recipe (full | cpu)
    # Added to every recipe. On the command line quote the elements: 'zoo.overrides=["model.width=8"]'.
    overrides: List[str] = field(default_factory=list)
    data_source: Optional[str] = None  # shorthand for data.source=PATH in every recipe (a local data set)
    runs_dir: str = "runs"


@dataclass
class RobustBenchConfig:
    """Where ``robustbench:NAME`` models come from (RobustBench's own coordinates and weights layout)."""

    dataset: str = "cifar10"  # cifar10 | cifar100 | imagenet
    threat_model: str = "L2"  # Linf | L2 | corruptions
    model_dir: str = "models"  # weights at <model_dir>/<dataset>/<threat_model>/<name>.pt (RobustBench's layout)


@dataclass
class ExperimentConfig:
    """A preset comparison (configs/evaluate/experiment/*.yaml); kind 'pair' is ref vs target."""

    name: str = "pair"
    kind: str = "pair"  # pair | pairs | matrix | incremental | stitching | layer_matching | grounding | invariance
    description: str = ""
    pairs: List[List[str]] = field(default_factory=list)  # pairs: [[ref, target], ...]
    models: List[str] = field(default_factory=list)  # matrix: every ordered pair of these
    chains: Any = field(default_factory=dict)  # incremental: {label: [m_1, m_2, ...]} ordered by size
    # incremental: scratch (each m_t trained from scratch on its larger set, as the paper describes)
    # | warm (m_t warm-started from m_t-1: the zoo names <name>_warm)
    update: str = "scratch"
    # matrix: {model: its seed twin}; the diagonal compares a model with its twin, not with itself
    seed_twins: Any = field(default_factory=dict)
    compute: str = ""  # the compute this preset needs, as documentation


@dataclass
class StitchingConfig:
    """experiment=stitching: how stitching layers are fitted and tested (``stir.stitching``)."""

    kinds: List[str] = field(default_factory=lambda: ["identity", "linear", "g_relu"])  # identity | linear | g_relu | orthogonal
    seeds: List[int] = field(default_factory=lambda: [0, 1])  # stitching seeds (training subset, batch order)
    epochs: int = 3  # passes of Adam over the training images
    batch_size: int = 128  # training batches of S
    eval_batch_size: int = 500  # statistics and test accuracy (no effect on the numbers)
    lr: float = 0.01
    train_images: Optional[int] = None  # per seed, drawn from the back model's training split (None: all)
    test_images: Optional[int] = None  # the first N of the fixed-order test split (None: all)
    init: str = "match"  # match (least squares / Hungarian / Procrustes) | identity


@dataclass
class LayerMatchingConfig:
    """experiment=layer_matching (Kornblith et al. 2019 table 2): seed models in experiment.models, taps in layers."""

    measures: List[str] = field(default_factory=list)  # [] = every registered measure (+ rbf_cka_0.8)
    stir: bool = True  # STIR grids too: arbitrary IRIs of every tap of every model (measure, k, inversion)


@dataclass
class GroundingConfig:
    """experiment=grounding (Ding et al. 2021): seed models in experiment.models, taps in layers."""

    measures: List[str] = field(default_factory=list)  # [] = every registered measure (+ rbf_cka_0.8)
    n_probe: int = 1000  # held-out images: linear probes (half train, half score) and the measures
    pc_ks: List[int] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32])  # k PCs deleted
    pc_order: str = "top"  # top (largest variance first) | bottom (smallest nonzero variance first)
    robustness_models: List[str] = field(default_factory=list)  # the OOD axis: every pair of these ([] = skip)
    stir: bool = True  # STIR (both directions, penultimate) for the robustness pairs
    n_boot: int = 1000  # bootstrap resamples of the rank correlation


@dataclass
class InvarianceConfig:
    """experiment=invariance (G-EED, Kvinge et al. 2022): models in experiment.models, taps in layers."""

    transforms: List[str] = field(default_factory=lambda: [
        "hflip", "shift1", "shift2", "shift3", "shift4", "rot90", "rot180", "rot270", "brightness", "grayscale"])
    distances: List[str] = field(default_factory=lambda: ["euclidean", "cosine"])
    noise: List[float] = field(default_factory=lambda: [0.0, 0.05, 0.1])  # Gaussian input noise levels
    random_init: bool = True  # add an untrained network of the first model's architecture


@dataclass
class EvaluateConfig:
    """Everything ``python evaluate.py`` reads."""

    ref: str = "at"  # m1: a zoo name or a run folder / checkpoint path
    target: str = "vanilla"  # m2
    n: int = 1000  # images X (the paper: 1000 training images)
    k: int = 5  # seed draws per STIR value
    measure: str = "linear_cka"  # any name of stir.similarity.names()
    iri: str = "both"  # arbitrary | adversarial | both
    layers: LayersConfig = field(default_factory=LayersConfig)
    split: str = "train"  # train | holdout | test: where X comes from
    image_seed: int = 0  # which n images
    # X fixed for the k draws (default; the paper's tables, CKA +- 0.000) or resampled per draw
    # (eq. 6 read literally: draw j uses images chosen by image_seed + j).
    resample_images: bool = False
    inversion: InversionConfig = field(default_factory=InversionConfig)
    difficulty: ControversialConfig = field(default_factory=ControversialConfig)
    zoo: ZooConfig = field(default_factory=ZooConfig)
    experiment: ExperimentConfig = field(default_factory=ExperimentConfig)
    train_missing: bool = False  # train zoo models that have no finished run first
    device: str = "auto"  # auto | cpu | cuda | cuda:1 ...
    # Several processes (e.g. one per GPU) share an experiment: process `shard` of `shards` computes
    # every shards-th pair / matrix row / link into the shared store; a run without them assembles.
    shard: int = 0
    shards: int = 1
    out_dir: str = "results"  # results/<experiment name>/: store, tables, plots
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    iri_grid_images: int = 8  # originals and IRIs shown in the example grid
    # Models from other sources (ref/target = robustbench:NAME, torchvision:ARCH, timm:ARCH,
    # python:module.path:factory; zoo.yaml entries may name them too, with these keys per entry).
    tap1: Optional[str] = None  # what ref's `penultimate` reads: a module name, NAME:input, or python:module:function
    tap2: Optional[str] = None  # the same for target
    weights1: Optional[str] = None  # ref's weights: a state-dict file or the library's pretrained tag (DEFAULT, pretrained)
    weights2: Optional[str] = None  # the same for target
    download_weights: bool = False  # let RobustBench / torchvision / timm download weights that are not on disk
    robustbench: RobustBenchConfig = field(default_factory=RobustBenchConfig)
    # The images X of a model with no training data of its own (every source but the zoo): the data
    # set (data=cifar10|cifar100, torchvision's files) or a local copy (data.source=PATH; default:
    # zoo.data_source), sampled from `split` as for zoo models.
    data: DataConfig = field(default_factory=DataConfig)
    stitching: StitchingConfig = field(default_factory=StitchingConfig)  # experiment kind 'stitching' only
    layer_matching: LayerMatchingConfig = field(default_factory=LayerMatchingConfig)
    grounding: GroundingConfig = field(default_factory=GroundingConfig)
    invariance: InvarianceConfig = field(default_factory=InvarianceConfig)
