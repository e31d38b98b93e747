"""The IRI solver (stir.inversion.iri, issue 53): its geometry, the raising ReLU surrogate, and that it
reaches its target residual where dead units stop the true gradient; STIR at IRIs (stir.measure.at_iris)."""
import pytest
import torch
from torch import nn

from invtest_utils import noise_images
from stir.descent import PlateauAdam, descend
from stir.inversion.iri import IRIConfig, solve_iri
from stir.measure.at_iris import AT_IRIS, AtIRIsResult, stir_at_iris
from stir.models.fake_relu import last_relu, raising_relu
from stir.store import ResultStore


def dead_net() -> nn.Module:
    """conv-relu-linear-relu read after the last ReLU: 57% of the target units of noise_images are dead,
    and from an N(0, 1) seed many units positive in m(x) start dead in m(x')."""
    with torch.random.fork_rng():
        torch.manual_seed(1)
        return nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 16),
                             nn.ReLU()).eval()


def seeds_of(x: torch.Tensor) -> torch.Tensor:
    return torch.randn(x.shape, generator=torch.Generator().manual_seed(5))


def test_plateau_adam_halves_the_rate_of_a_stalled_example_only_and_keeps_its_bounds():
    geometry = PlateauAdam(lr=0.5, patience=2)
    x, state = geometry.init(torch.full((2, 3), 0.5), None)
    for _ in range(3):  # example 0 stalls (the same loss), example 1 improves every step
        x = geometry.step(x, torch.ones(2, 3), x, state, torch.arange(2), loss=torch.tensor([1.0, 1.0 - _ * 0.1]))
    assert state["lr"].tolist() == [0.25, 0.5] and (x >= 0).all()
    free = PlateauAdam(lr=5.0, bounds=None)
    z, s = free.init(torch.zeros(1, 2), None)
    assert free.step(z, torch.ones(1, 2), z, s, torch.arange(1), loss=torch.ones(1)).min() < -1  # not clamped
    with pytest.raises(ValueError, match="must pass loss"):
        geometry.step(x, torch.ones(2, 3), x, state, torch.arange(2))


def test_the_raising_relu_passes_a_dead_units_gradient_only_upwards_and_restores_the_model():
    m = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    with torch.no_grad():
        m[0].weight.copy_(torch.eye(2)); m[0].bias.zero_()
    x = torch.tensor([[-1.0, -1.0]], requires_grad=True)  # both units dead
    assert last_relu(m, x.detach()) == "1"
    with raising_relu(m, ["1"]):
        y = m(x)
        (g,) = torch.autograd.grad((y * torch.tensor([[-1.0, 1.0]])).sum(), x)  # unit 0 wanted up, unit 1 down
    assert torch.equal(y, torch.zeros(1, 2)) and g.tolist() == [[-1.0, 0.0]]
    (g,) = torch.autograd.grad((m(x) * torch.tensor([[-1.0, 1.0]])).sum(), x)
    assert g.tolist() == [[0.0, 0.0]] and not m[1]._forward_hooks  # the true ReLU again


def test_the_solver_reaches_its_target_where_dead_units_stop_the_true_gradient():
    m, x = dead_net(), noise_images(8)
    true = solve_iri(m, "logits", x, seeds_of(x), IRIConfig(steps=400, surrogate="off", smooth_share=0, retries=0))  # r1's true gradient
    raising = solve_iri(m, "logits", x, seeds_of(x), IRIConfig(steps=400, smooth_share=0, retries=0))  # the default descent
    assert true.residual.median() > 0.05  # dead units that should be alive never get a gradient
    assert (raising.residual <= 0.005).all() and (raising.x_prime >= 0).all() and (raising.x_prime <= 1).all()
    assert raising.evaluations == int((raising.steps + 1).sum()) and (raising.steps < 400).all()  # stopped at the target
    with pytest.raises(ValueError, match="iri.reparam"):
        IRIConfig(reparam="tanh")


def test_stir_at_iris_leaves_out_what_did_not_reach_the_level_and_is_stored_under_its_own_kind(tmp_path):
    m, x = dead_net(), noise_images(8)
    store = ResultStore(tmp_path)
    r = stir_at_iris(m, m, x, "logits", cfg=IRIConfig(steps=400, surrogate="raising"), k=2, store=store)
    assert r.reached == [8, 8] and r.unreached == [[], []] and r.value == pytest.approx(1.0, abs=1e-3)  # m2 = m1
    assert list((tmp_path / AT_IRIS).glob("*.json")) and AtIRIsResult.from_dict(r.to_dict()).values == r.values
    short = stir_at_iris(m, m, x, "logits", cfg=IRIConfig(steps=3, target=1e-4), k=1)
    assert short.reached == [0] and len(short.unreached[0]) == 8 and short.notes and short.value != short.value  # NaN


