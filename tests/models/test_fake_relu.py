"""FakeReLU on any network: specs (published / off / module names), plain nn.ReLU modules faked and
restored exactly, foreign and cut networks, and what the record says."""
import pytest
import torch
from torch import nn

from stir.config.schema import ModelConfig
from stir.models import build, representation
from stir.models.fake_relu import (
    FakeReLUError, OutputReLU, describe, fake_relu, faked, normalize_spec, relu_modules, resolve_sites,
)
from stir.models.sources import from_module
from stir.models.truncate import TapForward


def _mlp(inplace=False, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 5), nn.ReLU(inplace=inplace), nn.Linear(5, 3)).eval()


def _grad(model, x, tap="logits"):
    x = x.clone().requires_grad_(True)
    rep = representation(model, x, tap)
    (g,) = torch.autograd.grad(rep.sum(), x)
    return rep.detach(), g


@pytest.mark.parametrize("inplace", [False, True])
def test_a_plain_relu_named_by_the_user_has_the_same_forward_and_the_identity_gradient(inplace):
    net = _mlp(inplace)
    x = torch.randn(8, 6)
    plain_out, plain_grad = _grad(net, x)
    with fake_relu(net, enabled=["1"]):
        fake_out, fake_grad = _grad(net, x)
    w1, w2 = net[0].weight, net[2].weight  # (5, 6), (3, 5)
    assert torch.equal(fake_out, plain_out)
    # d sum(W2 relu(W1 x + b)) / dx with the ReLU's derivative taken as 1 everywhere: W1^T W2^T 1, per row
    assert torch.allclose(fake_grad, (w2.sum(0) @ w1).expand(8, 6), atol=1e-6)
    pre = net[0](x)
    assert (pre < 0).any() and not torch.allclose(plain_grad, fake_grad)  # some units are dead: it matters
    assert torch.allclose(plain_grad, ((pre > 0).float() * w2.sum(0)) @ w1, atol=1e-6)  # and it is restored


def test_modules_modes_hooks_and_flags_are_restored_exactly_even_after_an_exception():
    net = build(ModelConfig("cifar_resnet20", 4), 10, (0.5,) * 3, (0.25,) * 3)
    net.train()
    net.layer2.eval()
    net.layer1[0].relu1.inplace = True
    modules = dict(net.named_modules())
    modes = {n: m.training for n, m in modules.items()}
    spec = ["layer1.0.relu1", "relu", "layer3.2.relu_out"]
    with pytest.raises(RuntimeError, match="inside"):
        with faked([(net, spec)]) as sites:
            assert sites == [("relu", "layer1.0.relu1", "layer3.2.relu_out")]  # model order
            assert net.layer3[2].relu_out.fake and not net.layer1[0].relu1.inplace
            assert len(net.relu._forward_hooks) == 1
            raise RuntimeError("inside")
    assert dict(net.named_modules()) == modules  # the same module objects: nothing swapped
    assert {n: m.training for n, m in net.named_modules()} == modes
    assert not any(m._forward_hooks for m in net.modules())
    assert net.layer1[0].relu1.inplace and not net.layer3[2].relu_out.fake


def test_specs_published_architecture_off_and_names():
    net = build(ModelConfig("cifar_resnet20", 4), 10, (0.5,) * 3, (0.25,) * 3)
    rule = ("layer3.0.relu_out", "layer3.1.relu_out", "layer3.2.relu_out")
    assert resolve_sites(net, "architecture") == rule  # the architecture's own rule
    # The original STIR code fakes no ReLU of a network outside its own zoo: the published setting fakes none.
    assert resolve_sites(net, True) == resolve_sites(net, "published") == ()
    assert describe(net, True)["rule"] == "the original STIR code fakes no ReLU of this network"
    assert resolve_sites(net, False) == resolve_sites(net, None) == resolve_sites(net, "off") == ()
    assert resolve_sites(net, "layer1.0.relu1, relu") == ("relu", "layer1.0.relu1")
    assert normalize_spec(["a", "b"]) == ("a", "b") and normalize_spec("published") == "published"
    with pytest.raises(FakeReLUError, match="non-empty"):
        normalize_spec([])
    assert len(relu_modules(net)) == 1 + 9 * 2  # the stem and two per block: every ReLU is a module


def test_a_bad_name_lists_the_relu_modules_and_changes_nothing():
    net = _mlp()
    with pytest.raises(FakeReLUError, match=r"'7' is not a module of Sequential; its ReLU modules: \['1'\]"):
        with fake_relu(net, enabled=["1", "7"]):
            pass
    assert not net[1]._forward_hooks  # resolved before anything changed
    with pytest.raises(FakeReLUError, match=r"'0' of Sequential is a Linear, not a ReLU module"):
        resolve_sites(net, ["0"])


