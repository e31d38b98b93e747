"""Every experiment preset, full size and profile=cpu, names zoo models whose recipes compose.

A preset that names a missing zoo entry, a chain that is not ordered and warm-started link by
link, or cpu-sized taps that a model lacks would fail only after an hour of training; these
tests catch it in seconds by composing the configs exactly as evaluate.py and train.py do.
"""
from pathlib import Path

import pytest

from stir.config.store import compose_train
from stir.experiments import registry
from stir.experiments.config import compose_evaluate as compose_both
from stir.experiments.schema import compute_problem
from stir.models import build, sources
from stir.models.depth import layer_pairs
from stir.zoo import load_sourced, load_zoo

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
ZOO = load_zoo(CONFIGS / "zoo.yaml")
SOURCED = load_sourced(CONFIGS / "zoo.yaml")  # entries naming models of other sources (never trained)
PRESETS = sorted(p.stem for p in (CONFIGS / "evaluate/experiment").glob("*.yaml"))


class Composed:
    """The common settings with the kind's config as ``experiment`` (what evaluate.py runs)."""

    def __init__(self, common, experiment):
        self._common, self.experiment = common, experiment

    def __getattr__(self, name):
        return getattr(self._common, name)


def compose_evaluate(config_dir, overrides) -> Composed:
    return Composed(*compose_both(config_dir, overrides))


def models_of(cfg) -> list:
    """The models the composed evaluation names: its kind says (``Kind.models``), no field is guessed here."""
    experiment = cfg.experiment
    return registry.get(experiment.kind).models(experiment, cfg._common)


def recipe(name: str, profile: str):
    """The TrainConfig of a zoo entry under a profile (init_from checked separately)."""
    return compose_train(CONFIGS, [f"profile={profile}", *ZOO[name].train])


@pytest.mark.parametrize("profile", ["full", "cpu"])
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_models_are_zoo_recipes_that_compose(preset, profile):
    cfg = compose_evaluate(CONFIGS / "evaluate", [f"experiment={preset}", f"profile={profile}"])
    assert cfg.experiment.name == preset and cfg.zoo.profile == profile
    assert compute_problem(cfg.experiment.compute, profile) is None  # "full: ...; profile=cpu: ..." (schema.COMPUTE_CONVENTION)
    names = models_of(cfg)
    assert names, f"{preset} names no model"
    for name in names:
        if name in SOURCED:
            assert sources.split_spec(SOURCED[name].source)[0] in sources.names()[1:], SOURCED[name]
            continue
        assert name in ZOO, f"{preset} names {name!r}, which is not in configs/zoo.yaml"
        train = recipe(name, profile)
        if profile == "cpu":  # the small-compute recipe: width 8, at most 5,000 images, 3 epochs
            assert train.model.width == 8 and train.data.train_size <= 5000 and train.trainer.max_epochs == 3
        if ZOO[name].init_from is not None:
            assert ZOO[name].init_from in ZOO


@pytest.mark.parametrize("profile", ["full", "cpu"])
def test_incremental_chains_have_nine_sizes_from_scratch_and_a_warm_variant(profile):
    cfg = compose_evaluate(CONFIGS / "evaluate", ["experiment=incremental", f"profile={profile}"])
    assert set(cfg.experiment.chains) == {"vanilla", "AT"} and cfg.experiment.update == "scratch"
    step = 5000 if profile == "full" else 500
    for label, chain in cfg.experiment.chains.items():
        sizes = [recipe(m, profile).data.train_size for m in chain]
        assert sizes == [step * i for i in range(1, 10)], f"{label}: sizes {sizes}"
        assert all(ZOO[m].init_from is None for m in chain)  # from scratch, as the paper describes
        warm = chain[:1] + [f"{m}_warm" for m in chain[1:]]  # update=warm: each from the previous
        assert [ZOO[m].init_from for m in warm[1:]] == warm[:-1]
        assert [recipe(m, profile).data.train_size for m in warm] == sizes
        losses = {recipe(m, profile).loss.name for m in chain + warm}
        assert losses == ({"vanilla"} if label == "vanilla" else {"at"})
    full = compose_evaluate(CONFIGS / "evaluate", ["experiment=incremental", "profile=full"])
    if profile == "cpu":  # the cpu chains are their own, smaller models
        assert set(models_of(cfg)).isdisjoint(models_of(full))
    assert compose_evaluate(CONFIGS / "evaluate", ["experiment=incremental", "experiment.update=warm"]).experiment.update == "warm"