def test_inversion_mode_iri_runs_the_solver_through_the_engine_with_its_own_key(tmp_path):
    from stir.inversion import ExecutionConfig, InversionConfig, invert

    m, x = dead_net(), noise_images(6)
    cfg = InversionConfig(mode="iri", steps=400, record_steps=(50,), surrogate="raising")
    r = invert(m, x, "logits", cfg, run=ExecutionConfig(warn_below=0.0, cache_dir=str(tmp_path)))
    assert (r.residual <= 0.005 + 1e-6).all() and (r.steps < 400).all() and sorted(r.snapshots) == [50, 400]
    assert (r.x_prime > 0).all() and (r.x_prime < 1).all()  # x = sigmoid(z): no pixel on the box's boundary
    key = cfg.key_settings(False, "32")
    assert key["mode"] == "iri" and key["target"] == 0.005 and "step_size" not in key and "decay_steps" not in key
    published = InversionConfig().key_settings(False, "32")
    assert not {"target", "patience", "reparam", "surrogate", "smooth_share", "smooth_beta"} & set(published)  # the published key is unchanged
    with pytest.raises(ValueError, match="iri.reparam"):
        InversionConfig(mode="iri", reparam="tanh")


def test_softplus_relus_soften_every_relu_at_the_sharpness_read_at_each_call_and_restore_the_model():
    from stir.models.fake_relu import softplus_relus

    m = nn.Sequential(nn.Linear(2, 2), nn.ReLU(inplace=True), nn.Linear(2, 2), nn.ReLU())
    x = torch.tensor([[0.3, -0.2]])
    exact = m(x)
    beta = [1.0]
    with softplus_relus(m, lambda: beta[0]):
        soft = m(x)
        beta[0] = 1e4
        sharp = m(x)
    assert not torch.allclose(soft, exact) and torch.allclose(sharp, exact, atol=1e-3)
    assert m[1].inplace and not m[1]._forward_hooks and not m[3]._forward_hooks and torch.equal(m(x), exact)


def test_the_smoothing_phase_spends_its_steps_first_and_counts_them():
    m, x = dead_net(), noise_images(6)
    cfg = IRIConfig(steps=400, smooth_share=0.25, retries=0)
    sol = solve_iri(m, "logits", x, seeds_of(x), cfg)
    assert (sol.steps >= 100).all() and sol.history.shape[0] == 300 + 1  # the history after the smoothing phase
    assert sol.evaluations == 100 * 6 + int((sol.steps - 100 + 1).sum())  # no final evaluation in the smoothing phase
    assert (sol.residual <= 0.005).all()
    with pytest.raises(ValueError, match="smooth_share"):
        IRIConfig(smooth_share=1.0)


def test_inversion_mode_iri_with_a_smoothing_phase_keeps_its_snapshots_and_history_rows(tmp_path):
    from stir.inversion import ExecutionConfig, InversionConfig, invert

    m, x = dead_net(), noise_images(4)
    cfg = InversionConfig(mode="iri", steps=300, smooth_share=1 / 3, record_steps=(50, 150))
    r = invert(m, x, "logits", cfg, run=ExecutionConfig(warn_below=0.0, cache_dir=str(tmp_path)))
    assert sorted(r.snapshots) == [50, 150, 300] and (r.steps >= 100).all() and (r.residual <= 0.005 + 1e-6).all()
    assert cfg.key_settings(False, "32")["smooth_share"] == 1 / 3
    assert "smooth_target" not in cfg.key_settings(False, "32")  # fixed: the key as before the field existed
    tracked = InversionConfig(mode="iri", steps=300, smooth_share=1 / 3, smooth_target="tracked")
    assert tracked.key_settings(False, "32")["smooth_target"] == "tracked"
    assert tracked.iri_config().smooth_target == "tracked"  # the engine runs the same descend_iri as solve_iri
    assert "smooth_share" not in InversionConfig().key_settings(False, "32")  # the published key is unchanged


def test_stir_at_iris_shares_a_references_x_prime_across_targets_and_has_a_nested_jackknife_interval():
    from stir.measure import at_iris as module

    m, x = dead_net(), noise_images(8)
    other = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 12), nn.ReLU()).eval()
    module._SOLVED.clear()
    cfg = IRIConfig(steps=200, smooth_share=0)
    first = stir_at_iris(m, other, x, "logits", "logits", cfg=cfg, k=2)
    assert len(module._SOLVED) == 2  # one solution per draw
    second = stir_at_iris(m, dead_net(), x, "logits", cfg=cfg, k=2)
    assert len(module._SOLVED) == 2 and second.evaluations == first.evaluations  # the same X', not solved again
    low, high = first.interval
    assert 0 < first.se < 1 and low < first.value < high
    nothing = module.nested_jackknife_se("linear_cka", torch.randn(6, 3), [torch.randn(6, 3)], [torch.zeros(6, dtype=torch.bool)])
    assert nothing != nothing  # no image reached the level: no interval (NaN), not a zero-width one


