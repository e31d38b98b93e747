"""The fast recipe's levers: label smoothing, EMA, test-time augmentation, the PGD-check guard, the
recipe / profile configs, and train.py end to end with all of them (resume included)."""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import REPO, run_entry_point, tiny_run_test_logits, tiny_train_args
from stir.config.schema import AttackConfig, LossConfig
from stir.training.ema import ema_decay, ema_update
from stir.training.losses.at import at_loss
from stir.training.losses.trades import trades_from_logits
from stir.training.losses.vanilla import vanilla_loss
from stir.training.runs import load_state_dict
from stir.training.tta import shift, tta_logits, views


# ------------------------------------------------------------------------------ label smoothing
def smoothed_ce(logits, y, s):
    """-(1 - s) log p_y - (s / C) sum_k log p_k, per example, averaged."""
    log_p = F.log_softmax(logits, dim=1)
    return (-(1 - s) * log_p.gather(1, y[:, None])[:, 0] - s / logits.shape[1] * log_p.sum(1)).mean()


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv, self.fc = nn.Conv2d(3, 4, 3, padding=1), nn.Linear(4, 10)

    def forward(self, x):
        return self.fc(self.conv(x).relu().mean(dim=(2, 3)))


def test_label_smoothing_smooths_the_objectives_target_and_never_the_attack():
    model = Tiny()
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(6, 3, 8, 8, generator=g), torch.randint(0, 10, (6,), generator=g)
    out = vanilla_loss(model, x, y, LossConfig(label_smoothing=0.2), AttackConfig())
    assert out.loss.item() == pytest.approx(smoothed_ce(model(x), y, 0.2).item(), rel=1e-6)
    plain = vanilla_loss(model, x, y, LossConfig(), AttackConfig())
    assert plain.loss.item() == pytest.approx(F.cross_entropy(model(x), y).item(), rel=1e-6)

    attack = AttackConfig(eps=0.5, steps=2, fold_batch_norm=False, channels_last=False)
    smooth = at_loss(model, x, y, LossConfig("at", label_smoothing=0.2), attack, generator=torch.Generator().manual_seed(1))
    hard = at_loss(model, x, y, LossConfig("at"), attack, generator=torch.Generator().manual_seed(1))
    assert torch.equal(smooth.logits_adv, hard.logits_adv)  # the same x_adv: the attack ignores the smoothing
    assert smooth.loss.item() == pytest.approx(smoothed_ce(hard.logits_adv, y, 0.2).item(), rel=1e-6)
    logits_a, logits_b = torch.randn(6, 10, generator=g), torch.randn(6, 10, generator=g)
    t = trades_from_logits(logits_a, logits_b, y, beta=1.0, label_smoothing=0.1)
    assert t.extra["ce"].item() == pytest.approx(smoothed_ce(logits_a, y, 0.1).item(), rel=1e-6)


# ------------------------------------------------------------------------------------------ EMA
def test_ema_decay_warms_up_then_holds():
    assert ema_decay(0.999, 0) == pytest.approx(0.1)
    assert ema_decay(0.999, 90) == pytest.approx(91 / 100)
    assert ema_decay(0.99, 10_000) == 0.99


def test_ema_update_averages_parameters_and_statistics_and_copies_counters():
    torch.manual_seed(0)
    a, b = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)), nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    b.train()(torch.randn(8, 3, 6, 6))  # b's running statistics and counter move
    before = {k: v.clone() for k, v in a.state_dict().items()}
    ema_update(a, b, 0.75)
    for k, v in a.state_dict().items():
        if v.is_floating_point():
            assert torch.allclose(v, 0.75 * before[k] + 0.25 * b.state_dict()[k], atol=1e-7), k
        else:
            assert torch.equal(v, b.state_dict()[k]), k
    assert int(a[1].num_batches_tracked) == 1


# ------------------------------------------------------------------------------------------ TTA
def test_tta_views_and_their_invariance_to_a_mirror_image():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(4, 3, 8, 8, generator=g)
    model = Tiny()
    assert torch.equal(tta_logits(model, x, "none"), model(x))
    for mode in ("flip", "flip_translate"):  # the set of views of flip(x) is the set of views of x
        assert torch.allclose(tta_logits(model, x, mode), tta_logits(model, x.flip(-1), mode), atol=1e-6)
    assert len(views(x, "flip")) == 2 and len(views(x, "flip_translate")) == 6
    assert torch.equal(shift(x, 1, 1)[..., 1:, 1:], x[..., :-1, :-1])  # moved down-right by one pixel
    assert torch.equal(shift(x, -1, -1)[..., :-1, :-1], x[..., 1:, 1:])
    with pytest.raises(ValueError, match="test_time_augmentation"):
        views(x, "rotate")


