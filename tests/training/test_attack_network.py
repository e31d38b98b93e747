"""The attack's copy of the network (stir.attacks.AttackNetwork): same adversarial examples up to
rounding, follows the weights, leaves the network alone, and trains end to end under Lightning."""
from __future__ import annotations

import copy

import lightning as L
import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from stir.attacks import AttackNetwork, kl_per_example, pgd_l2, robust_accuracy, trades_l2
from stir.config.schema import AttackConfig, LossConfig, ModelConfig, OptimConfig
from stir.models import build
from stir.training.losses import get_loss
from stir.training.system import RobustClassifier

MEAN, STD = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
OPTIONS = [(True, True), (True, False), (False, True)]  # (fold_batch_norm, channels_last)


def network(arch: str = "resnet18", width: int = 4, seed: int = 0):
    torch.manual_seed(seed)
    net = build(ModelConfig(arch=arch, width=width), 10, MEAN, STD)
    net.train()
    with torch.no_grad():  # running statistics away from the defaults, so folding is not trivial
        for s in range(3):
            net(torch.rand(16, 3, 32, 32, generator=torch.Generator().manual_seed(100 + s)) * 0.8 + 0.1)
    return net


def batch(b: int = 8, seed: int = 0, size: int = 32):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(b, 3, size, size, generator=g), torch.randint(0, 10, (b,), generator=g)


def state(net):
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


@pytest.mark.parametrize("arch", ["resnet18", "vgg16"])
@pytest.mark.parametrize("fold, channels_last", OPTIONS)
def test_pgd_on_the_copy_matches_the_network_up_to_rounding(arch, fold, channels_last):
    net = network(arch)
    cfg = AttackConfig(eps=1.0, steps=10)
    attack_net = AttackNetwork(fold, channels_last)
    copy_module = attack_net.get(net)
    assert copy_module is not net
    if fold:
        assert attack_net.copy.pairs, "nothing was folded"
    x, y = batch(16)
    x_net = pgd_l2(net, x, y, cfg, torch.Generator().manual_seed(1))
    x_copy = pgd_l2(copy_module, x, y, cfg, torch.Generator().manual_seed(1))
    assert x_copy.is_contiguous()
    # Per example: typically ~1e-6. An example whose path crosses a ReLU / max-pool kink within
    # rounding distance (seen: 1 in 8 at width 4, folded) takes another gradient there and ends up
    # elsewhere in the ball (~1e-2): such examples may differ, but the attack is as strong.
    diff = (x_net - x_copy).flatten(1).abs().amax(dim=1)  # (b,)
    assert (diff < 1e-4).float().mean() >= 0.75, diff
    with torch.no_grad():
        net.eval()
        torch.testing.assert_close(copy_module(x), net(x), rtol=1e-4, atol=1e-4)
        ce_net, ce_copy = F.cross_entropy(net(x_net), y), F.cross_entropy(net(x_copy), y)
    assert abs(ce_copy / ce_net - 1) < 0.01


@pytest.mark.parametrize("fold, channels_last", OPTIONS)
def test_trades_on_the_copy_is_as_strong_as_on_the_network(fold, channels_last):
    """TRADES' attack starts 0.001 from x, where KL(p(x) || p(x')) is flat: its normalised gradient
    amplifies any rounding (channels-last alone, unfolded, moves x_adv by ~4e-2 after 10 steps on
    this tiny network), so the examples are compared by the KL they reach, and after one step."""
    net = network()
    x, _ = batch()
    copy_module = AttackNetwork(fold, channels_last).get(net)
    net.eval()
    for steps, tol in ((1, 2e-3), (10, None)):
        cfg = AttackConfig(eps=1.0, steps=steps)
        x_net = trades_l2(net, x, cfg, torch.Generator().manual_seed(1))
        x_copy = trades_l2(copy_module, x, cfg, torch.Generator().manual_seed(1))
        if tol is not None:
            assert (x_net - x_copy).abs().max() < tol
        with torch.no_grad():
            kl_net = kl_per_example(net(x), net(x_net)).mean()
            kl_copy = kl_per_example(net(x), net(x_copy)).mean()  # both judged on the network
        assert abs(kl_copy / kl_net - 1) < 0.01, (kl_net.item(), kl_copy.item())


def test_the_copy_follows_the_weights_after_an_optimiser_step():
    net = network()
    attack_net = AttackNetwork()
    copy_module = attack_net.get(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.5, momentum=0.9)
    x, y = batch()
    for step in range(2):  # train-mode steps: new weights and new batch-norm running statistics
        net.train()
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
    net.eval()
    with torch.no_grad():
        expected = net(x)
        stale = copy_module(x)
        assert (stale - expected).abs().max() > 1e-3  # the copy still holds the old weights
        assert attack_net.get(net) is copy_module  # refreshed in place, not rebuilt
        torch.testing.assert_close(copy_module(x), expected, rtol=1e-4, atol=1e-4)


def test_the_copy_is_rebuilt_for_another_network_or_dtype_and_off_means_the_network():
    net = network()
    attack_net = AttackNetwork()
    first = attack_net.get(net)
    net.double()
    second = attack_net.get(net)
    assert second is not first and next(second.parameters()).dtype == torch.float64
    other = network(seed=1)
    assert attack_net.get(other) is not second and attack_net.copy.source is other
    assert AttackNetwork(fold_batch_norm=False, channels_last=False).get(net) is net