def test_tracked_targets_follow_the_smoothed_network_and_end_at_the_network_itself():
    """The smoothing phase with smooth_target=tracked rebuilds its objective from the smoothed network's
    own m1_beta(x) each time beta has grown by _RETARGET (so x' = x solves every smoothed problem, a
    homotopy), the last targets within softplus(1000)'s distance of m1(x); fixed builds it once."""
    from stir.inversion.iri import _RETARGET, SHARP, smoothing_phase
    from stir.inversion.objectives import Forward, InversionObjective, make_term

    m, x = dead_net(), noise_images(3)
    exact = m(x).detach()
    targets = []

    def make_objective():
        term = make_term(m, "logits", x, Forward())
        targets.append(term.target)
        return InversionObjective(term, Forward())

    # beta grows by SHARP / 4 over the phase: about log(250) / log(_RETARGET) = 25 retargets (fewer on a
    # short phase, whose steps overshoot each factor), after the one build before the phase
    most = 2 + int(torch.log(torch.tensor(SHARP / 4.0)) / torch.log(torch.tensor(_RETARGET)))
    for kind, (least, calls) in (("tracked", (15, most)), ("fixed", (1, 1))):
        targets.clear()
        cfg = IRIConfig(steps=200, smooth_share=0.5, smooth_target=kind)
        z, spent = smoothing_phase(make_objective(), m, torch.logit(x.clamp(1e-3, 1 - 1e-3)), cfg, make_objective)
        assert spent == 100 * 3 and least <= len(targets) <= calls, (kind, len(targets))
        if kind == "tracked":
            assert (targets[1] - exact).abs().max() > 0.05  # beta 4: softplus lifts every unit
            assert (targets[-1] - exact).abs().max() < 2e-3  # beta near SHARP
            assert all((a - b).abs().max() > 0 for a, b in zip(targets[1:], targets[2:]))
        else:
            assert torch.equal(targets[0], exact)
    assert torch.equal(m(x), exact)  # the network is itself again


def test_the_solver_key_leaves_out_a_field_at_the_value_it_had_before_it_existed():
    import dataclasses

    old = IRIConfig(smooth_target="fixed", seed_map="clamp", retries=0)  # the solver before the three fields
    before = {k: v for k, v in dataclasses.asdict(old).items() if k not in ("smooth_target", "seed_map", "retries")}
    assert old.key() == before  # STIR at IRIs stored before the fields: still served
    assert IRIConfig().key()["retries"] == 2 and IRIConfig(retries=0).key().get("retries") is None
    assert IRIConfig(smooth_target="tracked").key()["smooth_target"] == "tracked"  # another solver: its own key
    assert IRIConfig().key()["seed_map"] == "logistic"  # the default start since issue 53: its own key
    with pytest.raises(ValueError, match="smooth_target"):
        IRIConfig(smooth_target="moving")
    with pytest.raises(ValueError, match="iri.seed_map must be one of"):
        IRIConfig(seed_map="uniform")
    with pytest.raises(ValueError, match="iri.retries must lie in"):
        IRIConfig(retries=-1)


def test_the_reports_read_at_iris_with_the_solver_of_the_shipped_readings():
    """Every stored reading of zoo/store was solved by the solver's defaults (the logistic start, retries from
    fresh draws); the reports' solver is that one, so they are served on a fresh clone."""
    import json
    from pathlib import Path
    from types import SimpleNamespace

    from stir.experiments import at_iris_table
    from stir.inversion.config import KEYED_SINCE

    solver = at_iris_table.solver(SimpleNamespace(at_iris_steps=3000, at_iris_level=0.02))
    shipped = [json.loads(f.read_text()) for f in (Path(__file__).parents[2] / "zoo/store" / AT_IRIS).glob("*.json")]

    def keyed(recorded: dict) -> dict:  # a recorded solver (every field) as its key reads it
        return {k: v for k, v in recorded.items() if KEYED_SINCE.get(k, object()) != v}

    assert shipped and all(keyed(r["result"]["solver"]) == json.loads(json.dumps(solver.key())) for r in shipped)
    assert solver == IRIConfig(steps=3000, target=0.02)  # the solver's defaults, but for its steps and level


