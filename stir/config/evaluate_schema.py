"""The typed schema of ``python evaluate.py``: what to compare, how, and where results go."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional

from stir.config.schema import LoggerConfig
from stir.inversion.config import InversionConfig


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
class ExperimentConfig:
    """A preset comparison (configs/evaluate/experiment/*.yaml); kind 'pair' is ref vs target."""

    name: str = "pair"
    kind: str = "pair"  # pair | pairs | matrix | incremental | layer_matching | grounding | invariance
    description: str = ""
    pairs: List[List[str]] = field(default_factory=list)  # pairs: [[ref, target], ...]
    models: List[str] = field(default_factory=list)  # matrix: every ordered pair of these
    chains: Any = field(default_factory=dict)  # incremental: {label: [m_1, m_2, ...]} ordered by size
    compute: str = ""  # the compute this preset needs, as documentation


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
    layers: Any = "penultimate"  # penultimate | all | [tap, ...] (taps of the reference model)
    split: str = "train"  # train | holdout | test: where X comes from
    image_seed: int = 0  # which n images
    inversion: InversionConfig = field(default_factory=InversionConfig)
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
    layer_matching: LayerMatchingConfig = field(default_factory=LayerMatchingConfig)
    grounding: GroundingConfig = field(default_factory=GroundingConfig)
    invariance: InvarianceConfig = field(default_factory=InvarianceConfig)
