"""The continuation of the published inversion (inversion.continue_steps) and difficulty as a censored
measurement (Kaplan-Meier), on tiny models."""
import math

import pytest
import torch
from torch import nn

from invtest_utils import noise_images
from stir.descent import HalvingLengthStep, descend
from stir.inversion import ExecutionConfig, InversionConfig, invert
from stir.inversion.controversial import censored_difficulty, controversial_perturbation

RUN = ExecutionConfig(warn_below=0.0)


def stalling_net() -> nn.Module:
    """A wide read-out whose published-procedure residual stalls well above 0.02 in 30 steps."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 2, 1), nn.ReLU(), nn.Flatten(),
                             nn.Linear(8 * 8 * 8, 64)).eval()


def test_the_continuation_starts_where_the_published_procedure_ended_and_goes_further(tmp_path):
    m, x = stalling_net(), noise_images(6)
    published = InversionConfig(steps=30, record_steps=(10,))
    continued = InversionConfig(steps=30, record_steps=(10,), continue_steps=200, continue_patience=5, tolerance=0.02)
    run = ExecutionConfig(warn_below=0.0, cache_dir=str(tmp_path))
    a = invert(m, x, "logits", published, run=run)
    b = invert(m, x, "logits", continued, run=run)
    assert sorted(b.snapshots) == [10, 30, 230]  # the published budget stays on record
    assert torch.equal(b.snapshots[30], a.x_prime) and torch.equal(b.snapshot_residual[30], a.residual)
    assert (b.residual <= a.residual + 1e-7).all()  # the best iterate: never worse than where it started
    assert b.residual.median() < a.residual.median() / 2 and b.fraction_iri > a.fraction_iri
    assert b.history.shape == (231, 6) and (b.steps >= 30).all() and b.evaluations > a.evaluations
    # an image within the bound stops: the continuation spends steps only where the residual is above it
    reached = b.residual <= 0.9 * 0.02
    assert (b.steps[reached] < 230).all()
    # cached on top of the published inversion: both entries, and the published one served again
    assert len(list(tmp_path.glob("*.pt"))) == 2
    assert invert(m, x, "logits", published, run=run).from_cache and invert(m, x, "logits", continued, run=run).from_cache


def uphill_net(pixels: int = 3 * 16 * 16, d: int = 8, k: float = 3.0) -> nn.Module:
    """A read-out where FakeReLU's surrogate gradient points uphill: m(x) = relu(A x) + relu(-k A x - 1).

    The second block is dead on every image in [0, 1], so r1's true gradient flows through relu(A x)
    alone; FakeReLU on the ReLU (module "2") adds the dead block's -k A, i.e. (1 - k) times the true
    direction: with k = 3 every faked step goes up r1.
    """
    with torch.random.fork_rng():
        torch.manual_seed(0)
        a = torch.rand(d, pixels) / pixels  # A x > 0 on images in [0, 1]: the first block is alive
    first, read = nn.Linear(pixels, 2 * d), nn.Linear(2 * d, d, bias=False)
    with torch.no_grad():
        first.weight.copy_(torch.cat([a, -k * a]))
        first.bias.copy_(torch.cat([torch.zeros(d), -torch.ones(d)]))
        read.weight.copy_(torch.cat([torch.eye(d), torch.eye(d)], 1))
    return nn.Sequential(nn.Flatten(), first, nn.ReLU(), read).eval()


def test_the_continuation_follows_the_true_gradient_where_fakerelu_points_uphill():
    """Issue 53: the continuation kept the published FakeReLU, so where its surrogate is not r1's gradient
    (the laptop ResNet18s: median r1 0.151 from step 1500 to 4000) it never moved; here it stayed at the
    published 0.43 with no IRI. With FakeReLU off after the published budget it reaches the tolerance."""
    m, x = uphill_net(), noise_images(6)
    faked = dict(steps=30, record_steps=(10,), fake_relu=["2"])
    published = invert(m, x, "logits", InversionConfig(**faked), run=RUN)
    assert published.residual.median() > 0.2  # the faked published steps went nowhere
    continued = invert(m, x, "logits", InversionConfig(**faked, continue_steps=200, continue_patience=5), run=RUN)
    assert continued.fraction_iri == 1.0 and continued.residual.max() <= 0.02
    assert "continue_fake_relu" in InversionConfig(**faked, continue_steps=200).key_settings(False, "32")


def test_the_continuation_is_keyed_and_off_by_default():
    off = InversionConfig()
    assert off.continue_steps == 0 and off.total_steps == off.num_steps == 1000 and off.snapshot_steps[-1] == 1000
    assert "continue_steps" not in off.key_settings(False, "32")  # the published procedure's key, unchanged
    on = InversionConfig(continue_steps=500)
    assert on.key_settings(False, "32")["continue_steps"] == 500 and on.snapshot_steps[-2:] == (1000, 1500)
    with pytest.raises(ValueError, match="continues the published"):
        InversionConfig(mode="fast", continue_steps=10)
    with pytest.raises(ValueError, match="steps must be >= 1"):
        InversionConfig(steps=0)


def test_halving_steps_shrink_only_where_the_objective_stalls():
    target = torch.tensor([[0.3, 0.7], [0.5, 0.5]])

    def objective(x, index):  # distance to a target: a fixed step of 0.4 overshoots and stalls
        return (x - target[index]).norm(dim=1)

    out = descend(objective, torch.zeros(2, 2), HalvingLengthStep(0.4, patience=2), 60, keep_best=True,
                  x_init=torch.zeros(2, 2))
    assert out.loss.max() < 1e-3  # the length halved until the steps fit
    with pytest.raises(ValueError, match="must pass loss"):
        HalvingLengthStep(0.1).step(torch.zeros(1, 2), torch.ones(1, 2), torch.zeros(1, 2), HalvingLengthStep(0.1).init(
            torch.zeros(1, 2), None)[1], torch.arange(1))


def test_kaplan_meier_of_reached_and_censored_images():
    inf = math.inf
    km = censored_difficulty(torch.tensor([1.0, 2.0, 3.0, inf]), torch.tensor([5.0, 5.0, 5.0, 4.0]))
    assert km["fraction"] == 0.75 and km["median"] == 2.0 and km["median_censored"] == 0.0
    assert km["restricted_mean"] == pytest.approx(1 + 0.75 + 0.5 + 0.25)  # the area under S up to 4
    none = censored_difficulty(torch.tensor([inf, inf]), torch.tensor([5.0, 6.0]))
    assert none["fraction"] == 0.0 and none["median_censored"] == 1.0 and none["median"] == 6.0
    assert none["restricted_mean"] == 6.0  # nobody reached: a lower bound, the farthest distance looked at


def test_a_pair_that_shares_invariances_is_harder_to_make_controversial():
    """m2 = a rotation of m1 (shares all its invariances: r2 = r1, never controversial) against an
    unrelated m2: with the censored estimate the first orders above the second even though none of its
    images gets there (the mean over reached images is undefined for it)."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        m1 = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 8)).eval()
        unrelated = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 8)).eval()
        rotation = nn.Linear(8, 8, bias=False)
        rotation.weight.data.copy_(torch.linalg.qr(torch.randn(8, 8))[0])
    shares = nn.Sequential(m1, rotation).eval()  # m2(x) = Q m1(x): r2 = r1, the same invariances
    x = noise_images(8)
    cfg = InversionConfig(tolerance=0.05)
    from stir.inversion.config import ControversialConfig

    walk = ControversialConfig(steps=60, step_size=0.1, m2_threshold=0.3)
    easy = controversial_perturbation(m1, unrelated, x, "logits", "logits", walk, cfg)
    hard = controversial_perturbation(m1, shares, x, "logits", "logits", walk, cfg)
    e, h = easy.censored()["walk"], hard.censored()["walk"]
    assert e["fraction"] > 0 and h["fraction"] == 0.0 and math.isnan(hard.delta)
    assert h["restricted_mean"] > e["restricted_mean"] and h["median_censored"] == 1.0 and h["median"] > e["median"]
    assert h["median"] == pytest.approx(walk.steps * walk.step_size)  # looked at for the whole walk
    # The perturbation reading (eq. 8's ||x_c - x||) cannot order them: the walk of the pair that shares
    # m1's invariances stays near the IRI boundary, so its censoring distance is small.
    # It is withheld wherever an image never got there (informative censoring); computed raw it misorders them.
    assert hard.censored()["perturbation"]["withheld"] == 1.0 and math.isnan(hard.censored()["perturbation"]["median"])
    p = censored_difficulty(hard.distance, hard.walked)
    assert p["median_censored"] == 1.0 and p["median"] < censored_difficulty(easy.distance, easy.walked)["median"]
    assert (easy.walked > 0).all() and (easy.walked <= walk.steps * walk.step_size + 1e-3).all()
    assert torch.equal(torch.isfinite(easy.first_step), easy.reached)


