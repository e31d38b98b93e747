"""Attacks: PGD-l2 and TRADES' KL attack, both on the one descent loop (stir.descent), on tiny models;
torchattacks' PGDL2 as the oracle of PGD."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from stir.attacks import kl_per_example, pgd_l2, robust_accuracy, torchattacks_pgd_l2, trades_l2
from stir.config.schema import AttackConfig, ModelConfig
from stir.descent import L2Ball, descend
from stir.models import build, frozen

MEAN, STD = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)


class TinyNet(nn.Module):
    """conv-bn-relu-dropout, pooled, linear: batch norm and dropout in 8x8 images."""

    def __init__(self, width: int = 4, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.Dropout(0.2))
        self.head = nn.Linear(width, num_classes)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


class RecordingLinear(nn.Module):
    """A linear classifier on flattened images that keeps every input it is called on."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.fc = nn.Linear(3 * 8 * 8, num_classes)
        self.seen = []

    def forward(self, x):
        self.seen.append(x.detach().clone())
        return self.fc(x.flatten(1))


def tiny_resnet() -> nn.Module:
    return build(ModelConfig(arch="resnet18", width=4), 10, MEAN, STD)


def batch(b: int = 4, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(b, 3, 8, 8, generator=g), torch.randint(0, 10, (b,), generator=g)


def warm_up(model: nn.Module) -> nn.Module:
    """A few train-mode forwards so batch-norm running statistics are not the defaults."""
    model.train()
    with torch.no_grad():
        for s in range(3):
            model(batch(8, seed=100 + s)[0])
    return model


def l2_dist(a, b):
    return (a - b).flatten(1).norm(dim=1)


def attack_fns():
    """(name, x, y, cfg, generator) -> x_adv for every attack."""
    return {
        "pgd": lambda m, x, y, cfg, g=None: pgd_l2(m, x, y, cfg, generator=g),
        "trades": lambda m, x, y, cfg, g=None: trades_l2(m, x, cfg, generator=g),
    }


def _torchattacks(model, x, y, cfg, seed=None):
    """torchattacks' PGDL2 as pgd_l2 ran it before it moved onto the descent loop: on the frozen model
    through ``attacked``, the global RNG seeded for the random start and restored after."""
    from stir.attacks.network import attacked

    state = torch.get_rng_state()
    try:
        if seed is not None:
            torch.manual_seed(seed)
        with frozen(model), torch.enable_grad():
            return torchattacks_pgd_l2(attacked(model), cfg, x.device)(x.clone(), y.clone()).detach()
    finally:
        torch.set_rng_state(state)


@pytest.mark.parametrize("random_start", [True, False])
@pytest.mark.parametrize("eps, steps, step_size", [(0.5, 5, None), (1.0, 10, None), (2.0, 3, 0.3), (0.01, 4, None)])
def test_pgd_on_the_descent_loop_is_torchattacks_bit_for_bit(random_start, eps, steps, step_size):
    torch.manual_seed(0)
    model = warm_up(TinyNet()).eval()
    x, y = batch(6)
    cfg = AttackConfig(eps=eps, steps=steps, step_size=step_size, random_start=random_start)
    ours = pgd_l2(model, x, y, cfg, torch.Generator().manual_seed(3))
    # the seed pgd_l2 derives from its generator for the random start, as torchattacks got it through the global RNG
    seed = int(torch.randint(0, 2**62, (1,), generator=torch.Generator().manual_seed(3)))
    assert torch.equal(ours, _torchattacks(model, x, y, cfg, seed))
    assert (l2_dist(ours, x) > min(eps, 0.1) / 2).all()  # it moved
    torch.manual_seed(11)
    without = pgd_l2(model, x, y, cfg)  # no generator: the global RNG draws, as in torchattacks
    assert torch.equal(without, _torchattacks(model, x, y, cfg, 11))


def test_pgd_on_a_folded_channels_last_copy_is_torchattacks_on_it():
    from stir.attacks import AttackNetwork

    torch.manual_seed(0)
    net = warm_up(tiny_resnet()).eval()
    copy_ = AttackNetwork(fold_batch_norm=True, channels_last=True).get(net)
    x, y = torch.rand(4, 3, 32, 32, generator=torch.Generator().manual_seed(2)), torch.tensor([0, 1, 2, 3])
    cfg = AttackConfig(eps=1.0, steps=3)
    torch.manual_seed(5)
    ours = pgd_l2(copy_, x, y, cfg)
    assert torch.equal(ours, _torchattacks(copy_, x, y, cfg, 5))


@pytest.mark.parametrize("attack", ["pgd", "trades"])
@pytest.mark.parametrize("eps", [0.5, 0.01])
def test_adversarial_examples_lie_in_ball_and_box(attack, eps):
    torch.manual_seed(1)
    model = warm_up(TinyNet())
    x, y = batch(5)
    x[0] = 0.0  # corners of the box: the projection onto [0, 1] must hold
    x[1] = 1.0
    cfg = AttackConfig(eps=eps, steps=4)
    x_adv = attack_fns()[attack](model, x, y, cfg, torch.Generator().manual_seed(0))
    assert x_adv.shape == x.shape and not x_adv.requires_grad
    assert (l2_dist(x_adv, x) <= eps + 1e-5).all()
    assert x_adv.min() >= 0 and x_adv.max() <= 1


def test_pgd_raises_cross_entropy():
    torch.manual_seed(2)
    model = warm_up(tiny_resnet())
    x, y = batch(4)
    x_adv = pgd_l2(model, x, y, AttackConfig(eps=0.5, steps=5), torch.Generator().manual_seed(0))
    with frozen(model), torch.no_grad():
        ce_clean = F.cross_entropy(model(x), y, reduction="none")
        ce_adv = F.cross_entropy(model(x_adv), y, reduction="none")
    assert (ce_adv > ce_clean).all()


def test_trades_attack_raises_kl_beyond_a_random_perturbation():
    torch.manual_seed(3)
    model = warm_up(TinyNet())
    x, _ = batch(4)
    eps = 0.5
    x_adv = trades_l2(model, x, AttackConfig(eps=eps, steps=5), torch.Generator().manual_seed(0))
    noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(1))
    x_rand = (x + eps * noise / l2_dist(noise, 0).view(-1, 1, 1, 1)).clamp(0, 1)
    with frozen(model), torch.no_grad():
        clean = model(x)
        kl_adv = kl_per_example(clean, model(x_adv))
        kl_rand = kl_per_example(clean, model(x_rand))
    assert (kl_adv > kl_rand).all()


