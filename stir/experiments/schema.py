"""The typed schema of ``python evaluate.py`` as plain dataclasses: the common settings
(``EvaluateConfig``) and every experiment kind's config (``KIND_CONFIGS``).

Nothing here imports torch or Lightning: the command line is checked, and ``--help`` answered,
against these classes before the application is imported (``stir.experiments.commands``).
``stir.experiments.config`` checks a composed config against them; each kind's module
(``stir.experiments.<kind>``) registers its runner with the config class named here.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional

from hydra.core.config_store import ConfigStore

from stir.config.schema import ImagesConfig, LoggerConfig
from stir.inversion.config import ControversialConfig, ExecutionConfig, InversionConfig
from stir.measure.settings import CalibrationConfig
from stir.registry import Registry

if TYPE_CHECKING:
    from stir.stitching import StitchSettings


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


# The experiment kinds' config dataclasses, each declared with its kind's name where it is defined
# (@kind_config("matrix") above its class; torch-free, so the command line is checked against them first).
KIND_CONFIG: Registry[type] = Registry("experiment kind config")


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


def _once(names: Any) -> List[str]:
    """``names`` as strings, in order, each once."""
    return list(dict.fromkeys(str(n) for n in names))


@dataclass
class ExperimentConfig:
    """What every experiment kind's config has; each kind adds its own fields (``stir.experiments.<kind>``)."""

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


@kind_config("pair")
@dataclass
class PairConfig(ExperimentConfig, AtIRIsFields):
    """experiment=pair: ref (m1) vs target (m2), the top-level ``ref`` and ``target``."""

    def model_names(self, common: Any = None) -> List[str]:
        return [] if common is None else _once([common.ref, common.target])  # the top-level ref and target


@kind_config("pairs")
@dataclass
class PairsConfig(ExperimentConfig, AtIRIsFields):
    """experiment kind ``pairs``: each [ref, target] of ``pairs``."""

    pairs: List[List[str]] = field(default_factory=list)

    def model_names(self, common: Any = None) -> List[str]:
        return _once(m for pair in self.pairs for m in pair)


@kind_config("matrix")
@dataclass
class MatrixConfig(ExperimentConfig, AtIRIsFields):
    """experiment kind ``matrix``: every ordered pair of ``models``."""

    models: List[str] = field(default_factory=list)
    # {model: its seed twin}; the diagonal compares a model with its twin, not with itself
    seed_twins: Dict[str, str] = field(default_factory=dict)

    def model_names(self, common: Any = None) -> List[str]:
        return _once([*self.models, *self.seed_twins.values()])


@kind_config("incremental")
@dataclass
class IncrementalConfig(ExperimentConfig, AtIRIsFields):
    """experiment kind ``incremental``: {label: [m_1, m_2, ...]} chains ordered by training-set size."""

    chains: Dict[str, List[str]] = field(default_factory=dict)
    update: str = "scratch"  # scratch (each m_t from scratch, as the paper) | warm (m_t warm-started: <name>_warm)

    def model_names(self, common: Any = None) -> List[str]:
        return _once(m for chain in self.chains.values() for m in chain)


@kind_config("stitching")
@dataclass
class StitchingConfig(ExperimentConfig):
    """experiment kind ``stitching``: how stitching layers are fitted and tested (``stir.stitching``)."""

    pairs: List[List[str]] = field(default_factory=list)  # [[A, B], ...]: both directions of each
    kinds: List[str] = field(default_factory=lambda: ["identity", "linear", "g_relu"])  # identity | linear | g_relu | orthogonal
    seeds: List[int] = field(default_factory=lambda: [0, 1])  # stitching seeds (training subset, batch order)
    epochs: int = 3  # passes of Adam over the training images
    batch_size: int = 128  # training batches of S
    eval_batch_size: int = 500  # statistics and test accuracy (no effect on the numbers)
    lr: float = 0.01
    train_images: Optional[int] = None  # per seed, drawn from the back model's training split (None: all)
    test_images: Optional[int] = None  # the first N of the fixed-order test split (None: all)
    init: str = "match"  # match (least squares / Hungarian / Procrustes) | identity

    def model_names(self, common: Any = None) -> List[str]:
        return _once(m for pair in self.pairs for m in pair)

    def settings(self) -> "StitchSettings":
        from stir.stitching import StitchSettings  # torch: not needed to check a command line

        return StitchSettings(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr,
                              train_images=self.train_images, init=self.init)


