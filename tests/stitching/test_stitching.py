"""Model stitching (stir.stitching): exactness at the identity, recovery of a G_ReLU symmetry, a
negative control, frozen models left untouched, the results store, and clear errors."""
import pytest
import torch

from stir.models.identity import content_identity
from stir.models.taps import read_taps, run_from
from stir.stitching import (
    ChannelStats, GReLUStitch, StitchResult, StitchSettings, Stitched, accuracy, build_layer, data_identity, initialise,
    stitch, stitch_parts, stitch_seeds,
)
from stir.store import ResultStore
from stitchtest_utils import TinyNet, permuted_scaled_copy, separable_data, trained

NO_TRAINING = StitchSettings(epochs=0, init="identity")


@pytest.fixture(scope="module")
def data():
    return separable_data(256, seed=1), separable_data(128, seed=2)


@pytest.fixture(scope="module")
def net(data):
    return trained(0, data[0])


def test_tiny_models_learn_the_task(net, data):
    assert accuracy(net, *data[1], 64) > 0.9


def test_run_from_with_the_taps_own_output_gives_the_models_logits(net, data):
    x = data[1][0][:16]
    with torch.no_grad():
        for tap in ("block1", "block2"):
            assert torch.equal(run_from(net, x, tap, read_taps(net, x, [tap])[tap]), net(x))


@pytest.mark.parametrize("kind", ["identity", "g_relu"])
@pytest.mark.parametrize("tap", ["block1", "block2"])
def test_a_model_stitched_to_itself_at_the_identity_keeps_its_accuracy_exactly(net, data, kind, tap):
    layer = build_layer(kind, (6, 8, 8) if tap == "block1" else (6, 4, 4), (6, 8, 8) if tap == "block1" else (6, 4, 4))
    initialise(layer, None, "identity")
    x = data[1][0]
    with torch.no_grad():
        assert torch.equal(Stitched(net, tap, layer, net, tap)(x), net(x))  # bit for bit
    result = stitch(net, net, tap, tap, kind, data[0], data[1], settings=NO_TRAINING)
    assert result.acc_stitched == result.acc_b == accuracy(net, *data[1], 64) and result.gap == 0


def test_g_relu_matching_on_a_model_and_itself_finds_the_identity(net, data):
    result = stitch(net, net, "block1", "block1", "g_relu", data[0], data[1], settings=StitchSettings(epochs=0))
    assert result.perm == list(range(6))
    assert result.scales == pytest.approx([1.0] * 6, rel=1e-6)
    assert result.acc_stitched == result.acc_b


def test_g_relu_recovers_a_known_permutation_and_scaling(net, data):
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    scale = torch.tensor([0.5, 2.0, 1.5, 3.0, 0.25, 1.2])
    other = permuted_scaled_copy(net, perm, scale)
    x = data[1][0]
    with torch.no_grad():
        assert torch.allclose(other(x), net(x), atol=1e-5)  # the same function
        z = read_taps(net, x, ["block1"])["block1"]
        assert ((z != z[:1]).flatten(2).any(2).any(0)).all()  # every channel alive: matching is defined
    result = stitch(net, other, "block1", "block1", "g_relu", data[0], data[1], settings=StitchSettings(epochs=0))
    assert result.perm == perm.tolist()
    assert result.scales == pytest.approx(scale.tolist(), rel=1e-4)
    assert result.acc_stitched == result.acc_b == accuracy(net, *data[1], 64)
    # Training the scales from there keeps the accuracy (the optimum is already reached).
    trained_scales = stitch(net, other, "block1", "block1", "g_relu", data[0], data[1],
                            settings=StitchSettings(epochs=2, lr=1e-3))
    assert trained_scales.perm == perm.tolist() and trained_scales.acc_stitched >= result.acc_b - 0.02


def test_linear_stitching_of_unrelated_random_nets_is_far_below_trained_models(net, data):
    settings = StitchSettings(epochs=1, batch_size=64)
    good = stitch(net, trained(1, data[0]), "block1", "block1", "linear", data[0], data[1], settings=settings)
    random = stitch(TinyNet(seed=7), TinyNet(seed=8), "block1", "block1", "linear", data[0], data[1], settings=settings)
    assert good.acc_b > 0.9 and good.acc_stitched > 0.85
    assert random.acc_stitched < good.acc_stitched - 0.4


def state(model):
    return (content_identity(model), [m.training for m in model.modules()], [p.requires_grad for p in model.parameters()])