def _modes(model):
    return {name: m.training for name, m in model.named_modules()}


def _flags(model):
    return {name: p.requires_grad for name, p in model.named_parameters()}


@pytest.mark.parametrize("start", ["train", "eval", "mixed"])
@pytest.mark.parametrize("attack", ["pgd", "pgd_no_random_start", "trades", "robust_accuracy"])
def test_attacks_leave_the_model_exactly_as_found(start, attack):
    torch.manual_seed(4)
    model = warm_up(TinyNet())
    if start == "eval":
        model.eval()
    elif start == "mixed":  # batch norm in eval, the rest in train: a mode train()/eval() cannot restore
        model.train()
        model.features[1].eval()
    model.head.bias.requires_grad_(False)
    modes, flags = _modes(model), _flags(model)
    state = copy.deepcopy(model.state_dict())  # weights and running_mean / running_var / num_batches_tracked
    x, y = batch(4)
    cfg = AttackConfig(eps=0.5, steps=3, random_start=attack != "pgd_no_random_start")
    if attack == "trades":
        trades_l2(model, x, cfg)
    elif attack == "robust_accuracy":
        robust_accuracy(model, x, y, cfg)
    else:
        pgd_l2(model, x, y, cfg)
    assert _modes(model) == modes
    assert _flags(model) == flags
    for key, value in model.state_dict().items():
        assert torch.equal(value, state[key]), key
    assert all(p.grad is None for p in model.parameters())


def test_at_it1_single_step_reaches_the_sphere():
    """steps=1: alpha = 2.5 * eps > eps, so the one step is projected onto the sphere."""
    model = RecordingLinear()
    x = 0.5 + 0.01 * torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    y = torch.arange(4)
    cfg = AttackConfig(eps=0.5, steps=1)
    assert cfg.alpha == pytest.approx(1.25)
    x_adv = pgd_l2(model, x, y, cfg, torch.Generator().manual_seed(0))
    assert torch.allclose(l2_dist(x_adv, x), torch.full((4,), 0.5), atol=1e-5)


