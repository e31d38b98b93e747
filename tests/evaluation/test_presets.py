"""Every experiment preset, full size and profile=cpu, names zoo models whose recipes compose.

A preset that names a missing zoo entry, a chain that is not ordered and warm-started link by
link, or cpu-sized taps that a model lacks would fail only after an hour of training; these
tests catch it in seconds by composing the configs exactly as evaluate.py and train.py do.
"""
from pathlib import Path

import pytest

from stir.config.evaluate_store import compose_evaluate
from stir.config.store import compose_train
from stir.evaluation.zoo import load_sourced, load_zoo
from stir.models import sources
from stir.models import build, tap_names

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
ZOO = load_zoo(CONFIGS / "zoo.yaml")
SOURCED = load_sourced(CONFIGS / "zoo.yaml")  # entries naming models of other sources (never trained)
PRESETS = sorted(p.stem for p in (CONFIGS / "evaluate/experiment").glob("*.yaml") if p.stem != "pair")


def models_of(experiment) -> list:
    names = [m for pair in experiment.pairs for m in pair] + list(experiment.models)
    names += [m for chain in experiment.chains.values() for m in chain]
    return list(dict.fromkeys(names))


def recipe(name: str, profile: str):
    """The TrainConfig of a zoo entry under a profile (init_from checked separately)."""
    return compose_train(CONFIGS, [f"profile={profile}", *ZOO[name].train])


@pytest.mark.parametrize("profile", ["full", "cpu"])
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_models_are_zoo_recipes_that_compose(preset, profile):
    cfg = compose_evaluate(CONFIGS / "evaluate", [f"experiment={preset}", f"profile={profile}"])
    assert cfg.experiment.name == preset and cfg.zoo.profile == profile
    assert "profile=cpu" in cfg.experiment.compute  # each preset states its small-compute version
    assert profile == "cpu" or "full:" in cfg.experiment.compute
    names = models_of(cfg.experiment)
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
def test_incremental_chains_grow_and_warm_start_link_by_link(profile):
    cfg = compose_evaluate(CONFIGS / "evaluate", ["experiment=incremental", f"profile={profile}"])
    assert set(cfg.experiment.chains) == {"vanilla", "AT"}
    for label, chain in cfg.experiment.chains.items():
        sizes = [recipe(m, profile).data.train_size for m in chain]
        assert len(chain) == 5 and sizes == sorted(set(sizes)), f"{label}: sizes {sizes} must strictly grow"
        assert ZOO[chain[0]].init_from is None
        assert [ZOO[m].init_from for m in chain[1:]] == list(chain[:-1])
        losses = {recipe(m, profile).loss.name for m in chain}
        assert losses == ({"vanilla"} if label == "vanilla" else {"at"})
    full = compose_evaluate(CONFIGS / "evaluate", ["experiment=incremental", "profile=full"])
    if profile == "cpu":  # the cpu chains are their own, smaller models
        assert set(models_of(cfg.experiment)).isdisjoint(models_of(full.experiment))


@pytest.mark.parametrize("profile", ["full", "cpu"])
def test_layer_preset_taps_exist_in_every_model(profile):
    cfg = compose_evaluate(CONFIGS / "evaluate", ["experiment=layers", f"profile={profile}"])
    assert cfg.layers == "all" if profile == "full" else cfg.layers[-1] == "penultimate"
    for name in models_of(cfg.experiment):
        train = recipe(name, profile)
        taps = tap_names(build(train.model, train.data.num_classes, (0.5,) * 3, (0.25,) * 3))
        if cfg.layers != "all":
            assert set(cfg.layers) <= set(taps), f"{name}: {sorted(set(cfg.layers) - set(taps))} not among {taps}"


def test_a_preset_without_a_cpu_variant_keeps_its_own_settings():
    seeds = compose_evaluate(CONFIGS / "evaluate", ["experiment=seeds", "profile=cpu"])
    assert seeds.iri == "both" and seeds.layers == "penultimate" and (seeds.n, seeds.k) == (100, 2)
    full = compose_evaluate(CONFIGS / "evaluate", ["experiment=seeds"])
    assert (full.n, full.k, full.zoo.profile) == (1000, 5, "full")
