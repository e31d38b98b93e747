"""Inner taps, reductions of spatial maps and FakeReLU: the original STIR code's representations."""
import pytest
import torch

from stir.config.schema import ModelConfig
from stir.models import build, channel_stats, representation, representations
from stir.models.fake_relu import fake_relu
from stir.models.taps import REDUCTIONS, with_reduction


@pytest.fixture
def net():
    torch.manual_seed(0)
    return build(ModelConfig("resnet18", width=4), 10, *channel_stats("cifar10")).eval()


def test_inner_taps_are_the_block_internals(net):
    x = torch.rand(2, 3, 32, 32)
    reps = representations(net, x, ["layer2.0.relu1", "layer2.0.sum", "layer2.0"])
    # the block output is the ReLU of the pre-ReLU sum; relu1 is non-negative
    assert torch.allclose(reps["layer2.0"], reps["layer2.0.sum"].clamp(min=0))
    assert (reps["layer2.0.relu1"] >= 0).all() and (reps["layer2.0.sum"] < 0).any()


def test_original_layer_list_of_resnet18(net):
    taps = net.original_layer_taps
    assert taps[0] == "stem" and taps[-1] == "penultimate" and len(taps) == 1 + 8 * 2 + 1
    assert taps[1:3] == ("layer1.0.relu1", "layer1.0.sum")


def test_reductions_of_a_spatial_map(net):
    x = torch.rand(3, 3, 32, 32)
    full = representation(net, x, "layer2.0").view(3, 8, 16, 16)  # (n, c, h, w): width 4 -> 8 channels
    assert torch.allclose(representation(net, x, with_reduction("layer2.0", "spatial_mean")), full.mean(dim=(2, 3)))
    # the original code's mean over axes (1, 2): channels and height, leaving the width axis
    assert torch.allclose(representation(net, x, "layer2.0@original"), full.mean(dim=(1, 2)))
    assert representation(net, x, "penultimate@original").shape == (3, 32)  # vectors are left as they are


def test_unknown_reduction_lists_the_choices(net):
    with pytest.raises(ValueError, match=r"unknown reduction 'max'.*spatial_mean"):
        representation(net, torch.rand(1, 3, 32, 32), "layer1.0@max")
    with pytest.raises(ValueError, match="choose one of"):
        with_reduction("stem", "sum")
    assert set(REDUCTIONS) == {"flatten", "spatial_mean", "original"}


def test_fake_relu_changes_the_gradient_not_the_value(net):
    x = torch.rand(4, 3, 32, 32, requires_grad=True)

    def value_and_grad():
        rep = representation(net, x, "penultimate")
        (g,) = torch.autograd.grad(rep.sum(), x)
        return rep.detach(), g

    plain_rep, plain_grad = value_and_grad()
    with fake_relu(net):
        fake_rep, fake_grad = value_and_grad()
        assert all(net.get_submodule(p).fake for p in net.fake_relu_sites)
    assert torch.equal(plain_rep, fake_rep)
    assert not torch.allclose(plain_grad, fake_grad)
    assert not any(net.get_submodule(p).fake for p in net.fake_relu_sites)  # restored
    assert net.fake_relu_sites == ("layer4.0.relu_out", "layer4.1.relu_out")  # every block of the last stage


def test_fake_relu_is_a_no_op_for_vgg_and_foreign_modules():
    vgg = build(ModelConfig("vgg16", width=4), 10, *channel_stats("cifar10"))
    foreign = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 10))
    with fake_relu(vgg, foreign):
        pass
    assert vgg.fake_relu_sites == ()