@kind_config("layer_matching")
@dataclass
class LayerMatchingConfig(ExperimentConfig):
    """experiment kind ``layer_matching``: seed models in ``models``, taps in ``layers``."""

    models: List[str] = field(default_factory=list)
    measures: List[str] = field(default_factory=list)  # [] = every registered measure (+ rbf_cka_0.8)
    stir: bool = True  # STIR grids too: arbitrary IRIs of every tap of every model (measure, k, inversion)

    def model_names(self, common: Any = None) -> List[str]:
        return _once(self.models)


@kind_config("grounding")
@dataclass
class GroundingConfig(ExperimentConfig):
    """experiment kind ``grounding`` (Ding et al. 2021): seed models in ``models``, taps in ``layers``."""

    models: List[str] = field(default_factory=list)
    measures: List[str] = field(default_factory=list)  # [] = every registered measure (+ rbf_cka_0.8)
    n_probe: int = 1000  # held-out images: linear probes (half train, half score) and the measures
    pc_ks: List[int] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32])  # k PCs deleted
    pc_order: str = "top"  # top (largest variance first) | bottom (smallest nonzero variance first)
    robustness_models: List[str] = field(default_factory=list)  # the OOD axis: every pair of these ([] = skip)
    stir: bool = True  # STIR (both directions) for the depth pairs of two models and the robustness pairs
    n_boot: int = 1000  # bootstrap resamples of the rank correlation

    def model_names(self, common: Any = None) -> List[str]:
        return _once([*self.models, *self.robustness_models])


@kind_config("invariance")
@dataclass
class InvarianceConfig(ExperimentConfig):
    """experiment kind ``invariance`` (G-EED, Kvinge et al. 2022): models in ``models``, taps in ``layers``."""

    models: List[str] = field(default_factory=list)
    transforms: List[str] = field(default_factory=lambda: [
        "hflip", "shift1", "shift2", "shift3", "shift4", "rot90", "rot180", "rot270", "brightness", "grayscale"])
    distances: List[str] = field(default_factory=lambda: ["euclidean", "cosine"])
    noise: List[float] = field(default_factory=lambda: [0.0, 0.05, 0.1])  # Gaussian input noise levels
    random_init: bool = True  # add an untrained network of the first model's architecture

    def model_names(self, common: Any = None) -> List[str]:
        return _once(self.models)


@kind_config("suite")
@dataclass
class SuiteConfig(ExperimentConfig):
    """experiment kind ``suite``: {part name: {kind: ..., <that kind's fields>, layers: {...}, iri: ...}}."""

    parts: Dict[str, Any] = field(default_factory=dict)

    def model_names(self, common: Any = None) -> List[str]:
        from stir.experiments.suite import part_configs  # each part checked by its own kind (torch)

        return _once(m for part, _ in part_configs(self).values() for m in part.model_names(common))