# ------------------------------------------------------------------------------- configurations
def test_recipe_fast_and_profile_laptop_compose_into_their_own_run_folders():
    from stir.config.store import compose_train
    from stir.training.runs import recipe_dir, recipe_of

    paper = compose_train(REPO / "configs", [])
    laptop = compose_train(REPO / "configs", ["profile=laptop"])
    assert (laptop.recipe_name, laptop.model.width, laptop.trainer.precision) == ("fast", 16, "bf16-mixed")
    assert str(recipe_dir(laptop)) == "runs/cifar10/resnet18-w16/vanilla-fast/seed0"
    assert str(recipe_dir(paper)) == "runs/cifar10/resnet18/vanilla/seed0"
    assert recipe_of(laptop)["loss.label_smoothing"] == laptop.loss.label_smoothing > 0  # a lever is in the recipe
    assert "loss.label_smoothing" not in recipe_of(paper)  # at its default it is not (the paper's identity)
    at = compose_train(REPO / "configs", ["profile=laptop", "loss=at"])
    assert at.robust_check.images > 0 and str(recipe_dir(at)).startswith("runs/cifar10/resnet18-w16/at-fast")
    same_width_paper = compose_train(REPO / "configs", ["profile=laptop", "recipe=paper"])
    assert (same_width_paper.recipe_name, same_width_paper.model.width, same_width_paper.optim.schedule) == (
        "paper", 16, "cosine")


def test_a_named_variant_gets_its_own_run_folder_and_the_unnamed_one_keeps_its_identity():
    """The recipe ablation's arms (configs/zoo.yaml): a lever moved under ``variant=NAME`` trains into
    vanilla-fast-NAME/, and ``variant`` at its default is not in the recipe (no shipped identity moves)."""
    from stir.config.store import compose_train
    from stir.training.runs import recipe_dir, recipe_of

    laptop = compose_train(REPO / "configs", ["profile=laptop"])
    ls0 = compose_train(REPO / "configs", ["profile=laptop", "loss.label_smoothing=0.0", "variant=ls0", "seed=1"])
    assert str(recipe_dir(ls0)) == "runs/cifar10/resnet18-w16/vanilla-fast-ls0/seed1"
    assert recipe_of(ls0)["variant"] == "ls0" and "variant" not in recipe_of(laptop)
    # without its name the variant would claim the baseline's folder: the recipes differ, so that
    # folder refuses it (RecipeMismatchError), never trains over it
    unnamed = compose_train(REPO / "configs", ["profile=laptop", "loss.label_smoothing=0.0"])
    assert recipe_dir(unnamed) == recipe_dir(laptop) and recipe_of(unnamed) != recipe_of(laptop)


def test_the_zoo_s_recipe_ablation_arms_train_into_folders_of_their_own():
    from stir.zoo.recipes import Recipes

    recipes = Recipes(REPO / "configs" / "zoo.yaml", REPO / "configs", profile="laptop")
    names = [n for n in recipes.recipes if n == "vanilla" or n.startswith(("vanilla_s", "vanilla_ls0", "vanilla_cosine",
                                                                                 "vanilla_fp32", "vanilla_b128", "vanilla_paper"))]
    folders = {n: recipes.resolve(n).run_dir for n in names}
    assert len(names) == 18 and len(set(folders.values())) == 18, folders
    b128 = recipes.train_config("vanilla_b128")
    assert (b128.data.batch_size, b128.optim.lr, b128.optim.schedule, b128.loss.label_smoothing) == (128, 0.1, "onecycle", 0.2)


@pytest.mark.parametrize("override, message", [
    ("variant=Bad-Name", "variant"),
    ("loss.label_smoothing=1.0", "label_smoothing"), ("ema.decay=1.5", "ema.decay"),
    ("data.padding_mode=circular", "padding_mode"), ("trainer.test_time_augmentation=rotate", "test_time_augmentation"),
    ("trainer.precision=8-mixed", "precision"), ("robust_check.max_drop=0", "max_drop"),
])
def test_a_bad_lever_value_is_refused_with_its_key(override, message):
    from stir.config import ConfigError
    from stir.config.store import compose_train

    with pytest.raises(ConfigError, match=message):
        compose_train(REPO / "configs", ["recipe=fast", override])


