"""Training objectives: the contract every registered loss keeps, and the values and gradients of
vanilla, AT, TRADES and MART, on tiny models. The registry's own checks: test_loss_registry.py."""
from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from stir.config.schema import AttackConfig, LossConfig
from stir.training.losses import LossOutput, get_loss, loss_spec, names
from stir.training.losses.mart import mart_from_logits
from stir.training.losses.trades import trades_from_logits

ATTACK = AttackConfig(eps=0.5, steps=2)


class TinyNet(nn.Module):
    """conv-bn-relu, pooled, linear: the cheapest model with batch norm, in train mode."""

    def __init__(self, width: int = 8, num_classes: int = 10):
        super().__init__()
        torch.manual_seed(0)
        self.features = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU())
        self.head = nn.Linear(width, num_classes)
        self.train()

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


def batch(b: int = 4, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(b, 3, 8, 8, generator=g), torch.randint(0, 10, (b,), generator=g)


def param_grads(model: nn.Module, loss: torch.Tensor):
    return torch.autograd.grad(loss, [p for p in model.parameters() if p.requires_grad], allow_unused=True)


def test_trades_with_beta_zero_is_clean_cross_entropy_value_and_gradient():
    model = TinyNet()
    x, y = batch()
    out = get_loss("trades")(model, x, y, LossConfig("trades", beta=0.0), ATTACK)
    ce = F.cross_entropy(model(x), y)  # train mode: batch statistics, the same as in the loss
    assert torch.allclose(out.loss, ce, atol=1e-6)
    for g_trades, g_ce in zip(param_grads(model, out.loss), param_grads(model, ce)):
        assert torch.allclose(g_trades, g_ce, atol=1e-6)


def test_trades_kl_is_the_official_direction_and_reduction():
    g = torch.Generator().manual_seed(0)
    clean, adv, y = torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g), torch.tensor([0, 1, 2, 3, 0])
    out = trades_from_logits(clean, adv, y, beta=2.0)
    official_kl = nn.KLDivLoss(reduction="sum")(F.log_softmax(adv, dim=1), F.softmax(clean, dim=1)) / 5
    assert torch.allclose(out.extra["kl"], official_kl, atol=1e-6)
    assert torch.allclose(out.loss, F.cross_entropy(clean, y) + 2.0 * official_kl, atol=1e-6)


@pytest.mark.parametrize("objective", [trades_from_logits, mart_from_logits])
def test_regulariser_gradient_flows_through_clean_and_adversarial_logits(objective):
    g = torch.Generator().manual_seed(1)
    clean = torch.randn(3, 4, generator=g).requires_grad_()
    adv = torch.randn(3, 4, generator=g).requires_grad_()
    y = torch.tensor([0, 1, 2])
    with_kl = objective(clean, adv, y, beta=1.0).loss
    without = objective(clean, adv, y, beta=0.0).loss
    d_clean, d_adv = torch.autograd.grad(with_kl - without, [clean, adv])  # the regulariser alone
    assert d_clean.abs().sum() > 0 and d_adv.abs().sum() > 0


def _softmax(z):
    e = [math.exp(v) for v in z]
    return [v / sum(e) for v in e]


def test_mart_terms_by_hand():
    clean = [[2.0, 0.0, -1.0], [0.0, 1.0, 0.5]]
    adv = [[0.5, 1.5, -0.5], [1.0, 0.0, 2.0]]
    y = [0, 1]
    beta = 3.0
    ce = margin = kl = 0.0
    for zc, za, t in zip(clean, adv, y):
        pc, pa = _softmax(zc), _softmax(za)
        ce += -math.log(pa[t])
        margin += -math.log(1 - max(p for k, p in enumerate(pa) if k != t))
        kl += sum(p * math.log(p / q) for p, q in zip(pc, pa)) * (1 - pc[t])
    ce, margin, kl = ce / 2, margin / 2, kl / 2
    out = mart_from_logits(torch.tensor(clean), torch.tensor(adv), torch.tensor(y), beta)
    assert out.extra["ce_adv"].item() == pytest.approx(ce, abs=1e-6)
    assert out.extra["margin"].item() == pytest.approx(margin, abs=1e-6)
    assert out.extra["kl_weighted"].item() == pytest.approx(kl, abs=1e-6)
    assert out.loss.item() == pytest.approx(ce + margin + beta * kl, abs=1e-5)