@pytest.mark.parametrize("profile", ["full", "cpu"])
def test_layer_preset_reads_the_original_code_taps_of_every_model(profile):
    cfg = compose_evaluate(CONFIGS / "evaluate", ["experiment=layers", f"profile={profile}"])
    assert cfg.layers.taps == "original" and cfg.layers.reduce == "flatten"
    assert (cfg.layers.count is None) == (profile == "full")
    archs = set()
    for ref, target in cfg.experiment.pairs:
        nets = []
        for name in (ref, target):
            train = recipe(name, profile)
            archs.add(train.model.arch)
            nets.append(build(train.model, train.data.num_classes, (0.5,) * 3, (0.25,) * 3))
        pairs = layer_pairs(*nets, cfg.layers.taps, cfg.layers.reduce, cfg.layers.count)
        assert pairs[-1][:2] == ("penultimate", "penultimate") and len(pairs) == (cfg.layers.count or len(pairs))
    assert archs == ({"resnet18", "resnet34", "vgg16", "vgg19"} if profile == "full" else {"resnet18", "vgg16"})


def test_architectures_diagonal_compares_seed_twins():
    cfg = compose_evaluate(CONFIGS / "evaluate", ["experiment=architectures"])
    twins = cfg.experiment.seed_twins
    assert set(twins) == set(cfg.experiment.models)
    for model, twin in twins.items():
        a, b = recipe(model, "full"), recipe(twin, "full")
        assert (a.model, a.loss, a.data) == (b.model, b.loss, b.data) and a.seed != b.seed


def test_matrix_diagonal_label_says_which_cells_hold_a_seed_twin():
    """A matrix whose twins are only partly shipped (the paper preset on the laptop zoo) must not call
    every diagonal cell a seed-twin comparison."""
    from stir.experiments.matrix import _diagonal_label
    from stir.experiments.matrix_config import MatrixConfig

    models = ["vanilla", "resnet34", "vgg16"]
    partial = MatrixConfig(name="m", kind="matrix", models=models, seed_twins={"vanilla": "vanilla_s1"})
    assert _diagonal_label(partial, models, {"vanilla": "vanilla_s1"}) == \
        "diagonal: seed twins (vanilla vs vanilla_s1), the other models vs themselves"
    full = MatrixConfig(name="m", kind="matrix", models=models[:1], seed_twins={"vanilla": "vanilla_s1"})
    assert _diagonal_label(full, models[:1], {"vanilla": "vanilla_s1"}) == "diagonal: each model vs its seed twin"
    none = MatrixConfig(name="m", kind="matrix", models=models)
    assert _diagonal_label(none, models, {}) == "diagonal: each model vs itself"


def test_at_methods_runs_both_betas_of_the_paper():
    cfg = compose_evaluate(CONFIGS / "evaluate", ["experiment=at_methods"])
    betas = {(recipe(m, "full").loss.name, recipe(m, "full").loss.beta) for pair in cfg.experiment.pairs for m in pair}
    assert {("trades", 1.0), ("trades", 0.1), ("mart", 1.0), ("mart", 0.1)} <= betas
    assert cfg.layers.taps == "all"


def test_a_preset_without_a_cpu_variant_keeps_its_own_settings():
    seeds = compose_evaluate(CONFIGS / "evaluate", ["experiment=seeds", "profile=cpu"])
    full = compose_evaluate(CONFIGS / "evaluate", ["experiment=seeds"])
    assert seeds.iri == "both" and seeds.layers.taps == "penultimate" and (seeds.n, seeds.k) == (100, 2)
    assert seeds.inversion.mode == "faithful" and seeds.inversion.num_steps == 150  # fewer steps, said in the report
    assert full.inversion.mode == "faithful" and full.inversion.num_steps == 1000 and full.inversion.fake_relu_spec == "published"
    full = compose_evaluate(CONFIGS / "evaluate", ["experiment=seeds"])
    assert (full.n, full.k, full.zoo.profile) == (1000, 5, "full")


@pytest.mark.parametrize("preset", ["seeds", "relative_robustness"])
def test_profile_laptop_trains_the_presets_zoo_with_the_fast_recipe(preset):
    """profile=laptop: the zoo of the seeds and relative_robustness presets with train.py's profile=laptop
    (the fast recipe at width 16, 15 epochs), evaluated at n=100, k=2, 300 steps."""
    cfg = compose_evaluate(CONFIGS / "evaluate", [f"experiment={preset}", "profile=laptop"])
    assert cfg.zoo.profile == "laptop" and (cfg.n, cfg.k, cfg.inversion.steps) == (100, 2, 300)
    for name in models_of(cfg):
        train = recipe(name, "laptop")
        assert (train.recipe_name, train.model.width, train.trainer.max_epochs) == ("fast", 16, 15)
        assert train.loss.label_smoothing == 0.2 and train.trainer.precision == "bf16-mixed"
        if train.loss.name != "vanilla":  # few-step AT under the catastrophic-overfitting guard
            assert train.robust_check.images > 0
