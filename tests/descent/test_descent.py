"""The one descent loop and its step geometries, on objectives with known minimisers."""
import pytest
import torch

from stir.descent import FixedLengthStep, L2Ball, LinfBall, descend


def quadratic(target):
    # objective(x, index) = ||x - target[index]||^2 per example
    return lambda x, idx: (x - target[idx]).flatten(1).pow(2).sum(1)


def test_fixed_length_step_moves_exactly_step_size_and_stays_in_the_box():
    g = torch.Generator().manual_seed(0)
    origin = 0.25 + 0.5 * torch.rand(4, 3, 8, 8, generator=g)  # interior, so no clamp on step 1
    target = torch.rand(4, 3, 8, 8, generator=g)
    out = descend(quadratic(target), origin, FixedLengthStep(0.5), steps=1)
    assert torch.allclose((out.x - origin).flatten(1).norm(dim=1), torch.full((4,), 0.5), atol=1e-5)
    far = descend(quadratic(target + 5), origin, FixedLengthStep(0.5), steps=30)
    assert far.x.min() >= 0 and far.x.max() <= 1


def test_keep_best_returns_the_best_iterate_not_the_last():
    # Fixed steps of 0.5 overshoot a minimiser 0.3 away: the last iterate oscillates, the best is the start.
    origin = torch.zeros(1, 1, 1, 1) + 0.5
    target = origin + 0.3
    best = descend(quadratic(target), origin, FixedLengthStep(0.5), steps=5, keep_best=True)
    last = descend(quadratic(target), origin, FixedLengthStep(0.5), steps=5, keep_best=False)
    assert torch.allclose(best.loss, torch.tensor([0.04]), atol=1e-6)  # the min over evaluated iterates
    assert best.loss <= last.loss
    assert torch.allclose(best.loss, quadratic(target)(best.x, torch.tensor([0])))


def test_l2_and_linf_balls_project_onto_the_ball_and_the_box():
    g = torch.Generator().manual_seed(1)
    origin = torch.rand(6, 3, 8, 8, generator=g)
    away = lambda x, idx: -(x - origin[idx]).flatten(1).pow(2).sum(1)  # pushes out of any ball
    out = descend(away, origin, L2Ball(eps=0.5, step_size=0.2), steps=10, generator=g)
    assert ((out.x - origin).flatten(1).norm(dim=1) <= 0.5 + 1e-5).all()
    assert out.x.min() >= 0 and out.x.max() <= 1
    out = descend(away, origin, LinfBall(eps=0.03, step_size=0.01), steps=10, generator=g)
    assert (out.x - origin).abs().max() <= 0.03 + 1e-6


def test_early_stop_freezes_done_examples_and_saves_evaluations():
    origin = torch.zeros(3, 1, 2, 2)
    target = torch.tensor([0.1, 0.9, 0.5]).view(3, 1, 1, 1).expand(3, 1, 2, 2)
    stop = lambda loss, idx: loss < 1e-3
    out = descend(quadratic(target), origin, FixedLengthStep(0.05), steps=200, keep_best=True, stop=stop)
    assert (out.loss < 1e-3).all()
    assert out.steps[0] < out.steps[2] < out.steps[1]  # nearer targets stop sooner
    assert out.evaluations < 3 * 201
    assert torch.isnan(out.history[-1]).all()  # every example had stopped before the last step


def test_the_seeded_random_start_is_reproducible():
    origin = torch.rand(2, 3, 4, 4)
    obj = lambda x, idx: x.flatten(1).sum(1)
    a = descend(obj, origin, L2Ball(1.0, 0.1), 3, generator=torch.Generator().manual_seed(5))
    b = descend(obj, origin, L2Ball(1.0, 0.1), 3, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a.x, b.x)


def test_snapshots_are_the_best_iterates_so_far():
    # 1-d quadratic with an overshooting fixed step: the loss is not monotone, the best-so-far is.
    from stir.descent import FixedLengthStep

    target = torch.full((2, 1, 2, 2), 0.5)
    start = target + 0.35 * torch.ones_like(target) / 2  # distance 0.35, steps of 0.2 overshoot
    objective = lambda x, i: (x - target[i]).flatten(1).norm(dim=1)  # noqa: E731
    run = descend(objective, start, FixedLengthStep(0.2), 4, keep_best=True, x_init=start, snapshots=(0, 1, 2, 4))
    dist = run.history[:, 0]  # 0.35, 0.15, 0.05 (past), 0.25, 0.05 ...
    for t, x in run.snapshots.items():
        best = (x - target).flatten(1).norm(dim=1)
        assert torch.allclose(best, dist[: t + 1].min().expand(2), atol=1e-6), t
    assert torch.equal(run.snapshots[4], run.x)
    with pytest.raises(ValueError, match="keep_best"):
        descend(objective, start, FixedLengthStep(0.2), 4, snapshots=(2,))
    with pytest.raises(ValueError, match="snapshot steps"):
        descend(objective, start, FixedLengthStep(0.2), 4, keep_best=True, snapshots=(5,))
