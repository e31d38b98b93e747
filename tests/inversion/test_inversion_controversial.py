"""Controversial-stimulus difficulty walked from the image (issue 9, appendix C of the STIR paper)."""
import math

import pytest
import torch
from torch import nn

from stir.inversion import InversionConfig
from stir.inversion.config import ControversialConfig
from stir.inversion.controversial import controversial_perturbation
from stir.inversion.seeds import make_seed, seed_generator


def _net(seed: int) -> nn.Module:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 2, 1), nn.ReLU(),
                             nn.Flatten(), nn.Linear(512, 16)).eval()


class _Mixed(nn.Module):
    """m2 = A m1: a fixed invertible linear map of m1's representation. It shares every invariance
    of m1 (m1(x') = m1(x) implies m2(x') = m2(x)), so r2 <= cond(A) * r1 stays small with r1."""

    def __init__(self, m1: nn.Module):
        super().__init__()
        self.m1 = m1
        q, _ = torch.linalg.qr(torch.randn(16, 16, generator=torch.Generator().manual_seed(0)))
        self.mix = nn.Linear(16, 16, bias=False)
        with torch.no_grad():
            self.mix.weight.copy_(q @ torch.diag(torch.linspace(0.5, 2.0, 16)))  # cond(A) = 4

    def forward(self, x):
        return self.mix(self.m1(x))


def _images(n: int) -> torch.Tensor:
    low = torch.rand(n, 3, 4, 4, generator=torch.Generator().manual_seed(1))
    return nn.functional.interpolate(low, size=32, mode="bilinear", align_corners=False)


CFG = ControversialConfig(steps=60, step_size=0.05, m2_threshold=0.3)
INV = InversionConfig(tolerance=0.05)


def test_difficulty_separates_a_pair_that_shares_invariances_from_one_that_does_not():
    m1, x = _net(0), _images(8)
    sharing = controversial_perturbation(m1, _Mixed(m1), x, "logits", cfg=CFG, inversion=INV)
    unrelated = controversial_perturbation(m1, _net(1), x, "logits", cfg=CFG, inversion=INV)
    # m2 = A m1 never gets to r2 >= 0.3 while r1 <= 0.05 (r2 <= 4 * r1 = 0.2)
    assert sharing.fraction == 0.0 and math.isnan(sharing.delta)
    assert (sharing.max_r2 <= 4 * INV.tolerance + 1e-4).all()
    assert unrelated.fraction >= 0.5
    assert unrelated.delta <= CFG.steps * CFG.step_size
    # the perturbation needed, not the distance of a noise seed from x (~ 25 for 32x32x3 images)
    seed_distance = (make_seed("normal", x, seed_generator(0)) - x).flatten(1).norm(dim=1).mean().item()
    assert unrelated.delta < seed_distance / 5
    assert torch.all(unrelated.distance[unrelated.reached] >= 0)


@pytest.mark.parametrize("objective", ["constrained", "paper", "original"])
def test_every_adversarial_objective_walks_from_x(objective):
    m1, m2, x = _net(0), _net(1), _images(4)
    inv = InversionConfig(tolerance=0.05, adversarial_objective=objective)
    r = controversial_perturbation(m1, m2, x, "logits", cfg=CFG, inversion=inv)
    assert r.distance.shape == (4,) and r.reached.dtype == torch.bool
    assert (r.distance[r.reached] <= CFG.steps * CFG.step_size + CFG.start_noise + 1e-5).all()


def test_bad_settings_name_the_key():
    with pytest.raises(ValueError, match="difficulty.steps"):
        ControversialConfig(steps=0)
    with pytest.raises(ValueError, match="m2_threshold"):
        ControversialConfig(m2_threshold=0)