# -------------------------------------------------------------------------------------- guard
def test_the_guard_stops_at_a_collapse_and_restores_the_best_epoch(cifar10_root, tmp_path, monkeypatch):
    """Check accuracies 0.5, 0.6, 0.1 (a collapse > max_drop): stop after epoch 2 with epoch 1's weights."""
    import stir.training.guard as guard

    seen = []

    def fake_check(network, x, y, cfg, generator=None, attack_model=None):
        seen.append({k: v.detach().clone() for k, v in network.state_dict().items()})
        assert cfg.steps == 3 and cfg.eps == 1.0 and len(x) == 8  # robust_check.steps, eval_attack's eps
        return torch.tensor([0.5, 0.6, 0.1, 0.9, 0.9][len(seen) - 1])

    monkeypatch.setattr(guard, "robust_accuracy", fake_check)
    args = tiny_train_args(cifar10_root, tmp_path, "loss=at", "trainer.max_epochs=5", "robust_check.images=8",
                           "robust_check.steps=3", "robust_check.max_drop=0.3", "trainer.robust_val_every_n_epochs=0")
    run_entry_point("train", args, monkeypatch)
    run = next(tmp_path.glob("cifar10/*/at*/seed0"))
    metrics = json.loads((run / "metrics.json").read_text())
    assert len(seen) == 3 and metrics["epochs"] == 3
    assert metrics["robust_check"]["best_epoch"] == 1 and metrics["robust_check"]["stopped_at_epoch"] == 2
    assert metrics["robust_check"]["accuracy_by_epoch"] == pytest.approx([0.5, 0.6, 0.1])
    weights = load_state_dict(str(run))
    assert all(torch.equal(weights[k], seen[1][k]) for k in weights)  # epoch 1's weights, not epoch 2's


# ---------------------------------------------------------------------------------- end to end
FAST_TINY = ("recipe=fast", "trainer.max_epochs=2", "data.batch_size=40", "ema.decay=0.9",
             "trainer.test_time_augmentation=flip")


def test_the_fast_recipe_trains_and_reports_float32_accuracy_of_the_weights_it_saves(cifar10_root, tmp_path, monkeypatch):
    """bf16 autocast, CPU channels-last, EMA, TTA: test/acc is the fp32 accuracy of weights.pt (the average)."""
    run_entry_point("train", tiny_train_args(cifar10_root, tmp_path, *FAST_TINY), monkeypatch)
    run = tmp_path / "cifar10/resnet18-w4/vanilla-fast/seed0"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["config"]["trainer"]["precision"] == "bf16-mixed" and "test/acc_tta" in metrics
    logits, labels = tiny_run_test_logits(run, cifar10_root)
    assert logits.dtype == torch.float32
    assert metrics["test/acc"] == pytest.approx((logits.argmax(1) == labels).float().mean().item(), abs=1e-6)
    ckpt = torch.load(run / "last.ckpt", weights_only=False)["state_dict"]
    ema = {k[len("ema_network."):]: v for k, v in ckpt.items() if k.startswith("ema_network.")}
    live = {k[len("network."):]: v for k, v in ckpt.items() if k.startswith("network.")}
    weights = load_state_dict(str(run))
    assert all(torch.equal(weights[k], ema[k]) for k in weights)  # weights.pt is the average ...
    assert not all(torch.equal(weights[k], live[k]) for k in weights)  # ... not the last iterate


class Interrupt(Exception):
    pass


class InterruptAtEpoch:
    """A callback raising at the start of ``epoch``: last.ckpt holds the epoch before (a killed run)."""

    def __new__(cls, epoch):
        import lightning as L

        class _Cb(L.Callback):
            def on_train_epoch_start(self, trainer, module):
                if trainer.current_epoch == epoch:
                    raise Interrupt

        return _Cb()


def test_a_fast_at_run_interrupted_and_resumed_ends_bit_identical(cifar10_root, tmp_path):
    """Fast AT with everything on (bf16, EMA, guard, device-resident data): resume = uninterrupted run."""
    from stir.config.store import compose_train
    from stir.training.pipeline import train

    def config(runs):
        args = tiny_train_args(cifar10_root, runs, *FAST_TINY, "loss=at", "trainer.max_epochs=3", "robust_check.images=8",
                               "data.device_resident=true", "trainer.robust_val_every_n_epochs=2")
        return compose_train(REPO / "configs", args)

    whole = train(config(tmp_path / "whole"))
    with pytest.raises(Interrupt):
        train(config(tmp_path / "killed"), callbacks=[InterruptAtEpoch(1)])
    run = tmp_path / "killed" / whole.relative_to(tmp_path / "whole")
    assert (run / "last.ckpt").exists() and not (run / "metrics.json").exists()
    resumed = train(config(tmp_path / "killed"))
    a, b = load_state_dict(str(whole)), load_state_dict(str(resumed))
    assert [k for k in a if not torch.equal(a[k], b[k])] == []
    ma, mb = (json.loads((p / "metrics.json").read_text()) for p in (whole, resumed))
    assert mb["resumed_from_epoch"] == 1 and ma["robust_check"] == mb["robust_check"]
    assert math.isclose(ma["test/acc"], mb["test/acc"]) and math.isclose(ma["test/robust_acc"], mb["test/robust_acc"])