def test_published_and_architecture_rules_of_every_family_and_of_foreign_networks():
    x = torch.rand(3, 3, 32, 32)
    for arch, sites, published in (("resnet18", ("layer4.0.relu_out", "layer4.1.relu_out"), True),
                                   ("resnet2b", ("linear1_relu",), False), ("resnet4b", ("linear1_relu",), False),
                                   ("cnn_a", ("6",), False), ("vgg16", (), False)):
        net = build(ModelConfig(arch, 4), 10, (0.5,) * 3, (0.25,) * 3).eval()
        assert resolve_sites(net, "architecture") == sites, arch
        assert resolve_sites(net, True) == (sites if published else ()), arch  # only the original code's own ResNets
        if sites:
            plain, g_plain = _grad(net, x, "penultimate")
            with fake_relu(net, enabled="architecture"):
                fake, g_fake = _grad(net, x, "penultimate")
            assert torch.equal(plain, fake) and not torch.allclose(g_plain, g_fake), arch
    assert describe(net, True) == {"spec": "published", "applied": False, "sites": [],
                                   "rule": "the original STIR code fakes no ReLU of this network"}
    assert describe(net, "architecture")["rule"] == "the architecture has no FakeReLU rule: nothing is faked"
    cnn = build(ModelConfig("cnn_a", 4), 10, (0.5,) * 3, (0.25,) * 3)
    assert describe(cnn, ["1", "6"]) == {"spec": ["1", "6"], "applied": True, "sites": ["1", "6"],
                                         "rule": "the modules named"}
    assert describe(cnn, "architecture")["rule"].startswith("the ReLU of the penultimate 100-d layer")
    assert describe(cnn, False) == {"spec": "off", "applied": False, "sites": [], "rule": "off"}


def test_a_tap_on_the_faked_relu_reads_the_faked_gradient():
    net = _mlp()
    x = torch.randn(4, 6)
    with fake_relu(net, enabled=["1"]):
        _, g = _grad(net, x, "1")  # the tap hook runs after the FakeReLU hook
    assert torch.allclose(g, net[0].weight.sum(0).expand(4, 6), atol=1e-6)


def test_a_foreign_model_is_named_by_its_own_module_names():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 5), nn.ReLU(inplace=True), nn.Linear(5, 3))
    wrapper = from_module(net).module  # SourcedModel: the network is `net` inside it
    assert resolve_sites(wrapper, ["2"]) == ("net.2",) and resolve_sites(wrapper, ["net.2"]) == ("net.2",)
    x = torch.rand(4, 3, 32, 32)
    with fake_relu(wrapper, enabled=["2"]):
        _, g = _grad(wrapper, x)
    assert torch.allclose(g.flatten(1), (net[3].weight.sum(0) @ net[1].weight).expand(4, -1), atol=1e-6)
    assert net[2].inplace and not net[2]._forward_hooks
    assert resolve_sites(wrapper, True) == ()  # no rule: the published spec fakes nothing, and says so
    assert describe(wrapper, True)["applied"] is False


def test_a_cut_network_resolves_names_of_the_original_and_skips_what_it_dropped():
    torch.manual_seed(0)
    net = build(ModelConfig("cifar_resnet20", 4), 10, (0.5,) * 3, (0.25,) * 3).eval()
    cut = TapForward(net, "layer2.0")
    assert resolve_sites(cut, ["layer1.2.relu1", "layer3.0.relu_out"]) == ("net.layer1.2.relu1",)
    x = torch.rand(2, 3, 32, 32)
    with fake_relu(net, enabled=["layer1.2.relu1"]), fake_relu(cut, enabled=["layer1.2.relu1", "layer3.0.relu_out"]):
        _, g_net = _grad(net, x, "layer2.0")
        _, g_cut = _grad(cut, x, "layer2.0")
    _, g_plain = _grad(net, x, "layer2.0")
    assert torch.allclose(g_net, g_cut, atol=1e-6) and not torch.allclose(g_net, g_plain)


def test_one_model_given_twice_is_faked_once_and_restored():
    net = build(ModelConfig("resnet2b", 4), 10, (0.5,) * 3, (0.25,) * 3)
    net.linear1_relu.fake = True  # already fake before: must stay fake after
    with fake_relu(net, net):
        with faked([(net, ["relu"]), (net, ["relu", "linear1_relu"])]):
            assert len(net.relu._forward_hooks) == 1
    assert net.linear1_relu.fake is True and not net.relu._forward_hooks
    assert isinstance(net.linear1_relu, OutputReLU)
