"""Real networks: He et al.'s CIFAR ResNets and the alpha-beta-CROWN nets as registered architectures,
their weight files (plain and original-release format, strict loading, one-line errors), the
catalogue of shared/realnets and the ``realnet:`` source.

Fast tests build the architectures and load state dicts they write themselves. Slow tests load
every shared file (skipped when the folder is absent), check its sha256 and its accuracy on the
first 100 test images of every class of the JPEG copy (the measured figures are logged:
``pytest -m slow tests/models/test_realnets.py --log-cli-level=INFO``).
"""
import logging
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from stir.config.schema import ModelConfig
from stir.models import build, names, representation, representations, tap_names
from stir.models import realnets
from stir.models.cifar_resnet import PadShortcut
from stir.models.fold import InferenceCopy, conv_bn_pairs
from stir.models.sources import SourceError, SourceOptions, content_identity, load
from stir.models.synthetic import with_trained_batch_norms
from stir.models.truncate import TapForward
from stir.models.weights import WeightsError, WeightsMismatch, load_weights, read_weights

log = logging.getLogger(__name__)
MEAN, STD = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)


def _net(arch, width, seed=0):
    torch.manual_seed(seed)
    net = build(ModelConfig(arch, width), 10, MEAN, STD)
    with_trained_batch_norms(net, seed, affine=True)
    return net.eval()


# ------------------------------------------------------------------------------------------------
# Architectures: parameter names and counts of the releases, forward = a functional re-derivation.

@pytest.mark.parametrize("depth, params", [(20, 0.27), (32, 0.46), (44, 0.66), (56, 0.85)])
def test_cifar_resnets_have_the_papers_depth_and_parameter_count(depth, params):
    net = build(ModelConfig(f"cifar_resnet{depth}", 16), 10, MEAN, STD)
    n = (depth - 2) // 6
    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) + 1 == depth  # 6n + 1 convolutions and one linear layer; option A has no conv
    assert round(sum(p.numel() for p in net.parameters()) / 1e6, 2) == params  # He et al.'s table (0.27M ...)
    assert [t.name for t in net.taps] == ["stem", *[f"layer{i}.{j}" for i in (1, 2, 3) for j in range(n)],
                                          "penultimate", "logits"]
    assert net.tap("penultimate").channels == 64 and net.tap("layer3.0").stride == 4
    assert net.fake_relu_sites == tuple(f"layer3.{j}.relu_out" for j in range(n))


def test_parameter_names_are_those_of_the_releases():
    keys = {k for k in build(ModelConfig("cifar_resnet20", 16), 10, MEAN, STD).state_dict() if not k.startswith("normalize.")}
    bn = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")
    expected = {"conv1.weight", *(f"bn1.{p}" for p in bn), "linear.weight", "linear.bias"}
    for i in (1, 2, 3):
        for j in range(3):
            b = f"layer{i}.{j}"
            expected |= {f"{b}.conv1.weight", f"{b}.conv2.weight", *(f"{b}.bn{k}.{p}" for k in (1, 2) for p in bn)}
    assert keys == expected
    cnn = {k for k in build(ModelConfig("cnn_a", 16), 10, MEAN, STD).state_dict() if not k.startswith("normalize.")}
    assert cnn == {f"{i}.{p}" for i in (0, 2, 5, 7) for p in ("weight", "bias")}
    r4 = build(ModelConfig("resnet4b", 16), 10, MEAN, STD).state_dict()
    assert r4["layer2.0.shortcut.0.weight"].shape == (32, 32, 1, 1) and r4["linear1.weight"].shape == (100, 512)
    assert "layer1.1.shortcut.0.weight" not in r4
    assert build(ModelConfig("resnet2b", 8), 10, MEAN, STD).state_dict()["linear1.weight"].shape == (100, 1024)


def test_option_a_shortcut_subsamples_and_pads_with_zero_channels():
    x = torch.randn(2, 4, 8, 8)
    out = PadShortcut(4, 8, 2)(x)
    assert out.shape == (2, 8, 4, 4)
    assert torch.equal(out[:, 2:6], x[:, :, ::2, ::2])
    assert not out[:, :2].any() and not out[:, 6:].any()
    with pytest.raises(ValueError, match="even"):
        PadShortcut(4, 7, 2)
    with pytest.raises(ValueError, match=r"even model.width.*got 5"):
        build(ModelConfig("cifar_resnet20", 5), 10, MEAN, STD)


def _bn(x, s, p):
    return F.batch_norm(x, s[f"{p}.running_mean"], s[f"{p}.running_var"], s[f"{p}.weight"], s[f"{p}.bias"], False,
                        0.0, 1e-5)