def test_bf16_on_a_cpu_without_native_bf16_is_named_with_what_to_do():
    """An AVX2-only CPU emulates bf16 (7x slower than float32 for a conv block there): train.py says so
    before the first step; native bf16, float32 and a GPU accelerator say nothing."""
    from stir.training.trainer import emulated_bf16

    slow = emulated_bf16("bf16-mixed", "cpu", native=False)
    assert slow and "trainer.precision=bf16-mixed" in slow and "trainer.precision=32-true variant=fp32" in slow
    assert emulated_bf16("bf16-mixed", "cpu", native=True) is None
    assert emulated_bf16("32-true", "cpu", native=False) is None
    assert emulated_bf16("bf16-mixed", "gpu", native=False) is None


def test_the_paper_preset_s_table1_models_are_the_fast_recipe_without_label_smoothing():
    """configs/evaluate/experiment/paper.yaml: Table 1's vanilla and AT models are trained as the fast
    recipe's, with label smoothing 0 (the paper's protocol has none, and the recipe question found it
    the one lever that moves the vanilla seed-pair STIR) and nothing else changed, seed i at position i
    (so that the AT / vanilla pairs (at_i, vanilla_i) share no model)."""
    from omegaconf import OmegaConf
    from stir.zoo.recipes import Recipes

    preset = OmegaConf.load(REPO / "configs" / "evaluate" / "experiment" / "paper.yaml").experiment
    recipes = Recipes(REPO / "configs" / "zoo.yaml", REPO / "configs", profile="laptop")
    for loss, names in preset.recipes.items():
        fast = recipes.train_config(loss)  # the fast recipe's seed-0 model of that loss (vanilla, at)
        for seed, name in enumerate(names):
            cfg = recipes.train_config(name)
            assert (cfg.loss.name, cfg.loss.label_smoothing, cfg.seed, cfg.variant) == (fast.loss.name, 0.0, seed, "ls0"), name
            assert fast.loss.label_smoothing > 0
            same = lambda c: OmegaConf.to_container(OmegaConf.structured(dataclasses.replace(  # noqa: E731
                c, seed=0, variant="", loss=dataclasses.replace(c.loss, label_smoothing=0.0))))
            assert same(cfg) == same(fast), name


def test_the_paper_preset_s_methods_are_one_recipe_per_method_with_seed_i_at_position_i():
    """Claim 12 pools over training-seed positions (at_i, trades_i, mart_i): each position's models
    are their method's seed-0 recipe with only the seed changed, so a difference between positions is
    the between-seed spread and nothing else."""
    from omegaconf import OmegaConf
    from stir.zoo.recipes import Recipes

    preset = OmegaConf.load(REPO / "configs" / "evaluate" / "experiment" / "paper.yaml").experiment
    recipes = Recipes(REPO / "configs" / "zoo.yaml", REPO / "configs", profile="laptop")
    settings = {s: m for s, m in preset.methods.items() if len(m.at) > 1}
    assert settings, "a setting with more than one training seed per method"
    for setting, m in settings.items():
        for method, names in m.items():
            first = recipes.train_config(names[0])
            for seed, name in enumerate(names):
                cfg = recipes.train_config(name)
                assert cfg.seed == first.seed + seed, name
                same = lambda c: OmegaConf.to_container(OmegaConf.structured(dataclasses.replace(c, seed=0)))  # noqa: E731
                assert same(cfg) == same(first), (setting, method, name)


def test_the_paper_preset_s_resnet18_layer_wise_pairs_are_table1_s_first_seed_pairs():
    """Claim 9 (figures 2, 6) reads the layer-wise curves of Table 1's models: the report's ResNet18
    claims rest on one recipe."""
    from omegaconf import OmegaConf

    preset = OmegaConf.load(REPO / "configs" / "evaluate" / "experiment" / "paper.yaml").experiment
    resnet18 = preset.layer_settings["cifar10 resnet18"]
    for family in ("vanilla", "at"):
        assert list(resnet18[family]) == list(preset.recipes[family][:2]), family
