"""Model sources: torchvision / python factories / RobustBench strings -> [0, 1] models with taps,
identities and records; NAME:input and function taps; the errors that name the fix. No network."""
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import source_nets
from source_nets import RB_NAME, robustbench_or_skip, write_robustbench_weights
from stir.models import representation, representations, tap_names
from stir.models.sources import RobustBenchOptions, SourceError, SourceOptions, content_identity, load, names

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent


def test_torchvision_resnet_penultimate_is_the_pooled_vector_and_inputs_are_normalised():
    torch.manual_seed(0)
    m = load("torchvision:resnet18", SourceOptions(num_classes=10))
    assert m.taps["penultimate"] == "fc:input"
    net = m.module.net
    x = torch.rand(3, 3, 32, 32)
    # torchvision's own preprocessing metadata, not CIFAR's constants: the model takes [0, 1] images.
    assert m.record["normalization"] == {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}
    z = (x - torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)) / torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    with torch.no_grad():
        pooled = torch.flatten(net.avgpool(net.layer4(net.layer3(net.layer2(net.layer1(net.maxpool(net.relu(net.bn1(net.conv1(z))))))))), 1)
        reps = representations(m.module, x, ["penultimate", "layer4.1", "logits"])
        assert torch.allclose(reps["penultimate"], pooled, atol=1e-5)
        assert torch.allclose(reps["logits"], net(z), atol=1e-5) and reps["logits"].shape == (3, 10)
        assert reps["layer4.1"].shape == (3, 512 * 1 * 1)
    assert "penultimate" in tap_names(m.module) and "layer4.1" in tap_names(m.module)


def test_functional_penultimate_is_found_by_a_pre_hook_and_gradients_flow():
    m = load("python:source_nets:functional_head", SourceOptions(kwargs={"width": 5}))
    assert m.taps["penultimate"] == "head:input" and m.record["normalization"] is None
    x = torch.rand(4, 3, 32, 32, requires_grad=True)
    rep = representation(m.module, x, "penultimate")
    assert torch.allclose(rep, m.module.net.body(x).mean(dim=(2, 3)))
    rep.sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_a_function_tap_reads_what_no_module_outputs_and_its_absence_lists_candidates():
    with pytest.raises(ValueError, match=r"cannot find the penultimate.*candidates.*body"):
        load("python:source_nets:no_linear")
    m = load("python:source_nets:no_linear", SourceOptions(tap="python:source_nets:no_linear_penultimate"))
    x = torch.rand(2, 3, 16, 16)
    assert torch.equal(representation(m.module, x, "penultimate"), m.module.net.body(x).amax(dim=(2, 3)))
    explicit = load("python:source_nets:functional_head", SourceOptions(tap="body.4"))
    assert representation(explicit.module, x, "penultimate").shape == (2, 12 * 8 * 8)