@kind_config("paper")
@dataclass
class PaperConfig(ExperimentConfig, AtIRIsFields):
    """experiment kind ``paper``: the models each claim's preset needs, named by zoo name. Its ``at_iris*``
    fields (``AtIRIsFields``) ask Table 1 and Table 2 again at IRIs (``stir.experiments.paper.at_iris``):
    each direction of their pairs read where its X' are IRIs, from the seeds part's images and seeds, and
    claims 1-3 and 7 judged again on it."""

    # Table 1 (claims 1-6): a recipe's training seeds; seed pairs are every two of them, and AT vs
    # vanilla pairs are (at_i, vanilla_i) by position (independent pairs: no model shared).
    recipes: Dict[str, List[str]] = field(default_factory=lambda: {"vanilla": [], "at": []})
    seeds_iri: str = "both"  # Table 1 has STIR_adv (claim 4)
    # Table 1's STIR_adv row under more adversarial objectives than the evaluation's own
    # (inversion.adversarial_objective, constrained by default): each one is a part of its own,
    # seeds_<objective>, on the same pairs with adversarial IRIs only. The published 0.05-0.10 came from
    # the original code, whose objective is `original` (r1 - 0.1 r2, no bound): claim 4 is judged on
    # that reading where it is measured, the constrained one beside it.
    stir_adv_objectives: List[str] = field(default_factory=lambda: ["original"])
    # Table 2 (claim 7): models ordered from the most robust to the least.
    robustness: List[str] = field(default_factory=list)
    # Claim 7 asked of the graded-robustness family (issue 52): per seed position [vanilla_si, at_e025_si,
    # at_si], least robust first; judged by stir.paper.rules.GRADED (committed before its models exist).
    graded_robustness: List[List[str]] = field(default_factory=list)
    # Figure 1 (claim 8): {family: [m_1, m_2, ...]} ordered by training-set size.
    chains: Dict[str, List[str]] = field(default_factory=dict)
    # Figures 2, 3, 6, 7 (claims 9, 10): {"<dataset> <architecture>": {vanilla: [a, b], at: [c, d]}}
    layer_settings: Dict[str, Dict[str, List[str]]] = field(default_factory=dict)
    # Figures 4, 8 (claim 11): {family: {residual: [...], vgg: [...]}}, the first training seed of each
    # architecture, and {model: [its later training seeds]}: seed position i replaces every model of a
    # family by its i-th later seed, and claim 11's difference is pooled over the positions (as claim
    # 12's). The first later seed is the model's twin on the matrix's diagonal. Seeds of a model the
    # architectures do not name are unused (an override of `architectures` keeps the preset's seeds).
    architectures: Dict[str, Dict[str, List[str]]] = field(default_factory=dict)
    architecture_seeds: Dict[str, List[str]] = field(default_factory=dict)
    # Figures 5, 9 (claim 12): {setting: {at: [its training seeds], trades: [...], mart: [...]}}, as
    # many seeds of each; seed position i is (at_i, trades_i, mart_i), its three pairs measured, and
    # claim 12's differences are pooled over the positions (independent: they share no model).
    methods: Dict[str, Dict[str, List[str]]] = field(default_factory=dict)
    # Where the layer-wise parts read the models (figures 2-3, 6-7: the original code's taps; 5, 9: all).
    layers: LayersConfig = field(default_factory=lambda: LayersConfig(taps="original"))
    methods_layers: LayersConfig = field(default_factory=lambda: LayersConfig(taps="all"))
    # The recipe question (issue 31; part recipe_ablation, no claim of its own): {arm: [its training
    # seeds]}, the first arm the baseline, and {arm: the lever it moves, in words} for the table. Every
    # two seeds of an arm are a seed pair, measured as Table 1's pairs are (seeds_iri); each arm is read
    # against the baseline with Welch's interval and an equivalence test at ablation_margin
    # (stir.experiments.paper.ablation).
    ablation: Dict[str, List[str]] = field(default_factory=dict)
    ablation_levers: Dict[str, str] = field(default_factory=dict)
    ablation_margin: float = 0.05
    # Parts left out of this report (seeds, relative_robustness, incremental, layers, architectures,
    # at_methods, recipe_ablation): their claims read "not measured in this report" (never held or failed), so that a
    # report of the parts measured so far can be written while the others are still to be computed.
    skip: List[str] = field(default_factory=list)
    # Measure nothing: the report of what the results store (and the shipped results, zoo/store) holds.
    # A pair not stored is left out of its part (the part's claims then rest on fewer seed pairs, and
    # say so); a part with nothing stored, or a matrix / chain with a cell missing, is left out like a
    # skipped one ("not measured in this report").
    stored_only: bool = False

    def model_names(self, common: Any = None) -> List[str]:
        return _once([*(m for seeds in self.recipes.values() for m in seeds), *self.robustness,
                      *(m for row in self.graded_robustness for m in row),
                      *(m for chain in self.chains.values() for m in chain),
                      *(m for arms in self.layer_settings.values() for ms in arms.values() for m in ms),
                      *(m for fam in self.architectures.values() for ms in fam.values() for m in ms),
                      *(m for later in self.architecture_seeds.values() for m in later),
                      *(m for setting in self.methods.values() for ms in setting.values() for m in ms),
                      *(m for seeds in self.ablation.values() for m in seeds)])


# Each kind's config dataclass by kind name, collected from the @kind_config declarations (a live view:
# a config declared below it is in it too; the registry's ``Kind.config`` must be the one declared for
# its name: stir.experiments.registry checks it).
KIND_CONFIGS: Mapping[str, type] = KIND_CONFIG.view()


def register_evaluate_configs() -> None:
    """``evaluate_schema`` and every kind's schema (``experiment_schema/<kind>``) for the defaults lists."""
    store = ConfigStore.instance()
    store.store(name="evaluate_schema", node=EvaluateConfig)
    for kind, config in KIND_CONFIGS.items():
        store.store(group="experiment_schema", name=kind, node=config)
