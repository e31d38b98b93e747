"""stir.models.synthetic: batch norms with trained-looking statistics, reproducibly."""
import torch
from torch import nn

from stir.config.schema import ModelConfig
from stir.models import build
from stir.models.synthetic import with_trained_batch_norms


def _net() -> nn.Module:
    torch.manual_seed(0)
    return build(ModelConfig("resnet18", width=4), 10, (0.5,) * 3, (0.25,) * 3)


def _norms(m: nn.Module) -> list:
    return [mod for mod in m.modules() if isinstance(mod, nn.BatchNorm2d)]


def test_every_batch_norm_leaves_the_identity_within_its_ranges():
    m = with_trained_batch_norms(_net(), seed=3, affine=True)
    for bn in _norms(m):
        assert bn.running_mean.abs().max() <= 0.3 and bn.running_mean.abs().max() > 0
        assert bn.running_var.min() >= 0.5 and bn.running_var.max() <= 2.0
        assert bn.weight.min() >= 0.5 and bn.weight.max() <= 1.5 and not torch.all(bn.weight == 1)
        assert bn.bias.abs().max() <= 0.2 and bn.bias.abs().max() > 0


def test_same_seed_same_values_and_the_global_random_state_is_untouched():
    a, b, c = _net(), _net(), _net()
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    with_trained_batch_norms(a, seed=1)
    assert torch.equal(torch.rand(3), expected)  # drawn from its own generator
    with_trained_batch_norms(b, seed=1)
    with_trained_batch_norms(c, seed=2)
    for p, q, r in zip(_norms(a), _norms(b), _norms(c)):
        assert torch.equal(p.running_var, q.running_var) and not torch.equal(p.running_var, r.running_var)
    # affine=False leaves the affines as built.
    assert all(torch.all(bn.weight == 1) and torch.all(bn.bias == 0) for bn in _norms(a))