def test_mart_matches_the_official_formula_up_to_its_guards():
    g = torch.Generator().manual_seed(2)
    clean, adv, y = torch.randn(6, 5, generator=g), torch.randn(6, 5, generator=g), torch.randint(0, 5, (6,), generator=g)
    adv_probs, nat_probs = F.softmax(adv, dim=1), F.softmax(clean, dim=1)
    top2 = torch.argsort(adv_probs, dim=1)[:, -2:]
    new_y = torch.where(top2[:, -1] == y, top2[:, -2], top2[:, -1])
    loss_adv = F.cross_entropy(adv, y) + F.nll_loss(torch.log(1.0001 - adv_probs + 1e-12), new_y)
    true_probs = nat_probs.gather(1, y.view(-1, 1)).squeeze()
    kl = nn.KLDivLoss(reduction="none")(torch.log(adv_probs + 1e-12), nat_probs).sum(1)
    official = loss_adv + 6.0 * (kl * (1.0000001 - true_probs)).sum() / 6
    assert mart_from_logits(clean, adv, y, beta=6.0).loss.item() == pytest.approx(official.item(), abs=1e-3)


def test_mart_margin_is_finite_when_a_wrong_class_is_certain():
    out = mart_from_logits(torch.tensor([[0.0, 0.0, 0.0]]), torch.tensor([[0.0, 200.0, 0.0]]), torch.tensor([0]), 1.0)
    assert torch.isfinite(out.loss)
    assert out.extra["margin"].item() == pytest.approx(200.0 - math.log(2.0), abs=1e-3)


def test_mart_with_batch_size_one():
    model = TinyNet()
    x, y = batch(1)
    out = get_loss("mart")(model, x, y, LossConfig("mart"), ATTACK)
    assert out.loss.dim() == 0 and torch.isfinite(out.loss)
    out.loss.backward()
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("name", names())
def test_every_loss_trains_and_reports_its_logits(name):
    model = TinyNet()
    x, y = batch()
    out = get_loss(name)(model, x, y, LossConfig(name), ATTACK)
    assert isinstance(out, LossOutput) and out.loss.dim() == 0 and torch.isfinite(out.loss)
    assert out.logits_clean is not None or out.logits_adv is not None  # train/acc reads one of them
    assert (out.logits_adv is not None) == loss_spec(name).adversarial
    for logits in (out.logits_clean, out.logits_adv):
        assert logits is None or logits.shape == (4, 10)
    assert all(v.dim() == 0 and not v.requires_grad for v in out.extra.values())
    assert all(p.grad is None for p in model.parameters())  # the attack made no weight gradients
    out.loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("name", names())
def test_losses_keep_the_callers_per_module_modes(name):
    model = TinyNet()
    model.features[1].eval()  # a mixed mode: the attack must put back exactly this
    modes = {n: m.training for n, m in model.named_modules()}
    get_loss(name)(model, *batch(), LossConfig(name), ATTACK)
    assert {n: m.training for n, m in model.named_modules()} == modes
    assert all(p.requires_grad for p in model.parameters())


def test_at_it1_trains_on_adversarial_examples_only():
    model = TinyNet()
    out = get_loss("at")(model, *batch(), LossConfig("at"), AttackConfig(eps=1.0, steps=1))
    assert torch.isfinite(out.loss) and out.logits_clean is None and out.logits_adv is not None  # no clean forward


def test_vanilla_makes_no_adversarial_forward():
    out = get_loss("vanilla")(TinyNet(), *batch(), LossConfig("vanilla"), ATTACK)
    assert out.logits_adv is None and set(out.extra) == {"ce"}


def test_unknown_loss_name_lists_the_valid_ones():
    with pytest.raises(ValueError, match=re.escape(f"unknown loss 'madry'; choose one of {names()}")):
        get_loss("madry")
