"""Every architecture: every tap's shape, logits, normalisation inside, taps of plain modules."""
import pytest
import torch
from torch import nn

from stir.config.schema import ModelConfig
from stir.models import Normalize, build, channel_stats, frozen, names, representation, representations, tap_names

FAMILIES = ["resnet18", "resnet34", "vgg16", "vgg19", "cifar_resnet20", "cifar_resnet32", "cifar_resnet44",
            "cifar_resnet56", "resnet2b", "resnet4b", "cnn_a"]
ARCHS = names()  # every registered architecture: a new one is walked without editing this file


def test_registry_lists_every_family():
    assert set(FAMILIES) <= set(ARCHS)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("num_classes", [10, 100])
def test_every_tap_has_its_declared_shape(arch, num_classes):
    torch.manual_seed(0)
    net = build(ModelConfig(arch=arch, width=4), num_classes, *channel_stats("cifar10"))
    x = torch.rand(3, 3, 32, 32)
    reps = representations(net, x, tap_names(net))
    assert [t.name for t in net.taps][-2:] == ["penultimate", "logits"]
    assert set(tap_names(net)) == {t.name for t in net.taps + net.inner_taps}
    for tap in net.taps + net.inner_taps:  # depth taps and inner taps alike
        assert reps[tap.name].shape == (3, tap.dim(32)), tap
    assert set(net.original_layer_taps) <= set(tap_names(net))
    assert net(x).shape == (3, num_classes)
    assert torch.equal(reps["logits"], net(x))  # forward always returns logits


def test_resnet_taps_stem_and_every_block():
    net = build(ModelConfig("resnet34", width=4), 10, *channel_stats("cifar10"))
    blocks = [t.name for t in net.taps if t.name.startswith("layer")]  # the depth list
    assert tap_names(net)[0] == "stem" and len(blocks) == 3 + 4 + 6 + 3
    inner = set(tap_names(net)) - {t.name for t in net.taps}  # readable inside every block
    assert inner == {f"{b}.{part}" for b in blocks for part in ("relu1", "sum")}
    assert net.tap("penultimate").channels == 32  # 8 * width


def test_vgg_taps_every_conv_unit():
    assert sum(t.startswith("conv") for t in tap_names(build(ModelConfig("vgg16", 4), 10, (0.5,) * 3, (0.2,) * 3))) == 13
    assert sum(t.startswith("conv") for t in tap_names(build(ModelConfig("vgg19", 4), 10, (0.5,) * 3, (0.2,) * 3))) == 16


def test_normalisation_is_inside_the_model():
    mean, std = channel_stats("cifar100")
    norm = Normalize(mean, std)
    x = torch.rand(2, 3, 4, 4)
    expected = (x - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    assert torch.allclose(norm(x), expected)
    net = build(ModelConfig("resnet18", 4), 100, mean, std)
    assert torch.equal(net.normalize.mean.flatten(), torch.tensor(mean))


def test_unknown_tap_and_arch_errors_list_the_choices():
    net = build(ModelConfig("resnet18", 4), 10, (0.5,) * 3, (0.2,) * 3)
    with pytest.raises(ValueError, match="valid taps: .*penultimate"):
        representation(net, torch.rand(1, 3, 32, 32), "layer9.0")
    with pytest.raises(ValueError, match="choose one of .*resnet18"):
        build(ModelConfig("resnet99", 4), 10, (0.5,) * 3, (0.2,) * 3)


def test_plain_modules_tap_by_module_name_and_gradients_flow():
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(5))
    x = torch.rand(2, 3, 8, 8, requires_grad=True)
    net(x)
    assert "logits" in tap_names(net) and "1" in tap_names(net)
    rep = representation(net, x, "1")
    assert rep.shape == (2, 4 * 6 * 6)
    rep.sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_early_exit_skips_layers_above_the_tap():
    net = build(ModelConfig("resnet18", 4), 10, (0.5,) * 3, (0.2,) * 3)
    calls = []
    net.fc.register_forward_hook(lambda *a: calls.append(1))
    representation(net, torch.rand(1, 3, 32, 32), "stem")
    assert calls == []
    representation(net, torch.rand(1, 3, 32, 32), "logits")
    assert calls == [1]


def test_frozen_restores_every_mode_and_flag():
    net = build(ModelConfig("resnet18", 4), 10, (0.5,) * 3, (0.2,) * 3)
    net.train()
    net.layer2.eval()  # mixed modes must come back exactly
    net.fc.weight.requires_grad_(False)
    modes = {n: m.training for n, m in net.named_modules()}
    flags = {n: p.requires_grad for n, p in net.named_parameters()}
    with frozen(net, net):
        assert not any(m.training for m in net.modules())
        assert not any(p.requires_grad for p in net.parameters())
    assert modes == {n: m.training for n, m in net.named_modules()}
    assert flags == {n: p.requires_grad for n, p in net.named_parameters()}


def test_the_config_check_names_every_registered_architecture():
    """stir.config checks model.arch against the names it reads from the models' source (no model import
    in the config layer, stir.config.arch_names): the registry's list, with no list written by hand."""
    from stir.config.arch_names import arch_names
    from stir.config.validate import ARCH_NAMES

    assert list(arch_names()) == list(ARCH_NAMES) == names()
