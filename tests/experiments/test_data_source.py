"""One key says where CIFAR lives: ``data.source`` for the images and the zoo alike; ``zoo.data_source``
(its older spelling) still works, with a one-line deprecation (issue 32)."""
import logging

from conftest import REPO
from stir.experiments.config import compose_evaluate
from stir.experiments.context import open_context, zoo_source

CONFIGS = REPO / "configs" / "evaluate"


def test_data_source_alone_is_where_the_zoo_was_trained(tmp_path, caplog):
    cfg, experiment = compose_evaluate(CONFIGS, ["data.source=/data/cifar10.tar", f"out_dir={tmp_path}"])
    with caplog.at_level(logging.WARNING):
        assert zoo_source(cfg) == "/data/cifar10.tar"
        ctx = open_context(cfg, experiment, repo=REPO)
    assert not [r for r in caplog.records if "deprecated" in r.getMessage()]
    assert "data.source=/data/cifar10.tar" in ctx.zoo.recipes.common  # every recipe reads that copy
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
