"""The geometries the inversion engine adds to stir.descent: Adam with per-example state, schedules."""
import torch

from stir.descent import Adam, Constant, Cosine, Exponential, InverseTime, ScheduledLengthStep, descend


def test_schedules():
    t = torch.tensor([1, 6, 11, 21])
    assert torch.allclose(Constant()(t), torch.ones(4))
    assert torch.allclose(Cosine(10)(t), torch.tensor([1.0, 0.5, 0.0, 0.0]), atol=1e-6)
    assert torch.allclose(InverseTime(10)(t), torch.tensor([1.0, 1 / 1.5, 0.5, 1 / 3]))
    assert torch.allclose(Exponential(5)(t), torch.tensor([1.0, 0.5, 0.25, 0.0625]))


def test_adam_first_step_is_lr_per_coordinate_and_stays_in_the_box():
    x = torch.full((2, 3), 0.5)
    geometry = Adam(0.1)
    x0, state = geometry.init(x, None)
    grad = torch.tensor([[1.0, -2.0, 0.0], [3.0, 1e-3, -5.0]])
    x1 = geometry.step(x0, grad, x, state, torch.arange(2))
    # bias-corrected first step: m_hat / sqrt(v_hat) = sign(g) (0 where g = 0)
    assert torch.allclose(x1, 0.5 - 0.1 * grad.sign(), atol=1e-5)
    x2 = Adam(1.0).step(x0, grad, x, Adam(1.0).init(x, None)[1], torch.arange(2))
    assert x2.min() >= 0 and x2.max() <= 1


def test_adam_state_is_per_example_so_stopping_one_does_not_change_the_others():
    target = torch.tensor([[0.2, 0.9], [0.7, 0.1], [0.4, 0.4]])

    def objective(x, index):
        return ((x - target[index]) ** 2).sum(1)

    origin = torch.full((3, 2), 0.5)
    geometry = Adam(0.05, InverseTime(5))
    together = descend(objective, origin, geometry, 30, stop=lambda loss, index: index == 1)  # row 1 stops at once
    alone = descend(lambda x, i: objective(x, i + 2), origin[2:], geometry, 30)
    assert together.steps.tolist() == [30, 0, 30]
    assert torch.allclose(together.x[2], alone.x[0])


def test_scheduled_length_step_lengths():
    x = torch.full((1, 4), 0.5)
    geometry = ScheduledLengthStep(0.2, InverseTime(1))
    xi, state = geometry.init(x, None)
    grad = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    x1 = geometry.step(xi, grad, x, state, torch.arange(1))
    x2 = geometry.step(x1, grad, x, state, torch.arange(1))
    assert torch.allclose(x1[0, 0], torch.tensor(0.3)) and torch.allclose(x2[0, 0], torch.tensor(0.2))
