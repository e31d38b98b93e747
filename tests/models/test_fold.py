"""Batch norm folded into convolutions (``stir.models.fold``): the same function, the source untouched."""
import hashlib

import pytest
import torch
from torch import nn

from stir.config.schema import ModelConfig
from stir.models import build, representation
from stir.models.fold import InferenceCopy, conv_bn_pairs
from stir.models.synthetic import with_trained_batch_norms


def _trained_looking(arch: str, seed: int = 0) -> nn.Module:
    """A network whose batch norms are not the identity (random running statistics and affines)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        m = build(ModelConfig(arch, width=4), 10, (0.5,) * 3, (0.25,) * 3)
    return with_trained_batch_norms(m, seed, affine=True)


def _digest(m: nn.Module) -> str:
    h = hashlib.sha256()
    for name, t in sorted(m.state_dict().items()):
        h.update(name.encode() + t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("arch, expected", [("resnet18", 1 + 8 * 2 + 3), ("vgg16", 13)])
@pytest.mark.parametrize("channels_last", [False, True])
def test_the_folded_copy_computes_the_same_function_at_every_tap(arch, expected, channels_last):
    m = _trained_looking(arch).train()
    before = _digest(m)
    copy = InferenceCopy(m, channels_last=channels_last)
    assert len(copy.pairs) == expected  # every conv -> BN pair (ResNet18: stem, 2 per block, 3 shortcuts)
    assert m.training and _digest(m) == before  # the source is untouched, its mode restored
    assert not copy.module.training and not any(p.requires_grad for p in copy.module.parameters())
    assert not any(isinstance(mod, nn.BatchNorm2d) for mod in copy.module.modules())
    m.eval()
    x = torch.rand(6, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    xin = x.contiguous(memory_format=torch.channels_last) if channels_last else x
    for tap in ("penultimate", "logits", m.taps[1].name):
        a, b = representation(m, x, tap), representation(copy.module, xin, tap)
        assert (a - b).norm() / a.norm() < 1e-5, tap


def test_input_gradients_agree_up_to_rounding():
    m = _trained_looking("resnet18").eval()
    copy = InferenceCopy(m, channels_last=True)
    x = torch.rand(4, 3, 32, 32, generator=torch.Generator().manual_seed(2))

    def grad(model, x):
        x = x.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(representation(model, x, "penultimate").norm(dim=1).sum(), x)
        return g

    g1, g2 = grad(m, x), grad(copy.module, x.contiguous(memory_format=torch.channels_last))
    assert (g1 - g2).norm() / g1.norm() < 1e-3


def test_refresh_follows_the_sources_weights():
    m = _trained_looking("resnet18").eval()
    copy = InferenceCopy(m)
    x = torch.rand(4, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.add_(0.1)
    stale = (copy.module(x) - m(x)).abs().max()
    copy.refresh()
    fresh = (copy.module(x) - m(x)).abs().max()
    assert stale > 1e-2 and fresh < 1e-4


def test_a_conv_read_by_a_tap_is_not_folded():
    m = _trained_looking("resnet18").eval()
    all_pairs = conv_bn_pairs(m)
    kept = conv_bn_pairs(m, keep=["layer1.0.conv1"])
    assert ("layer1.0.conv1", "layer1.0.bn1") in all_pairs
    assert ("layer1.0.conv1", "layer1.0.bn1") not in kept and len(kept) == len(all_pairs) - 1


def test_a_conv_used_twice_or_an_untraceable_model_is_left_alone():
    class Branching(nn.Module):  # the conv output feeds the BN and a skip: folding would change the skip
        def __init__(self):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 3, 3, padding=1), nn.BatchNorm2d(3)

        def forward(self, x):
            y = self.conv(x)
            return self.bn(y) + y

    class DataDependent(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 3, 3, padding=1), nn.BatchNorm2d(3)

        def forward(self, x):
            return self.bn(self.conv(x)) if x.sum() > 0 else x

    assert conv_bn_pairs(Branching()) == []
    assert conv_bn_pairs(DataDependent()) == []  # torch.fx cannot trace it: no folding, no error
    copy = InferenceCopy(DataDependent().eval())
    x = torch.rand(2, 3, 8, 8)
    assert torch.equal(copy.module(x), copy.source(x))
