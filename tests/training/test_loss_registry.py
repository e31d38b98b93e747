"""The losses' registry is the one list of losses: the torch-free reading of their declarations (the
command-line check, --help, the docs table) equals it, each loss has its configs/loss/<name>.yaml and
each YAML a loss, and the code reads what a loss declares it uses, never its name (run folder, W&B
config, the attacked copy, the catastrophic-overfitting guard). No test here names the set of losses."""
from __future__ import annotations

import importlib.util
import textwrap
import warnings

import pytest
import torch
import yaml
from torch import nn

from conftest import REPO
from stir.config import validate
from stir.config.commands import train_command
from stir.config.loss_specs import LossSpec, loss_names, loss_specs
from stir.config.schema import AttackConfig, LossConfig, OptimConfig, TrainConfig
from stir.config.store import compose_train
from stir.training.losses import LOSSES, LossOutput, Objective, loss_spec, names
from stir.training.pipeline import wandb_config
from stir.training.runs import recipe_dir
from stir.training.system import RobustClassifier

CONFIGS = REPO / "configs"


def test_the_torch_free_reading_of_the_declarations_is_the_registry():
    assert loss_specs() == {name: entry.spec for name, entry in LOSSES.items()}
    assert list(loss_names()) == list(validate.LOSS_NAMES) == names()
    assert all(spec.summary for spec in loss_specs().values())  # each loss's docstring says what it is


def test_each_loss_has_its_yaml_and_each_yaml_is_a_loss():
    stems = sorted(p.stem for p in (CONFIGS / "loss").glob("*.yaml"))
    assert stems == names(), "a loss without configs/loss/<name>.yaml, or a YAML without its registered loss"
    for stem in stems:
        assert yaml.safe_load((CONFIGS / "loss" / f"{stem}.yaml").read_text())["name"] == stem


@pytest.mark.parametrize("name", names())
def test_loss_equals_name_composes_and_passes_the_check(name):
    cfg = compose_train(CONFIGS, [f"loss={name}"])
    assert cfg.loss.name == name  # compose_train validates: the check takes every registered name


def test_help_and_the_command_line_offer_the_registered_losses():
    command = train_command(CONFIGS)
    assert list(command.groups["loss"]) == names()
    assert f"loss={'|'.join(names())}" in command.help()


def test_the_docs_table_lists_every_loss_with_what_it_uses():
    path = REPO / "docs" / "hooks" / "registries.py"
    spec = importlib.util.spec_from_file_location("registries_hook", path)
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    assert hook.MARKERS["losses"] in (REPO / "docs" / "training.md").read_text()
    read = {e["name"]: e for e in hook.losses()}
    assert sorted(read) == names()
    for name, e in read.items():
        assert (e["adversarial"], e["attack"], e["beta"], e["summary"]) == (
            loss_spec(name).adversarial, loss_spec(name).attack, loss_spec(name).beta, loss_spec(name).summary)
        assert f"stir.training.losses.{e['module']}" == LOSSES.get(name).fn.__module__
    table = hook.on_page_markdown(hook.MARKERS["losses"])
    assert [line.split("`")[1] for line in table.strip().splitlines()[2:]] == names()


# ------------------------------------------------------------------ what the code reads from a spec


def _calls(record: list):
    def loss(model, x, y, loss_cfg, attack_cfg, generator=None, attack_model=None) -> LossOutput:
        record.append(attack_model)
        logits = model(x)
        return LossOutput(nn.functional.cross_entropy(logits, y), logits_clean=logits)

    return loss


@pytest.fixture
def throwaway():
    """Register throwaway losses (a noise-like one that reads attack.eps only, an adversarial one that
    reads nothing); each records the attack_model it was handed."""
    record: list = []
    specs = [LossSpec("scratch_noise", attack=("eps",)), LossSpec("scratch_adv", adversarial=True)]
    for s in specs:
        LOSSES.add(s.name, Objective(s, _calls(record)))
    yield record
    for s in specs:
        LOSSES.remove(s.name)


def _cfg(loss: str) -> TrainConfig:
    cfg = TrainConfig()
    cfg.loss.name, cfg.loss.beta, cfg.attack.eps, cfg.attack.steps = loss, 6.0, 0.5, 2
    return cfg


def test_the_run_folder_and_wandb_config_name_only_the_settings_a_loss_reads(throwaway):
    assert recipe_dir(_cfg("scratch_noise")).parent.name == "scratch_noise-eps0.5"  # not -it2: it ignores steps
    assert recipe_dir(_cfg("scratch_adv")).parent.name == "scratch_adv"
    logged = wandb_config(_cfg("scratch_noise"), {}, REPO)
    assert (logged["beta"], logged["eps"], logged["attack_steps"]) == (None, 0.5, None)
    # the shipped losses keep the folders their zoo is keyed by
    shipped = {"vanilla": "vanilla", "at": "at-eps0.5-it2", "trades": "trades-b6-eps0.5-it2", "mart": "mart-b6-eps0.5-it2"}
    for name, folder in shipped.items():
        assert recipe_dir(_cfg(name)).parent.name == folder


def test_the_training_step_hands_the_attacked_copy_to_an_adversarial_loss_only(throwaway):
    x, y = torch.randint(0, 256, (4, 3, 8, 8), dtype=torch.uint8), torch.randint(0, 10, (4,))
    for name in ("scratch_noise", "scratch_adv"):
        net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10))
        system = RobustClassifier(net, LossConfig(name), AttackConfig(), AttackConfig(), OptimConfig(), augment=None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # self.log without a Trainer
            system.training_step((x, y), 0)
    assert throwaway[0] is None and isinstance(throwaway[1], nn.Module)


# ------------------------------------------------------------------------- the torch-free reader


def test_the_reader_takes_literal_flags_and_the_docstring_s_first_line(tmp_path):
    (tmp_path / "noise.py").write_text(textwrap.dedent('''
        from stir.training.losses import register

        @register("noise", attack=("eps",))
        def noise_loss(model, x, y, loss_cfg, attack_cfg, generator=None, attack_model=None):
            """Gaussian noise: CE(f(x + eps * n), y).

            More.
            """
        '''))
    (tmp_path / "_private.py").write_text('@register("hidden")\ndef f(): ...\n')
    assert loss_specs.__wrapped__(tmp_path) == {"noise": LossSpec("noise", attack=("eps",), summary="Gaussian noise: "
                                                                  "CE(f(x + eps * n), y).")}


@pytest.mark.parametrize("declaration", ['register(NAME)', 'register("x", attack=ATTACKS)', 'register("x", attack=("it",))'])
def test_a_declaration_it_cannot_read_is_refused_with_the_place_and_the_fix(tmp_path, declaration):
    (tmp_path / "odd.py").write_text(f"NAME, ATTACKS = 'x', ('eps',)\n\n@{declaration}\ndef odd(): ...\n")
    with pytest.raises(ValueError, match=r"odd.py:3: .*string literal"):
        loss_specs.__wrapped__(tmp_path)
