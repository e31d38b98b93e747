"""One key says where CIFAR lives: ``data.source`` for the images and the zoo alike; ``zoo.data_source``
(its older spelling) still works, with a one-line deprecation (issue 32)."""
import logging

import pytest

from conftest import REPO
from stir.config.validate import ConfigError
from stir.experiments.config import compose_evaluate
from stir.experiments.context import open_context, zoo_source

CONFIGS = REPO / "configs" / "evaluate"


def test_data_source_alone_is_where_the_zoo_was_trained(tmp_path, caplog):
    cfg, experiment = compose_evaluate(CONFIGS, ["data.source=/data/cifar10.tar", f"out_dir={tmp_path}"])
    with caplog.at_level(logging.WARNING):
        assert zoo_source(cfg) == "/data/cifar10.tar"
        ctx = open_context(cfg, experiment, repo=REPO)
    assert not [r for r in caplog.records if "deprecated" in r.getMessage()]
    assert "data.source=/data/cifar10.tar" in ctx.zoo.recipes.overrides("vanilla")  # every CIFAR-10 recipe reads that copy
    assert ctx.zoo.recipes.train_config("vanilla").data.source == "/data/cifar10.tar"
    assert ctx.zoo.data.source == "/data/cifar10.tar"  # and the images of models of other sources


def test_the_older_key_still_works_and_says_it_is_deprecated_in_one_line(caplog):
    cfg, _ = compose_evaluate(CONFIGS, ["zoo.data_source=/data/old.tar"])
    with caplog.at_level(logging.WARNING):
        assert zoo_source(cfg) == "/data/old.tar"
    lines = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0] and "data.source=PATH" in lines[0]


def test_two_different_copies_are_said_which_reads_which(caplog):
    cfg, _ = compose_evaluate(CONFIGS, ["zoo.data_source=/data/a.tar", "data.source=/data/b.tar"])
    with caplog.at_level(logging.WARNING):
        assert zoo_source(cfg) == "/data/a.tar"
    assert "the zoo reads /data/a.tar, other models' images /data/b.tar" in caplog.text


def test_no_copy_at_all_is_torchvisions_download_as_before():
    cfg, _ = compose_evaluate(CONFIGS, [])
    assert zoo_source(cfg) is None


def test_evaluate_s_data_group_selects_images_and_the_zoo_trains_with_its_recipes_data(tmp_path):
    """Issue 32: evaluate.py's ``data`` is an ``ImagesConfig`` (what selects images); models of other
    sources load through the ``DataConfig`` of those values, and the zoo's trainings keep their recipes'
    whole ``DataConfig`` (batching and augmentation included), given in ``zoo.overrides``."""
    import dataclasses

    from stir.config.schema import DataConfig, ImagesConfig

    cfg, experiment = compose_evaluate(CONFIGS, ["data=cifar100", "data.holdout_size=10", f"out_dir={tmp_path}",
                                                 'zoo.overrides=["data.augment=false","data.batch_size=64"]'])
    assert type(cfg.data) is ImagesConfig
    ctx = open_context(cfg, experiment, repo=REPO)
    loaded = ctx.zoo.data
    assert type(loaded) is DataConfig and (loaded.name, loaded.num_classes, loaded.holdout_size) == ("cifar100", 100, 10)
    training_only = [f for f in dataclasses.fields(DataConfig) if f.name not in {g.name for g in dataclasses.fields(ImagesConfig)}]
    assert training_only and all(getattr(loaded, f.name) == f.default for f in training_only)
    trained = ctx.zoo.recipes.train_config("vanilla").data
    assert type(trained) is DataConfig and (trained.augment, trained.batch_size, trained.name) == (False, 64, "cifar10")


def test_a_cifar100_recipe_reads_its_own_copy_never_the_cifar10_one(tmp_path):
    """data.source is the copy of data.name's data set (CIFAR-10): a CIFAR-100 zoo recipe (claim 10's
    c100) is not pointed at it (its training would find 10 classes, and its train command in the
    report would be wrong); zoo.sources.cifar100=PATH names its copy."""
    cfg, experiment = compose_evaluate(CONFIGS, ["data.source=/data/cifar10.tar", f"out_dir={tmp_path}"])
    recipes = open_context(cfg, experiment, repo=REPO).zoo.recipes
    assert recipes.data_name("c100") == "cifar100" and recipes.data_name("vanilla") == "cifar10"
    assert recipes.train_config("c100").data.source is None
    assert "cifar10.tar" not in recipes.resolve("c100").command
    # a CIFAR-10 recipe's command keeps its order (its run folder and its records are those of before)
    assert recipes.resolve("vanilla").command == ("python train.py profile=full data.source=/data/cifar10.tar "
                                                  "runs_dir=runs loss=vanilla")
    cfg, experiment = compose_evaluate(CONFIGS, ["data.source=/data/cifar10.tar", "zoo.sources.cifar100=/data/c100.tar",
                                                 f"out_dir={tmp_path}"])
    recipes = open_context(cfg, experiment, repo=REPO).zoo.recipes
    assert recipes.train_config("c100").data.source == "/data/c100.tar"
    assert recipes.train_config("c100_at_s1").data.source == "/data/c100.tar"
    assert recipes.train_config("vanilla").data.source == "/data/cifar10.tar"


def test_a_second_copy_of_data_name_s_own_data_set_is_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"zoo.sources.cifar10: .* is data.source=PATH"):
        compose_evaluate(CONFIGS, ["zoo.sources.cifar10=/x"])
    compose_evaluate(CONFIGS, ["data=cifar100", "zoo.sources.cifar10=/x"])  # CIFAR-10 is the other one there