def test_default_alpha_reaches_torchattacks():
    cfg = AttackConfig(eps=1.0, steps=10, random_start=False)  # alpha 0.25; torchattacks' own default is 0.2
    model = RecordingLinear()
    assert torchattacks_pgd_l2(model, cfg, torch.device("cpu")).alpha == pytest.approx(0.25)
    x = 0.5 + 0.01 * torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    pgd_l2(model, x, torch.tensor([0, 1]), cfg)
    first_step = l2_dist(model.seen[1], model.seen[0])  # no random start: seen[0] is x itself
    assert torch.equal(model.seen[0], x)
    assert torch.allclose(first_step, torch.full((2,), 0.25), atol=1e-6)
    assert len(model.seen) == cfg.steps


def test_explicit_step_size_reaches_torchattacks():
    model = RecordingLinear()
    x = 0.5 + 0.01 * torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    pgd_l2(model, x, torch.tensor([0, 1]), AttackConfig(eps=5.0, steps=2, step_size=0.1, random_start=False))
    assert torch.allclose(l2_dist(model.seen[1], model.seen[0]), torch.full((2,), 0.1), atol=1e-6)


@pytest.mark.parametrize("attack", ["pgd", "trades"])
def test_generator_makes_attacks_reproducible_and_spares_the_global_rng(attack):
    model = warm_up(TinyNet()).eval()
    x, y = batch(4)
    cfg = AttackConfig(eps=0.5, steps=2)
    fn = attack_fns()[attack]
    state = torch.get_rng_state()
    a = fn(model, x, y, cfg, torch.Generator().manual_seed(7))
    assert torch.equal(torch.get_rng_state(), state)
    b = fn(model, x, y, cfg, torch.Generator().manual_seed(7))
    c = fn(model, x, y, cfg, torch.Generator().manual_seed(8))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_attacks_work_inside_inference_mode():
    """A Lightning validation step runs under inference_mode; attacks must still get gradients."""
    model = warm_up(TinyNet()).eval()
    x, y = batch(4)
    cfg = AttackConfig(eps=0.5, steps=2)
    with torch.inference_mode():
        xi, yi = x.clone(), y.clone()  # inference tensors, as a validation batch
        acc = robust_accuracy(model, xi, yi, cfg)
        x_adv = trades_l2(model, xi, cfg)
    assert 0.0 <= float(acc) <= 1.0
    assert (l2_dist(x_adv, x) > 0).all()


def test_robust_accuracy_with_a_vanishing_ball_is_clean_accuracy():
    model = warm_up(TinyNet()).eval()
    x, y = batch(8)
    y = model(x).argmax(1).detach()
    y[:3] = (y[:3] + 1) % 10  # 5 of 8 correct
    acc = robust_accuracy(model, x, y, AttackConfig(eps=1e-7, steps=1))
    assert acc.dim() == 0 and acc.dtype == x.dtype
    assert float(acc) == pytest.approx(5 / 8)


def test_non_l2_norm_is_refused():
    model = TinyNet()
    x, y = batch(2)
    with pytest.raises(ValueError, match="l2"):
        pgd_l2(model, x, y, AttackConfig(norm="linf"))
    with pytest.raises(ValueError, match="l2"):
        trades_l2(model, x, AttackConfig(norm="linf"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_attacks_keep_gpu_batches_on_gpu():
    model = warm_up(TinyNet()).cuda()
    x, y = (t.cuda() for t in batch(4))
    cfg = AttackConfig(eps=0.5, steps=2)
    for x_adv in (pgd_l2(model, x, y, cfg, torch.Generator(device="cuda").manual_seed(0)),
                  trades_l2(model, x, cfg, torch.Generator(device="cuda").manual_seed(0))):
        assert x_adv.device == x.device
        assert (l2_dist(x_adv, x) <= 0.5 + 1e-5).all()
    assert robust_accuracy(model, x, y, cfg).device == x.device