def _reference_cifar_resnet(s, x, n):
    """He et al.'s forward written out from the state dict alone (no module of the project)."""
    out = F.relu(_bn(F.conv2d(x, s["conv1.weight"], padding=1), s, "bn1"))
    for i in (1, 2, 3):
        for j in range(n):
            b, stride = f"layer{i}.{j}", 2 if i > 1 and j == 0 else 1
            y = F.relu(_bn(F.conv2d(out, s[f"{b}.conv1.weight"], stride=stride, padding=1), s, f"{b}.bn1"))
            y = _bn(F.conv2d(y, s[f"{b}.conv2.weight"], padding=1), s, f"{b}.bn2")
            short = out
            if stride == 2:
                pad = (y.shape[1] - out.shape[1]) // 2
                short = F.pad(out[:, :, ::2, ::2], (0, 0, 0, 0, pad, pad))
            out = F.relu(y + short)
    return F.linear(out.mean(dim=(2, 3)), s["linear.weight"], s["linear.bias"])


def _reference_resnet_b(s, x, stages):
    out = F.relu(F.conv2d(x, s["conv1.weight"], s["conv1.bias"], stride=2, padding=1))
    for i in range(1, stages + 1):
        for j, stride in ((0, 2), (1, 1)):
            b = f"layer{i}.{j}"
            y = F.relu(F.conv2d(out, s[f"{b}.conv1.weight"], s[f"{b}.conv1.bias"], stride=stride, padding=1))
            y = F.conv2d(y, s[f"{b}.conv2.weight"], s[f"{b}.conv2.bias"], padding=1)
            short = (F.conv2d(out, s[f"{b}.shortcut.0.weight"], s[f"{b}.shortcut.0.bias"], stride=stride)
                     if f"{b}.shortcut.0.weight" in s else out)
            out = F.relu(y + short)
    hidden = F.relu(F.linear(out.flatten(1), s["linear1.weight"], s["linear1.bias"]))
    return F.linear(hidden, s["linear2.weight"], s["linear2.bias"]), hidden


def _reference_cnn_a(s, x):
    out = F.relu(F.conv2d(x, s["0.weight"], s["0.bias"], stride=2, padding=1))
    out = F.relu(F.conv2d(out, s["2.weight"], s["2.bias"], stride=2, padding=1))
    hidden = F.relu(F.linear(out.flatten(1), s["5.weight"], s["5.bias"]))
    return F.linear(hidden, s["7.weight"], s["7.bias"]), hidden


@pytest.mark.parametrize("arch, width", [("cifar_resnet20", 4), ("cifar_resnet32", 2), ("resnet2b", 4),
                                         ("resnet4b", 4), ("cnn_a", 4)])