def test_the_continuation_descent_is_a_choice_with_a_key_of_its_own():
    """continue_descent=iri (the default: the IRI solver's descent from the published x') or halving (the
    normalised halving steps before it, whose key is the one they had); both leave the published record."""
    iri = InversionConfig(steps=30, record_steps=(10,), continue_steps=200, continue_patience=5)
    halving = InversionConfig(steps=30, record_steps=(10,), continue_steps=200, continue_patience=5,
                              continue_descent="halving")
    assert iri.key_settings(False, "32")["continue_descent"] == "iri"
    assert "continue_descent" not in halving.key_settings(False, "32")
    # the halving key is the continuation's key from before the field: the iri key less that one field,
    # tolerance and stop_fraction in (the continuation stops each image at the IRI bound)
    without = {k: v for k, v in iri.key_settings(False, "32").items() if k != "continue_descent"}
    assert halving.key_settings(False, "32") == without and {"tolerance", "stop_fraction"} <= set(without)
    assert "continue_descent" not in InversionConfig().key_settings(False, "32")  # off: the published key
    with pytest.raises(ValueError, match="continue_descent must be one of"):
        InversionConfig(continue_descent="lbfgs")
    m, x = stalling_net(), noise_images(6)
    published = invert(m, x, "logits", InversionConfig(steps=30, record_steps=(10,)), run=RUN)
    for cfg in (iri, halving):
        r = invert(m, x, "logits", cfg, run=RUN)
        assert torch.equal(r.snapshots[30], published.x_prime) and (r.residual <= published.residual + 1e-6).all()
        assert r.residual.median() < published.residual.median() / 2 and r.x_prime.min() >= 0 and r.x_prime.max() <= 1