@pytest.mark.parametrize("kind", ["linear", "g_relu", "orthogonal"])
def test_frozen_models_weights_modes_and_batch_norm_statistics_are_unchanged(net, data, kind):
    other = trained(1, data[0])
    net.train()  # a model handed over in train mode must come back in train mode, statistics untouched
    try:
        before = state(net), state(other)
        result = stitch(net, other, "block1", "block1", kind, data[0], data[1], settings=StitchSettings(epochs=1))
        assert (state(net), state(other)) == before
        assert result.losses and result.n_train == 256
    finally:
        net.eval()


def test_results_are_stored_keyed_by_everything_and_reused(net, data, tmp_path):
    other = trained(1, data[0])
    store = ResultStore(tmp_path)
    settings = StitchSettings(epochs=1, train_images=128)
    ids = (content_identity(net), content_identity(other))
    identity = data_identity(*data)

    def stored(a, b, tap, kind, seed, settings, ids=ids):
        return store.cached("stitching", stitch_parts(ids, (tap, tap), kind, seed, settings, identity),
                            lambda: stitch(a, b, tap, tap, kind, data[0], data[1], seed=seed, settings=settings),
                            StitchResult.from_dict)

    first = stored(net, other, "block2", "g_relu", 0, settings)
    files = {p: p.stat().st_mtime_ns for p in (tmp_path / "stitching").glob("*.json")}
    assert len(files) == 1
    # Resume: seed 0 is read back, only seed 1 is computed.
    both = [stored(net, other, "block2", "g_relu", seed, settings) for seed in (0, 1)]
    assert both[0] == first and store.hits == 1
    assert all(p.stat().st_mtime_ns == t for p, t in files.items())
    # Every key part makes a new entry: direction (models swapped), tap, layer kind, seed, settings.
    stored(other, net, "block2", "g_relu", 0, settings, ids=ids[::-1])
    stored(net, other, "block1", "g_relu", 0, settings)
    stored(net, other, "block2", "linear", 0, settings)
    stored(net, other, "block2", "g_relu", 0, StitchSettings(epochs=2, train_images=128))
    assert len(list((tmp_path / "stitching").glob("*.json"))) == 6
    assert store.hits == 1 and store.misses == 6
    # Different seeds fit S on different training subsets: the spread over seeds is real.
    assert both[0].losses != both[1].losses
    # stitch_seeds is the loop over seeds (identity, which fits nothing, once).
    assert len(stitch_seeds(net, other, "block2", "block2", "identity", data[0], data[1], seeds=[0, 1])) == 1


def test_identity_is_fitted_once_whatever_the_seeds(net, data):
    assert len(stitch_seeds(net, net, "block1", "block1", "identity", data[0], data[1], seeds=[0, 1, 2])) == 1


def test_bad_input_gets_a_clear_error(net, data):
    with pytest.raises(ValueError, match=r"spatial sizes must agree"):
        stitch(net, net, "block1", "block2", "linear", data[0], data[1])
    with pytest.raises(ValueError, match=r"unknown stitching layer 'affine'; choose one of \['identity', 'linear', 'g_relu', 'orthogonal'\]"):
        stitch(net, net, "block1", "block1", "affine", data[0], data[1])
    with pytest.raises(ValueError, match=r"stitchable taps: \['block1', 'block2'\]"):
        stitch(net, net, "logits", "logits", "linear", data[0], data[1])
    with pytest.raises(ValueError, match=r"needs equal channel counts.*'linear' bridges"):
        build_layer("g_relu", (6, 8, 8), (4, 8, 8))
    with pytest.raises(ValueError, match=r"unknown stitching init 'zeros'; choose one of \['match', 'identity'\]"):
        stitch(net, net, "block1", "block1", "linear", data[0], data[1], settings=StitchSettings(init="zeros"))
    with pytest.raises(ValueError, match="not a permutation"):
        GReLUStitch(3).set_permutation([0, 0, 1])


def test_channel_statistics_accumulate_every_batch_and_a_constant_channel_correlates_zero():
    g = torch.Generator().manual_seed(0)
    za, zb = torch.rand(10, 3, 4, 4, generator=g), torch.rand(10, 2, 4, 4, generator=g)
    za[:, 1] = 0.5  # a constant (dead) channel: no direction, correlation 0 rather than NaN
    whole, halves = ChannelStats(), ChannelStats()
    whole.update(za, zb)
    halves.update(za[:3], zb[:3])
    halves.update(za[3:], zb[3:])
    for x, y in zip(whole.compute(), halves.compute()):
        assert torch.allclose(torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64))
    corr = whole.correlation()
    assert corr.shape == (3, 2) and torch.isfinite(corr).all() and (corr[1] == 0).all()
    flat = ChannelStats()
    flat.update(za.movedim(1, -1).reshape(-1, 3), zb.movedim(1, -1).reshape(-1, 2))  # vectors: (b, c)
    assert torch.allclose(flat.correlation(), corr)
