"""Bad configuration fails before any work, naming the key and the valid choices."""
import re

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ValidationError

from conftest import REPO
from stir.config import ConfigError
from stir.config.loss_specs import loss_names
from stir.config.schema import TrainConfig
from stir.config.store import register_configs, train_config


def composed(*overrides: str):
    register_configs()
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base="1.3"):
        return compose(config_name="train", overrides=list(overrides))


def test_defaults_are_resnet18_vanilla_cifar10_seed0():
    cfg = train_config(composed())
    assert isinstance(cfg, TrainConfig)
    assert (cfg.model.arch, cfg.loss.name, cfg.data.name, cfg.seed, cfg.loss.beta) == ("resnet18", "vanilla", "cifar10", 0, 1.0)
    assert cfg.attack.alpha == pytest.approx(0.25)  # 2.5 * eps / steps


def test_groups_and_keys_compose():
    cfg = train_config(composed("data=cifar100", "model=vgg19", "loss=trades", "loss.beta=6.0", "attack.steps=1", "profile=cpu"))
    assert (cfg.data.num_classes, cfg.model.arch, cfg.model.width, cfg.loss.beta, cfg.attack.steps) == (100, "vgg19", 8, 6.0, 1)
    assert cfg.data.train_size == 5000


def test_unknown_key_names_the_key():
    with pytest.raises(ConfigCompositionException, match="foo"):
        composed("foo=1")
    with pytest.raises(ConfigCompositionException, match="widht"):
        composed("model.widht=16")


def test_wrong_type_names_the_key():
    with pytest.raises(ConfigCompositionException) as err:
        composed("seed=abc")
    assert "seed" in str(err.value) + str(err.value.__cause__)
    assert isinstance(err.value.__cause__, ValidationError)


def test_unknown_group_choice_lists_the_choices():
    with pytest.raises(ConfigCompositionException, match=r"(?s)model/resnet99.*resnet18.*vgg19"):
        composed("model=resnet99")


@pytest.mark.parametrize(
    "override, message",
    [
        ("loss.name=fgsm", re.escape(f"loss.name='fgsm' is not a valid choice; choose one of {list(loss_names())}")),
        ("model.arch=alexnet", r"model.arch='alexnet'.*resnet18"),
        ("attack.norm=l1", r"attack.norm='l1'.*\['l2'\]"),
        ("logger.wandb.mode=cloud", r"logger.wandb.mode='cloud'.*offline"),
        ("attack.eps=-1", r"attack.eps=-1.0 must be a finite number > 0"),
        ("data.num_classes=7", r"data.num_classes=7 but data.name=cifar10 has 10"),
    ],
)
def test_invalid_values_name_key_and_choices(override, message):
    with pytest.raises(ConfigError, match=message):
        train_config(composed(override))


@pytest.mark.parametrize("override, message", [
    ("+trainer.max_epoch=1", r"trainer.max_epoch \(did you mean trainer.max_epochs\?\)"),
    ("+optim.learning_rate=0.1", r"unknown config key\(s\): optim.learning_rate"),
    ("+sed=1", r"sed \(did you mean seed\?\)"),
])
def test_appended_unknown_keys_are_refused_with_the_close_match(override, message):
    """``+key=value`` appends to a typed node; nothing would read the key, so it must not pass."""
    with pytest.raises(ConfigError, match=message):
        train_config(composed(override))


def test_a_config_error_on_the_command_line_is_one_line_and_leaves_nothing(tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    done = subprocess.run([sys.executable, str(REPO / "train.py"), "+trainer.max_epoch=1", f"runs_dir={tmp_path / 'runs'}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stderr.startswith(
        "error: unknown config key trainer.max_epoch (did you mean trainer.max_epochs?)")
    assert len(done.stderr.strip().splitlines()) == 2  # the message and how to see the traceback
    assert list(tmp_path.iterdir()) == []  # no runs/, no runs/_hydra/<time>/


@pytest.mark.parametrize("override, message", [
    ("execution.batch_size=0", r"execution.batch_size must be >= 1 \(or null: automatic\), got 0"),
    ("execution.memory_gb=-2", r"execution.memory_gb must be > 0"),
    ("inversion.mode=slow", r"inversion.mode must be one of"),
    ("calibration.ceiling=top", r"calibration.ceiling must be one of"),
])
def test_a_component_configs_own_check_is_a_config_error(override, message):
    """Checks in a component config's __post_init__ reach the user as ConfigError (one line), naming the key."""
    from stir.experiments.config import compose_evaluate

    with pytest.raises(ConfigError, match=message):
        compose_evaluate(REPO / "configs" / "evaluate", [override])


@pytest.mark.parametrize("override, kwargs", [
    ("measure=nope", {"measure": "nope"}),
    ("k=0", {"k": 0}),
    ("iri=bogus", {"iri": "bogus"}),
    ("min_fraction_iri=2", {"min_fraction_iri": 2.0}),
    ("min_fraction_adversarial=-1", {"min_fraction_adversarial": -1.0}),
])
def test_an_estimator_setting_is_checked_once_where_the_library_checks_it(override, kwargs):
    """evaluate.py's measure / k / iri / min_fraction_* are checked by ``stir.measure.plan`` alone: the
    config's one-line error is the library's, naming the key."""
    from stir.experiments.config import compose_evaluate
    from stir.measure import Estimator

    with pytest.raises(ValueError) as library:
        Estimator(**kwargs)
    with pytest.raises(ConfigError) as config:
        compose_evaluate(REPO / "configs" / "evaluate", [override])
    assert str(config.value) == str(library.value)
    assert str(config.value).startswith(override.split("=")[0])


def test_a_bad_estimator_setting_on_the_command_line_is_one_line_with_status_2(tmp_path, monkeypatch, capsys):
    from conftest import refused

    message = refused("evaluate", ["iri=bogus", f"out_dir={tmp_path / 'results'}"], monkeypatch, capsys)
    assert message == "iri must be one of ['arbitrary', 'adversarial', 'both'], got 'bogus'"