def test_forward_equals_the_architecture_written_out(arch, width):
    net = _net(arch, width)
    s = net.state_dict()
    x = torch.rand(3, 3, 32, 32)
    z = (x - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)  # normalisation inside
    with torch.no_grad():
        if arch.startswith("cifar_resnet"):
            logits, hidden = _reference_cifar_resnet(s, z, (int(arch[len("cifar_resnet"):]) - 2) // 6), None
        elif arch == "cnn_a":
            logits, hidden = _reference_cnn_a(s, z)
        else:
            logits, hidden = _reference_resnet_b(s, z, 1 if arch == "resnet2b" else 2)
        reps = representations(net, x, ["penultimate", "logits"])
    assert torch.allclose(reps["logits"], logits, atol=1e-5)
    if hidden is not None:  # the penultimate tap is the post-ReLU 100-d vector
        assert torch.allclose(reps["penultimate"], hidden, atol=1e-5) and reps["penultimate"].shape == (3, 100)


def test_penultimate_relu_and_inner_taps_of_the_verification_nets():
    net = _net("resnet4b", 4)
    x = torch.rand(4, 3, 32, 32)
    reps = representations(net, x, ["linear1", "penultimate", "layer2.1.sum", "layer2.1"])
    assert torch.equal(reps["penultimate"], reps["linear1"].clamp(min=0))
    assert torch.equal(reps["layer2.1"], reps["layer2.1.sum"].clamp(min=0))
    assert net.fake_relu_sites == ("linear1_relu",) and _net("cnn_a", 4).fake_relu_sites == ("6",)
    assert "linear1" in tap_names(net) and "linear1" not in [t.name for t in net.taps]


def test_batch_norm_folds_and_the_network_cuts_through_option_a_shortcuts():
    net = _net("cifar_resnet20", 4)
    x = torch.rand(3, 3, 32, 32)
    assert len(conv_bn_pairs(net)) == 19  # the stem and both convolutions of 9 blocks
    copy = InferenceCopy(net).module
    with torch.no_grad():
        assert torch.allclose(copy(x), net(x), atol=1e-4)
        for arch, tap in (("cifar_resnet20", "layer2.0"), ("resnet2b", "penultimate"), ("cnn_a", "penultimate")):
            m = _net(arch, 4)
            assert torch.equal(representation(TapForward(m, tap), x, tap), representation(m, x, tap))


def test_every_catalogued_architecture_is_registered_with_the_published_width():
    for name in realnets.names():
        e = realnets.entry(name)
        assert e.arch in names()
        net = realnets.build(name)
        assert torch.allclose(net.normalize.mean.flatten(), torch.tensor(e.mean))
        assert torch.allclose(net.normalize.std.flatten(), torch.tensor(e.std))
    assert realnets.entry("resnet20-akamaster").mean == (0.485, 0.456, 0.406)  # their script: ImageNet's constants
    assert realnets.entry("resnet4b-abcrown").std == (0.2471, 0.2435, 0.2616)
    assert realnets.entry("cnn_a_mix-abcrown").mean == pytest.approx((0.491373, 0.482353, 0.446667), abs=1e-6)
    assert realnets.build("resnet2b-abcrown").linear1.in_features == 1024
    assert realnets.build("cnn_a_adv-abcrown").get_submodule("5").in_features == 2048


# ------------------------------------------------------------------------------------------------
# Weight files: both formats, strict, one-line errors.

def _write_both_formats(tmp_path, net):
    state = net.state_dict()
    plain = {k: v for k, v in state.items() if not k.startswith("normalize.")}  # as the shared files
    torch.save(plain, tmp_path / "plain.pt")
    torch.save({"state_dict": {"module." + k: v for k, v in plain.items()}, "best_prec1": 91.73},
               tmp_path / "release.th")
    return tmp_path / "plain.pt", tmp_path / "release.th"


def test_plain_and_original_release_files_load_to_the_same_network(tmp_path):
    src = _net("cifar_resnet20", 16, seed=1)
    plain, release = _write_both_formats(tmp_path, src)
    x = torch.rand(2, 3, 32, 32)
    for file, fmt, prefix in ((plain, "state_dict", ""), (release, "checkpoint", "module.")):
        dst = build(ModelConfig("cifar_resnet20", 16), 10, MEAN, STD).eval()
        info = load_weights(dst, file, arch="cifar_resnet20 (width 16)")
        assert (info.format, info.prefix_removed) == (fmt, prefix)
        with torch.no_grad():
            assert torch.equal(dst(x), src(x))
        assert torch.equal(dst.normalize.mean, src.normalize.mean)  # the file has none: the network's stays
    assert read_weights(release)[1].metadata == {"best_prec1": 91.73}


def test_a_mismatch_is_one_line_naming_the_file_the_architecture_and_the_first_key(tmp_path):
    plain, _ = _write_both_formats(tmp_path, _net("cifar_resnet20", 8))
    dst = build(ModelConfig("cifar_resnet20", 16), 10, MEAN, STD)
    with pytest.raises(WeightsMismatch) as err:
        load_weights(dst, plain, arch="cifar_resnet20 (width 16)")
    msg = str(err.value)
    assert "\n" not in msg and str(plain) in msg and "cifar_resnet20 (width 16)" in msg
    assert "first mismatch: key 'conv1.weight' has shape (8, 3, 3, 3) in the file but (16, 3, 3, 3)" in msg
    assert "of another shape in all" in msg
    deeper, _ = _write_both_formats(tmp_path, _net("cifar_resnet32", 16))
    with pytest.raises(WeightsMismatch, match=r"key 'layer1.3.conv1.weight' is in the file but not in the network"):
        load_weights(dst, deeper, arch="cifar_resnet20 (width 16)")
    state = {k: v for k, v in _net("cifar_resnet20", 16).state_dict().items() if k != "layer2.1.bn2.running_var"}
    torch.save(state, tmp_path / "short.pt")
    with pytest.raises(WeightsMismatch, match=r"key 'layer2.1.bn2.running_var' is missing from the file \(1 missing"):
        load_weights(dst, tmp_path / "short.pt", arch="x")


def test_files_of_old_torch_without_batch_norm_counters_load(tmp_path):
    # The original CIFAR ResNet release was saved by PyTorch < 0.4.1: no num_batches_tracked entries.
    src = _net("cifar_resnet20", 4, seed=3)
    state = {"module." + k: v for k, v in src.state_dict().items()
             if not k.endswith("num_batches_tracked") and not k.startswith("normalize.")}
    torch.save({"state_dict": state, "best_prec1": 91.78}, tmp_path / "old.th")
    dst = build(ModelConfig("cifar_resnet20", 4), 10, MEAN, STD).eval()
    load_weights(dst, tmp_path / "old.th", arch="cifar_resnet20 (width 4)")
    x = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(dst(x), src(x))


def test_unreadable_files_say_what_they_hold(tmp_path):
    torch.save({"weights": [1, 2]}, tmp_path / "odd.pt")
    with pytest.raises(WeightsError, match=r"odd.pt holds no state dict of tensors \(found list\)"):
        read_weights(tmp_path / "odd.pt")
    with pytest.raises(WeightsError, match="no weights file at .*absent.pt"):
        read_weights(tmp_path / "absent.pt")


# ------------------------------------------------------------------------------------------------
# The catalogue, its folder, the realnet: source.

def test_catalogue_relations_and_published_figures():
    assert len(realnets.names()) == 11 and all(realnets.entry(n).file == f"{n}.pt" for n in realnets.names())
    twins = {n: realnets.entry(n).seed_twin for n in realnets.names() if realnets.entry(n).seed_twin}
    assert twins == {"resnet20-akamaster": "resnet20-zheng", "resnet20-zheng": "resnet20-akamaster",
                     "resnet56-akamaster": "resnet56-zheng", "resnet56-zheng": "resnet56-akamaster"}
    assert realnets.family("cnn_a_adv-abcrown") == ["cnn_a_adv-abcrown", "cnn_a_adv_alt-abcrown", "cnn_a_mix-abcrown"]
    r20 = realnets.entry("resnet20-akamaster.pt")
    assert (r20.accuracy_jpeg, r20.accuracy_published, r20.licence) == (0.810, 0.917, "BSD-2-Clause")
    assert realnets.entry("resnet4b-abcrown").robust_accuracy["pgd_l2_0.25"] == 0.62
    with pytest.raises(realnets.RealNetError, match=r"unknown real network 'resnet21'.*resnet20-akamaster"):
        realnets.entry("resnet21")


def test_weights_root_argument_then_environment_then_the_shared_copy(tmp_path, monkeypatch):
    monkeypatch.delenv(realnets.ENV_VAR, raising=False)
    assert realnets.weights_root(str(tmp_path)) == tmp_path
    monkeypatch.setenv(realnets.ENV_VAR, str(tmp_path / "env"))
    with pytest.raises(realnets.RealNetError) as err:
        realnets.weights_root()
    msg = str(err.value)
    assert "\n" not in msg and f"no real-network weights folder at {tmp_path / 'env'} ($STIR_REALNETS)" in msg
    assert "zoo.weights_root=PATH" in msg and "STIR_REALNETS=PATH" in msg
    monkeypatch.delenv(realnets.ENV_VAR)
    assert realnets.DEFAULT_ROOT == Path(realnets.__file__).resolve().parents[2].parent / "shared" / "realnets"
    with pytest.raises(realnets.RealNetError, match=r"resnet20-akamaster.pt is not in the real-network weights folder"):
        realnets.weights_file("resnet20-akamaster", str(tmp_path))


def test_a_file_that_is_not_the_catalogued_one_is_refused_by_its_hash(tmp_path):
    plain, _ = _write_both_formats(tmp_path, _net("cifar_resnet20", 16))
    plain.rename(tmp_path / "resnet20-akamaster.pt")
    with pytest.raises(SourceError, match=r"has sha256 [0-9a-f]{64}, not the catalogue's 5776cdf6"):
        load("realnet:resnet20-akamaster", SourceOptions(weights_root=str(tmp_path)))


def test_realnet_source_returns_the_registered_network_with_every_tap(tmp_path):
    src = _net("cifar_resnet20", 16, seed=2)
    _, release = _write_both_formats(tmp_path, src)
    m = load("realnet:resnet20-akamaster", SourceOptions(weights=str(release), weights_root=str(tmp_path / "none")))
    net = m.module
    assert type(net).__name__ == "CifarResNet" and not net.training
    assert m.taps == {"penultimate": "pool", "logits": "linear"} and m.identity == content_identity(net)
    assert m.record["weights_format"] == "checkpoint" and m.record["weights_checked"] is False
    assert m.record["normalization"] == {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}
    assert m.record["fake_relu_published"]["sites"] == []  # the original code fakes nothing in networks from elsewhere
    assert m.record["fake_relu_architecture"]["sites"] == ["layer3.0.relu_out", "layer3.1.relu_out", "layer3.2.relu_out"]
    assert m.record["seed_twin"] == "resnet20-zheng" and m.record["licence"] == "BSD-2-Clause"
    x = torch.rand(2, 3, 32, 32)
    reps = representations(net, x, tap_names(net))
    assert reps["penultimate"].shape == (2, 64) and reps["layer3.2.sum"].shape == (2, 64 * 8 * 8)
    z = (x - torch.tensor((0.485, 0.456, 0.406)).view(1, 3, 1, 1)) / torch.tensor((0.229, 0.224, 0.225)).view(1, 3, 1, 1)
    with torch.no_grad():  # the catalogue's normalisation, not the one the file was written with
        assert torch.allclose(net(x), _reference_cifar_resnet(src.state_dict(), z, 3), atol=1e-5)
    other = load("realnet:resnet20-akamaster", SourceOptions(weights=str(release), mean=MEAN, std=STD))
    assert other.identity != m.identity and other.record["normalization_from"] == "options"


@pytest.mark.parametrize("options, message", [
    (SourceOptions(tap="layer3.2"), r"unsupported option.*tap='layer3.2'.*layers.taps"),
    (SourceOptions(num_classes=100), r"num_classes=100"),
    (SourceOptions(normalize=False), r"normalize=false"),
    (SourceOptions(mean=(0.5, 0.5, 0.5)), r"both mean and std"),
])
def test_realnet_source_refuses_options_that_change_the_network(options, message):
    with pytest.raises(SourceError, match=message):
        load("realnet:resnet20-akamaster", options)


# ------------------------------------------------------------------------------------------------
# Slow: every shared file (skipped when the shared folder is absent).

def _shared_root():
    try:
        return realnets.weights_root()
    except realnets.RealNetError as err:
        pytest.skip(str(err))


def test_catalogue_hashes_are_those_of_sha256sums():
    sums = _shared_root() / "SHA256SUMS"
    if not sums.is_file():
        pytest.skip(f"{sums} absent")
    listed = {line.split()[1]: line.split()[0] for line in sums.read_text().splitlines() if line.strip()}
    assert listed == {realnets.entry(n).file: realnets.entry(n).sha256 for n in realnets.names()}


@pytest.fixture(scope="module")
def jpeg_test_images(request, tmp_path_factory):
    """The first 100 test images of every class of the JPEG copy (1,000), via stir.data, decoded once
    into pytest's cache folder (a temporary one with -p no:cacheprovider)."""
    from stir.config.schema import DataConfig
    from stir.data import load_dataset, to_float

    source = realnets.REPO.parent / "shared" / "data" / "cifar10-jpg.tar.gz"
    if not source.is_file():
        pytest.skip(f"{source} absent")
    cache = getattr(request.config, "cache", None)
    root = cache.mkdir("stir-data") if cache is not None else tmp_path_factory.mktemp("stir-data")
    data = load_dataset(DataConfig(source=str(source), root=str(root), download=False))
    idx = torch.cat([torch.nonzero(data.test_labels == c).flatten()[:100] for c in range(10)])  # files 0000-0099
    return to_float(data.test_images[idx]), data.test_labels[idx]


@pytest.mark.slow
@pytest.mark.parametrize("name", realnets.names())
def test_every_shared_file_loads_with_its_hash_and_its_accuracy(name, jpeg_test_images, tmp_path):
    root = _shared_root()
    entry = realnets.entry(name)
    assert realnets.file_hash(name) == entry.sha256
    m = load(f"realnet:{name}", SourceOptions(weights_root=str(root)))
    x, y = jpeg_test_images
    with torch.no_grad():
        pred = torch.cat([m.module(x[i:i + 250]).argmax(1) for i in range(0, len(x), 250)])
    accuracy = float((pred == y).float().mean())
    log.info("%s: accuracy %.3f on the first 1,000 (README, all 10,000: %.3f)", name, accuracy, entry.accuracy_jpeg)
    assert abs(accuracy - entry.accuracy_jpeg) < 0.04
    # The original release's format of the same weights gives the same network.
    state, _ = read_weights(root / entry.file)
    torch.save({"state_dict": {"module." + k: v for k, v in state.items()}, "best_prec1": 0.0}, tmp_path / "orig.th")
    again = load(f"realnet:{name}", SourceOptions(weights=str(tmp_path / "orig.th")))
    assert again.identity == m.identity