def _identity_in_subprocess(weights: Path) -> str:
    code = ("from stir.models.sources import load, SourceOptions;"
            f"print(load('python:source_nets:functional_head', SourceOptions(weights={str(weights)!r})).identity)")
    env = {"PYTHONPATH": f"{REPO}:{TESTS}", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def test_identity_is_the_weights_not_the_process_or_the_class_path(tmp_path):
    torch.manual_seed(1)
    a = source_nets.FunctionalHead()
    torch.save(a.state_dict(), tmp_path / "a.pt")
    torch.save(source_nets.FunctionalHead().state_dict(), tmp_path / "b.pt")
    ident_a = load("python:source_nets:functional_head", SourceOptions(weights=str(tmp_path / "a.pt"))).identity
    assert _identity_in_subprocess(tmp_path / "a.pt") == ident_a  # same weights, another process
    assert load("python:source_nets:functional_head", SourceOptions(weights=str(tmp_path / "b.pt"))).identity != ident_a
    # The same network class under another module path: the same identity (one content hash).
    moved = type("FunctionalHead", (source_nets.FunctionalHead,), {"__module__": "somewhere.else"})()
    moved.load_state_dict(a.state_dict())
    from stir.models.sources.base import SourcedModel

    x, y = SourcedModel(a), SourcedModel(moved)
    assert content_identity(x) == content_identity(y) and content_identity(a) == content_identity(moved)
    # What `penultimate` reads is part of the identity: results at another layer get another key.
    other_tap = load("python:source_nets:functional_head", SourceOptions(weights=str(tmp_path / "a.pt"), tap="body.2"))
    assert other_tap.identity != ident_a


def test_a_weights_file_is_loaded_strictly(tmp_path):
    torch.save({"state_dict": {"module." + k: v for k, v in source_nets.FunctionalHead().state_dict().items()}},
               tmp_path / "dp.pt")
    load("python:source_nets:functional_head", SourceOptions(weights=str(tmp_path / "dp.pt")))  # DataParallel prefixes
    with pytest.raises(SourceError, match=r"do not fit the architecture"):
        load("python:source_nets:functional_head", SourceOptions(weights=str(tmp_path / "dp.pt"), kwargs={"width": 3}))
    with pytest.raises(SourceError, match=r"no weights file at .*nothere.pt"):
        load("python:source_nets:functional_head", SourceOptions(weights=str(tmp_path / "nothere.pt")))


def test_plain_modules_read_module_inputs():
    net = nn.Sequential(nn.Flatten(), nn.Linear(12, 5), nn.ReLU(), nn.Linear(5, 2))
    x = torch.rand(3, 3, 2, 2)
    reps = representations(net, x, ["3:input", "1"])
    assert torch.equal(reps["3:input"], torch.relu(reps["1"]))
    with pytest.raises(ValueError, match=r"unknown tap '9:input'.*valid taps: \['0', '1', '2', '3', 'logits'\]"):
        representation(net, x, "9:input")


@pytest.mark.parametrize(
    "spec, options, message",
    [
        ("keras:resnet50", SourceOptions(), r"unknown model source 'keras'.*sources: \['zoo', .*'torchvision'.*\]"),
        ("torchvision:resnet7", SourceOptions(), r"unknown torchvision architecture 'resnet7'.*list_models"),
        ("torchvision:resnet18", SourceOptions(weights="IMAGENET1K_V9"), r"neither a file nor a tag.*IMAGENET1K_V1"),
        ("python:source_nets:feature_maps", SourceOptions(), r"must return \(n, classes\) logits.*returned \(2, 4, 32, 32\)"),
        ("python:source_nets:logits_and_features", SourceOptions(), r"must return \(n, classes\) logits.*returned tuple"),
        ("python:source_nets:nothing", SourceOptions(), r"module 'source_nets' has no 'nothing'"),
        ("python:source_nets", SourceOptions(), r"must be written module.path:name"),
        ("python:source_nets:functional_head", SourceOptions(tap="nosuch"), r"unknown tap 'nosuch'.*valid taps: .*'body.0'"),
    ],
)
def test_bad_sources_get_errors_that_name_the_fix(spec, options, message):
    with pytest.raises(ValueError, match=message):
        load(spec, options)


def test_torchvision_pretrained_tag_without_download_names_the_cache_path_and_the_flag(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))  # an empty hub cache
    with pytest.raises(SourceError, match=rf"not on disk \(looked in {tmp_path}/hub/checkpoints/resnet18-.*download_weights=true"):
        load("torchvision:resnet18", SourceOptions(weights="IMAGENET1K_V1"))


def test_timm_without_the_extra_names_it():
    try:
        import timm  # noqa: F401
    except ImportError:
        with pytest.raises(SourceError, match=r'pip install -e "\.\[timm\]"'):
            load("timm:resnet18")
    else:
        m = load("timm:resnet18", SourceOptions(num_classes=10))
        assert m.taps["penultimate"].endswith(":input") and m.record["normalization"] is not None


def test_sources_are_listed():
    assert names()[0] == "zoo" and {"robustbench", "torchvision", "timm", "python", "realnet"} <= set(names())