def test_a_draw_that_fails_is_retried_from_a_fresh_draw_worst_first_within_the_budget():
    """Two seeds sit deep on the box's faces (z = +-60: sigmoid's gradient about e^-60, so Adam cannot move
    them) and fail their try; their retries from redraw(1) reach the target and are kept, the others keep
    their first try, and the evaluations never exceed a single try's most per image."""
    from stir.inversion.seeds import make_seed, retry_generator, seed_generator

    m, x = dead_net(), noise_images(6)
    seeds = seeds_of(x)
    seeds[:2] = 60 * seeds[:2].sign()
    draws = []

    def redraw(a: int) -> torch.Tensor:
        draws.append(a)
        return make_seed("normal", x, retry_generator(0, a))

    cfg = IRIConfig(steps=300, smooth_share=0)
    sol = solve_iri(m, "logits", x, seeds, cfg, redraw=redraw)
    alone = solve_iri(m, "logits", x, seeds, IRIConfig(steps=300, smooth_share=0, retries=0))
    assert (alone.residual[:2] > 0.05).all() and (alone.residual[2:] <= 0.005).all()  # the faces' seeds fail
    assert (sol.residual <= 0.005).all() and sol.tries.tolist() == [1, 1, 0, 0, 0, 0] and draws == [1]
    assert torch.equal(sol.x_prime[2:], alone.x_prime[2:])  # the first try is the solver without retries
    assert sol.evaluations > alone.evaluations and sol.evaluations <= (cfg.steps + 1) * 6
    assert (sol.steps[:2] > alone.steps[:2]).all()  # the retries' steps counted
    spent = solve_iri(m, "logits", x, seeds, IRIConfig(steps=300, smooth_share=0, target=1e-9), redraw=redraw)
    assert spent.tries.eq(0).all() and draws == [1]  # every image spent its try: no room for another
    with pytest.raises(ValueError, match="needs redraw"):
        solve_iri(m, "logits", x, seeds, cfg)
    own = [make_seed("normal", x, seed_generator(j)) for j in range(8)]  # draws 0-7's own seeds
    streams = [make_seed("normal", x, retry_generator(s, a)) for s in range(4) for a in (1, 2)]
    assert not any(torch.equal(r, d) for r in streams for d in own)  # s + 2**32 would fail: 32 bits of a seed are kept
    assert not any(torch.equal(streams[i], streams[j]) for i in range(8) for j in range(i))
    with pytest.raises(ValueError, match="counts from 1"):
        retry_generator(0, 0)


def test_the_engine_solver_has_no_retries_one_path_per_image():
    from stir.inversion import InversionConfig

    cfg = InversionConfig(mode="iri")
    assert cfg.iri_config().retries == 0 and "retries" not in cfg.key_settings(False, "32")


def test_the_logistic_seed_map_starts_off_the_box_faces_where_the_clamp_puts_most_pixels():
    from stir.inversion.iri import image_map

    seeds = torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    z, to_image, bounds = image_map(seeds, "sigmoid", "logistic")
    assert torch.equal(z, seeds) and bounds is None and torch.allclose(to_image(z), torch.sigmoid(seeds))
    on_faces = lambda x: float(((x <= 1e-3) | (x >= 1 - 1e-3)).float().mean())
    assert on_faces(to_image(z)) < 0.01
    z, to_image, _ = image_map(seeds, "sigmoid", "clamp")
    assert 0.6 < on_faces(to_image(z)) < 0.72  # an N(0, 1) draw: 50% below 0, 16% above 1
    x, _, bounds = image_map(seeds, "box", "logistic")
    assert bounds == (0.0, 1.0) and torch.allclose(x, torch.sigmoid(seeds))


def test_the_at_iris_interval_is_the_corrected_jackknife_between_half_and_all_of_the_plain_one():
    from stir.measure.at_iris import nested_jackknife_se
    from stir.measure.jackknife import jackknife_se, leave_one_out
    from stir.similarity import linear_cka

    g = torch.Generator().manual_seed(3)
    rep_x = torch.randn(30, 6, generator=g, dtype=torch.float64)
    primes = [rep_x + torch.randn(30, 6, generator=g, dtype=torch.float64) for _ in range(2)]
    reached = [torch.rand(30, generator=g) < 0.8 for _ in range(2)]
    plain = jackknife_se(torch.tensor([
        sum(float(linear_cka(rep_x[r[ok[r]]], p[r[ok[r]]])) for p, ok in zip(primes, reached)) / 2
        for r in leave_one_out(30)], dtype=torch.float64))
    se = nested_jackknife_se("linear_cka", rep_x, primes, reached)
    assert plain / 2 ** 0.5 - 1e-12 <= se <= plain + 1e-12 and se < plain  # this statistic has interactions
