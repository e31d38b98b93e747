"""A direction's cost, said before it starts (``stir.measure.cost``), and a walk budget that follows
the inversion's (``ControversialConfig.following``): a 20-step trial does not walk 200 steps."""
import logging

import pytest
import torch
from torch import nn

from stir.inversion import ControversialConfig, ExecutionConfig, InversionConfig
from stir.measure import CalibrationConfig, Estimator, evaluate_pair
from stir.measure.cost import estimate, probe_seconds, work
from stir.measure.plan import direction_parts, make_plan


def net(seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                         nn.Linear(16, 3))


@pytest.fixture(scope="module")
def images() -> torch.Tensor:
    return torch.rand(8, 3, 8, 8, generator=torch.Generator().manual_seed(0))


def test_an_unset_walk_follows_the_inversion_budget_up_to_the_published_200():
    assert Estimator(inversion=InversionConfig(steps=20)).resolved().difficulty.steps == 20
    assert Estimator(inversion=InversionConfig(mode="fast")).resolved().difficulty.steps == 200  # fast: 300 steps
    assert Estimator().resolved().difficulty.steps == 200  # the published 1000-step inversion walks 200, as before
    assert Estimator().resolved().inversion.steps == 1000  # an integer, not None
    explicit = Estimator(inversion=InversionConfig(steps=20), difficulty=ControversialConfig(steps=7)).resolved()
    assert explicit.difficulty.steps == 7  # a budget of its own is kept
    assert ControversialConfig().following(5).steps == 5 and ControversialConfig().steps is None
    # nothing is written into an estimator: resolving makes a new one, and a resolved one is returned as is
    given = Estimator()
    assert given.difficulty.steps is None and given.inversion.steps is None
    assert explicit.resolved() is explicit


def test_the_default_store_key_says_the_steps_walked(images):
    """The key holds the resolved budget: the published default's key is the one it always was (200)."""
    plan = make_plan(images, Estimator(calibration=CalibrationConfig(permutations=0)))
    assert direction_parts(plan, ("a", "b"), ("t", "t"))["difficulty"]["steps"] == 200
    short = make_plan(images, Estimator(inversion=InversionConfig(steps=20)))
    assert direction_parts(short, ("a", "b"), ("t", "t"))["difficulty"]["steps"] == 20


def test_a_negative_walk_is_refused_with_the_key_named():
    with pytest.raises(ValueError, match="difficulty.steps"):
        ControversialConfig(steps=0)


@pytest.mark.parametrize("iri, ceiling, ref, tgt", [
    # k=2 draws of n=8 images, 10 steps, the walk following at 10: arbitrary 160, adversarial 160 of
    # each model, walk 160 of each; an independent ceiling one more draw of m1 (80).
    ("both", "same_draws", 160 + 160 + 160, 160 + 160),
    ("arbitrary", "same_draws", 160, 0),
    ("arbitrary", "independent", 160 + 80, 0),
    ("adversarial", "same_draws", 160 + 160, 160 + 160),
])
def test_the_work_counts_every_image_step_of_each_model(images, iri, ceiling, ref, tgt):
    est = Estimator(k=2, iri=iri, inversion=InversionConfig(steps=10), calibration=CalibrationConfig(ceiling=ceiling))
    plan = make_plan(images, est)
    assert work(plan, adversarial=est.adversarial) == (ref, tgt)


def test_the_probe_times_a_real_pass_and_leaves_the_model_as_it_was(images):
    m = net(0).train()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    seconds = probe_seconds(m, images, "3")
    assert 0 < seconds < 1  # a pass of 8 tiny images: microseconds to milliseconds per image
    assert m.training and all(p.requires_grad for p in m.parameters())
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())  # no batch-norm statistics moved
    plan = make_plan(images, Estimator(k=2, iri="arbitrary", inversion=InversionConfig(steps=10)))
    cost = estimate(m, net(1), "3", "3", plan, adversarial=False)
    assert cost.tgt_steps == 0 and cost.tgt_seconds == 0 and cost.seconds == pytest.approx(160 * cost.ref_seconds)


def test_a_pair_says_what_each_direction_will_do_and_cost_before_it_inverts(images, caplog):
    est = Estimator(k=2, iri="both", inversion=InversionConfig(mode="fast", steps=6, lr=0.05),
                    calibration=CalibrationConfig(permutations=4, resamples=20))
    with caplog.at_level(logging.INFO, logger="stir.measure.direction"):
        evaluate_pair(net(0), net(1), images, "3", "3", est, run=ExecutionConfig(warn_below=0.0))
    lines = [r.getMessage() for r in caplog.records if r.name == "stir.measure.direction" and "image-steps" in r.getMessage()]
    assert len(lines) == 2  # one per direction, before its inversions
    assert "difficulty walk 6 steps" in lines[0]
    # 2 draws x 8 images x 6 steps = 96 per kind: arbitrary, adversarial and the walk through m1,
    # the last two through m2
    assert "288 image-steps of the reference + 192 of the target" in lines[0] and "about" in lines[0]