# Every registered source (the registry lists itself: a new source's module is picked up here).
@pytest.mark.parametrize("prefix", names()[1:])
def test_every_registered_source_is_named_in_errors_and_refuses_an_empty_name(prefix):
    from stir.models.sources import SOURCES, is_sourced

    assert is_sourced(f"{prefix}:x") and callable(SOURCES.get(prefix))
    with pytest.raises(SourceError, match=rf"'{prefix}:' names no model after '{prefix}:'"):
        load(f"{prefix}:")
    with pytest.raises(SourceError, match=rf"unknown model source 'nosuch'.*'{prefix}'"):
        load("nosuch:x")


# ------------------------------------------------------------------------------------------------
# RobustBench (optional extra): its own model definitions and loader, weights in its layout.

def test_robustbench_model_loads_from_its_layout_with_its_penultimate(tmp_path):
    file = write_robustbench_weights(tmp_path)
    m = load(f"robustbench:{RB_NAME}", SourceOptions(robustbench=RobustBenchOptions(model_dir=str(tmp_path))))
    assert m.taps["penultimate"] == "linear:input" and m.record["weights"] == [str(file)]
    assert m.record["normalization"] is None  # RobustBench models take [0, 1] images
    saved = torch.load(file, weights_only=True)["state_dict"]
    assert torch.equal(m.module.net.state_dict()["linear.weight"], saved["linear.weight"])
    assert representation(m.module, torch.rand(2, 3, 32, 32), "penultimate").shape == (2, 512)


def test_robustbench_errors_name_the_list_command_the_path_and_the_flag(tmp_path):
    robustbench_or_skip()
    opts = SourceOptions(robustbench=RobustBenchOptions(model_dir=str(tmp_path)))
    with pytest.raises(SourceError, match=r"unknown RobustBench model 'Nope2099' for cifar10/L2; list the names with .*model_dicts"):
        load("robustbench:Nope2099", opts)
    with pytest.raises(SourceError, match=rf"no weights at {tmp_path}/cifar10/L2/{RB_NAME}.pt .*download_weights=true"):
        load(f"robustbench:{RB_NAME}", opts)


def test_any_module_becomes_a_model_with_from_module():
    from stir.models.sources import from_module

    net = source_nets.FunctionalHead(width=3)
    m = from_module(net, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    x = torch.rand(2, 3, 8, 8)
    assert m.module.net is net and m.taps["penultimate"] == "head:input"
    assert torch.allclose(m.module(x), net((x - 0.5) / 0.25))
    assert m.identity != from_module(source_nets.FunctionalHead(width=3)).identity


def test_a_torchscript_model_is_refused_with_the_reason():
    """A ScriptModule refuses forward hooks: its taps cannot be read, and loading it says why in one line."""
    import warnings

    from stir.models.sources import from_module

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit.script is deprecated
        net = torch.jit.script(nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 8), nn.ReLU(), nn.Linear(8, 2)))
    with pytest.raises(ValueError, match=r"penultimate layer cannot be found: module '\(the model itself\)' .*"
                                         r"TorchScript \(torch.jit.ScriptModule\), which refuses forward hooks"):
        from_module(net)
    with pytest.raises(ValueError, match=r"tap 'penultimate': module 'net.2' of SourcedModel is TorchScript .* refuses forward hooks"):
        from_module(net, tap="net.2")
    eager = from_module(nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 8), nn.ReLU(), nn.Linear(8, 2)))
    with pytest.raises(ValueError, match=r"tap '1': module '1' .* TorchScript"):
        representation(torch.jit.script(eager.module.net), torch.rand(2, 3, 32, 32), "1")


