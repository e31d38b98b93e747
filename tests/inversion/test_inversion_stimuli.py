"""Controversial stimuli as appendix C of the STIR paper made them (eq. 8; issue 52): the solver's
objective, step, starts and the Delta it measures, on tiny seeded models."""
import pytest
import torch
from torch import nn

from stir.inversion.objectives import ORIGINAL_CODE_BETA
from stir.inversion.seeds import make_seed, seed_generator
from stir.inversion.stimuli import StimulusConfig, controversial_stimuli, start_point


def _net(seed: int) -> nn.Module:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 2, 1), nn.ReLU(),
                             nn.Flatten(), nn.Linear(512, 16)).eval()


def _images(n: int) -> torch.Tensor:
    low = torch.rand(n, 3, 4, 4, generator=torch.Generator().manual_seed(1))
    return nn.functional.interpolate(low, size=32, mode="bilinear", align_corners=False)


def _distances(model: nn.Module, x: torch.Tensor, xc: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return (model(xc.clamp(0, 1)) - model(x)).norm(dim=1)


@pytest.mark.parametrize("start", ["image", "seed"])
@pytest.mark.parametrize("objective", ["paper", "original"])
def test_the_objective_decreases_and_pushes_m2_away_while_m1_is_held(start, objective):
    m1, m2, x = _net(0), _net(1), _images(6)
    s = controversial_stimuli(m1, m2, x, "logits", cfg=StimulusConfig(start=start, objective=objective, steps=40,
                                                                     step_size=0.1))
    assert (s.loss < s.loss_start).all()  # every image moved to a lower objective, none stayed at x_0
    assert torch.equal(s.loss, s.history.nan_to_num(float("inf")).min(dim=0).values)  # the best iterate is kept
    # the kept value is the objective at x_c: eq. 8 as printed, or the original code's normalised loss
    want = s.d1 - s.d2 if objective == "paper" else s.r1 - ORIGINAL_CODE_BETA * s.r2
    assert torch.allclose(s.loss, want, atol=1e-5)
    assert torch.allclose(s.d1, _distances(m1, x, s.x_c), atol=1e-5)
    assert torch.allclose(s.d2, _distances(m2, x, s.x_c), atol=1e-5)
    if start == "image":  # from x, m2 is what moves: its distance grows past m1's
        assert (s.d2 > s.d1).all()


def test_delta_is_the_l2_distance_from_x_of_the_kept_iterate_at_every_recorded_step():
    m1, m2, x = _net(0), _net(1), _images(5)
    cfg = StimulusConfig(steps=30, step_size=0.1, record_steps=(10, 20, 99))
    s = controversial_stimuli(m1, m2, x, "logits", cfg=cfg)
    assert cfg.recorded == (10, 20, 30)  # steps beyond the budget are dropped, the budget is in
    assert torch.allclose(s.distance, (s.x_c - x).flatten(1).norm(dim=1))
    assert torch.equal(s.along[30], s.distance)
    assert set(s.along) == {10, 20, 30}
    assert (s.x_c >= 0).all() and (s.x_c <= 1).all()  # projected onto the image box after every step


def test_the_two_starts_are_the_attackers_random_start_and_the_inversions_noise_seed():
    x = _images(4)
    near = start_point(x, StimulusConfig(start="image", step_size=0.5, seed=3))
    moved = (near - x).flatten(1).norm(dim=1)
    assert (moved > 0).all() and (moved <= 0.5 + 1e-6).all()  # uniform noise renormed to at most one step
    assert (near >= 0).all() and (near <= 1).all()
    assert torch.equal(near, start_point(x, StimulusConfig(start="image", step_size=0.5, seed=3)))  # seeded
    seed = start_point(x, StimulusConfig(start="seed", seed=3))
    assert torch.equal(seed, make_seed("normal", x, seed_generator(3)))  # the IRI seed of draw 0, raw N(0, 1)
    s = controversial_stimuli(_net(0), _net(1), x, "logits", cfg=StimulusConfig(start="seed", steps=3, seed=3))
    assert torch.allclose(s.start_distance, (seed.clamp(0, 1) - x).flatten(1).norm(dim=1))
    assert (s.start_distance > 5 * (moved.max())).all()  # a noise seed starts far from x, the random start next to it


def test_one_step_is_the_original_attackers_normalised_step_then_clamp():
    """UnconstrainedStep: x <- clamp(x - step_size * g / ||g||_2, 0, 1), g the gradient of the loss at
    clamp(x) (the normaliser's clamp passes the gradient inside [0, 1])."""
    m1, m2, x = _net(0), _net(1), _images(3)
    cfg = StimulusConfig(start="image", steps=1, step_size=0.5, record_steps=())
    x0 = start_point(x, cfg).requires_grad_(True)
    with torch.no_grad():
        t1, t2 = m1(x), m2(x)
    loss = (m1(x0) - t1).norm(dim=1) - (m2(x0) - t2).norm(dim=1)
    (g,) = torch.autograd.grad(loss.sum(), x0)
    x1 = (x0.detach() - 0.5 * g / g.flatten(1).norm(dim=1).view(-1, 1, 1, 1)).clamp(0, 1)
    s = controversial_stimuli(m1, m2, x, "logits", cfg=cfg)
    better = loss.detach() > s.loss  # the kept iterate is x_1 where it lowered the objective
    assert better.any()
    assert torch.allclose(s.x_c[better], x1[better], atol=1e-6)


@pytest.mark.parametrize("bad", [dict(start="noise"), dict(objective="constrained"), dict(steps=0), dict(step_size=0)])
def test_a_bad_setting_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match="controversial stimuli"):
        StimulusConfig(**bad)