@pytest.mark.parametrize("loss", ["at", "trades", "mart"])
def test_attacking_the_copy_leaves_the_network_exactly_as_found(loss):
    net = network()
    net.train()
    net.layer1.eval()  # mixed modes must survive
    net.fc.weight.requires_grad_(False)
    modes = {n: m.training for n, m in net.named_modules()}
    flags = {n: p.requires_grad for n, p in net.named_parameters()}
    before = state(net)
    attack_net = AttackNetwork()
    copy_module = attack_net.get(net)
    x, y = batch()
    cfg = AttackConfig(eps=1.0, steps=3)
    x_adv = pgd_l2(copy_module, x, y, cfg) if loss != "trades" else trades_l2(copy_module, x, cfg)
    assert (x_adv - x).abs().max() > 0
    after = state(net)
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert {n: m.training for n, m in net.named_modules()} == modes
    assert {n: p.requires_grad for n, p in net.named_parameters()} == flags
    assert all(p.grad is None for p in net.parameters())
    assert not copy_module.training and not any(p.requires_grad for p in copy_module.parameters())
    # Through the loss: the attack on the copy, the training forward (and its gradient) on the network.
    out = get_loss(loss)(net, x, y, LossConfig(loss), cfg, attack_model=copy_module)
    out.loss.backward()
    assert all(p.grad is None for p in copy_module.parameters())
    assert net.layer2[0].conv1.weight.grad is not None


def test_a_channels_last_batch_is_attacked_like_the_standard_one():
    """On CUDA the pipeline's batches are channels-last: torchattacks' .view used to raise on them."""
    net = network()
    x, y = batch()
    cfg = AttackConfig(eps=1.0, steps=3)
    x_cl = x.contiguous(memory_format=torch.channels_last)
    for model in (net, AttackNetwork().get(net)):
        a = pgd_l2(model, x, y, cfg, torch.Generator().manual_seed(2))
        b = pgd_l2(model, x_cl, y, cfg, torch.Generator().manual_seed(2))
        assert b.is_contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_robust_accuracy_attacks_the_copy_and_judges_the_network():
    net = network()
    x, y = batch(16)
    cfg = AttackConfig(eps=0.5, steps=3)
    g = lambda: torch.Generator().manual_seed(3)  # noqa: E731
    on_net = robust_accuracy(net, x, y, cfg, g())
    on_copy = robust_accuracy(net, x, y, cfg, g(), attack_model=AttackNetwork().get(net))
    assert abs(on_net.item() - on_copy.item()) <= 1 / 16  # one image at most on a decision boundary


def test_a_copy_made_or_refreshed_under_inference_mode_can_be_attacked():
    """Lightning runs validation under inference mode: the copy must still hold normal tensors."""
    net = network()
    x, y = batch()
    attack_net = AttackNetwork()
    cfg = AttackConfig(eps=1.0, steps=2)
    for _ in range(2):  # built, then refreshed
        with torch.inference_mode():
            model = attack_net.get(net)
            assert not any(p.is_inference() for p in model.parameters())
            acc = robust_accuracy(net, x, y, cfg, attack_model=model)
        assert 0 <= acc.item() <= 1
    pgd_l2(attack_net.get(net), x, y, cfg)  # and used outside inference mode afterwards


def _loader(n: int, seed: int, batch_size: int) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, 3, 16, 16), generator=g, dtype=torch.uint8)
    labels = torch.randint(0, 10, (n,), generator=g)
    return DataLoader(TensorDataset(images, labels), batch_size=batch_size)


class _Watch(L.Callback):
    """After every training step: the copy attacked during the step was the network as it was at the
    step's start (weights and batch-norm statistics), and, refreshed, it is the network now."""

    def __init__(self):
        self.checked = 0

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.params_before = {k: v.detach().clone() for k, v in module.network.state_dict().items()}

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        attack_net = module._attack_net
        assert attack_net.copy is not None and attack_net.copy.source is module.network
        changed = any(not torch.equal(v, module.network.state_dict()[k]) for k, v in self.params_before.items())
        assert changed  # the optimiser did update the network
        x = batch[0][:4].float() / 255
        was = module.network.training
        module.network.eval()
        start = copy.deepcopy(module.network)
        start.load_state_dict(self.params_before)
        with torch.no_grad():
            torch.testing.assert_close(attack_net.copy.module(x), start(x), rtol=1e-4, atol=1e-4)
            expected = module.network(x)
            got = attack_net.get(module.network)(x)
        module.network.train(was)
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
        self.checked += 1


@pytest.mark.parametrize("loss", ["at", "trades"])
def test_a_short_adversarial_fit_runs_end_to_end_on_the_copy(loss, tmp_path):
    torch.manual_seed(0)
    net = build(ModelConfig(arch="resnet18", width=4), 10, MEAN, STD)
    attack = AttackConfig(eps=1.0, steps=2)
    system = RobustClassifier(net, LossConfig(loss), attack, AttackConfig(eps=1.0, steps=2),
                              OptimConfig(schedule="constant", lr=0.05), robust_val_every=1, robust_val_size=8,
                              robust_test_size=8)
    watch = _Watch()
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[watch],
                        limit_train_batches=3, limit_val_batches=1, num_sanity_val_steps=0,
                        default_root_dir=str(tmp_path))
    trainer.fit(system, train_dataloaders=_loader(24, 0, 8), val_dataloaders=_loader(8, 1, 8))
    assert watch.checked == 3
    assert 0 <= trainer.callback_metrics["val/robust_acc"] <= 1
    assert system._eval_attack_net.copy is not None
    # The copies are no part of the system's state or parameters.
    assert set(system.state_dict()) == {f"network.{k}" for k in net.state_dict()}
    assert sum(1 for _ in system.parameters()) == sum(1 for _ in net.parameters())
    (metrics,) = trainer.test(system, dataloaders=_loader(8, 2, 8), verbose=False)
    assert 0 <= metrics["test/robust_acc"] <= 1