def _registries_hook():
    """docs/hooks/registries.py, loaded from its file (the site's hook: it reads the sources without torch)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("registries_hook", REPO / "docs/hooks/registries.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    return hook


def test_the_docs_sources_table_reads_every_registered_source():
    """docs/models.md's sources table (docs/hooks/registries.py, read from the source) lists the registry's
    sources, one row each after the zoo's, and the page has no other sources table (issue 68)."""
    from stir.models.sources import SOURCES

    hook = _registries_hook()
    read = {e["prefix"]: e["module"] for e in hook.sources()}
    assert ["zoo", *sorted(read)] == names()
    assert all(f"stir.models.sources.{read[p]}" == SOURCES.get(p).__module__ for p in read)
    page = (REPO / "docs" / "models.md").read_text()
    assert hook.MARKERS["sources"] in page and page.count("| source |") == 0  # the generated table only
    rows = hook.on_page_markdown(hook.MARKERS["sources"]).strip().splitlines()
    assert rows[0].startswith("| source | what it loads | normalisation | weights |") and len(rows) == 2 + len(names())
    assert rows[2].startswith("| `zoo:NAME`, `NAME`, `PATH` |")


@pytest.fixture(scope="module")
def evaluate_help() -> str:
    """What ``python evaluate.py --help`` prints (its own process: the entry point as a user runs it)."""
    done = subprocess.run([sys.executable, "evaluate.py", "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.parametrize("prefix", names()[1:])
def test_every_registered_source_is_in_evaluate_help_and_the_docs_table(prefix, evaluate_help):
    """Issue 68: --help's SOURCE:NAME line and docs/models.md's sources table are built from the
    registrations, so a new source (tests/test_adding_things.py adds one in 2 files) is in both: in
    --help as its module's docstring writes its names (``python:module.path:factory``), in the table with
    its module's LOADS, NORMALISATION and WEIGHTS, read without torch as the module has them."""
    import importlib

    from stir.config.model_names import source_usages
    from stir.models.sources import SOURCES

    module = importlib.import_module(SOURCES.get(prefix).__module__)
    usage = source_usages()[prefix]
    assert usage.startswith(f"{prefix}:") and f"``{usage}``" in module.__doc__.strip().splitlines()[0]
    paragraph = " ".join(evaluate_help.split("Any other model:", 1)[1].split("\n\n", 1)[0].split())
    listed = re.search(r"SOURCE:NAME \(([^;]*);", paragraph).group(1).split(", ")
    assert usage in listed and [u.split(":", 1)[0] for u in listed] == names()[1:], listed
    columns = {k: getattr(module, k, None) for k in ("LOADS", "NORMALISATION", "WEIGHTS")}
    assert all(isinstance(v, str) and v for v in columns.values()), \
        f"{module.__name__} declares no LOADS/NORMALISATION/WEIGHTS strings for docs/models.md's table: {columns}"
    hook = _registries_hook()
    read = next(e for e in hook.sources() if e["prefix"] == prefix)
    assert {k: read[k] for k in columns} == columns
    row = next(r for r in hook.sources_table().splitlines() if r.startswith(f"| `{usage}` |"))
    assert all(v.replace("|", "\\|") in row for v in columns.values()) and f"`{module.__name__}`" in row


def test_a_library_builders_arguments_are_in_the_identity(tmp_path):
    """Issue 54: torchvision:/timm: kwargs were in no identity, so a builder argument that changes what
    the network computes without changing its weights or module tree shared the plain model's results.
    The same weights file with and without an argument: two identities; no argument: as before."""
    from stir.models.identity import content_identity

    torch.manual_seed(0)
    plain = load("torchvision:resnet18", SourceOptions(num_classes=10))
    weights = tmp_path / "r18.pt"
    torch.save(plain.module.net.state_dict(), weights)
    again = load("torchvision:resnet18", SourceOptions(num_classes=10, weights=str(weights)))
    argued = load("torchvision:resnet18", SourceOptions(num_classes=10, weights=str(weights),
                                                        kwargs={"zero_init_residual": True}))
    assert content_identity(again.module) == content_identity(plain.module)  # no argument: the identity as before
    assert content_identity(argued.module) != content_identity(again.module)
    assert "zero_init_residual" in argued.module.origin
