"""Issue 30, a model's identity is what it computes: the same weights under another forward are another
model (their own results on one shared store, each equal to a fresh run's), the identity is stable
across processes, ``pairs.csv`` ids follow the order asked for, and a model that cannot be measured
says why in one line (exit 2) before any work, through the real evaluate.py."""
import copy
import csv
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from conftest import REPO, refused, run_entry_point
from faultkit import eval_args
from stir.models.identity import code_identity, content_identity, state_dict_identity

P = "python:untrusted_nets:"
HERE = Path(__file__).resolve().parent


def args(out: Path, data_root: Path, ref: str, target: str, *extra: str) -> list:
    return eval_args(out, f"data.root={data_root}", "data.download=false", "data.holdout_size=40",
                     f"ref={P}{ref}", f"target={P}{target}", *extra)


def pair_row(out: Path, ref: str, target: str) -> dict:
    (row,) = csv.DictReader(open(out / f"pair_{ref}_vs_{target}" / "pairs.csv"))
    return row


VALUES = ("stir_m2_given_m1", "stir_m1_given_m2", "similarity")


# ------------------------------------------------------------------ the identity itself
def test_the_same_weights_under_another_forward_are_another_model():
    import untrusted_nets as nets

    relu, tanh, drop, cut = nets.relu_net(), nets.tanh_net(), nets.dropout_net(), nets.detach_net()
    assert state_dict_identity(relu.state_dict()) == state_dict_identity(tanh.state_dict())
    ids = {content_identity(m) for m in (relu, tanh, drop, cut)}
    assert len(ids) == 4
    assert content_identity(nets.relu_net()) == content_identity(relu)  # the same code and weights: one model


def test_settings_held_functions_and_hooks_are_part_of_the_code():
    base = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
    strided = copy.deepcopy(base)
    strided[0].stride = (2, 2)  # no state dict holds a stride
    assert content_identity(strided) != content_identity(base)
    leaky = nn.Sequential(nn.Conv2d(3, 4, 3), nn.LeakyReLU(0.1))
    leakier = copy.deepcopy(leaky)
    leakier[1].negative_slope = 0.2  # in its extra_repr
    assert content_identity(leaky) != content_identity(leakier)
    counting = copy.deepcopy(base)
    counting.forwards = 7  # a plain attribute that changes as the model runs: not content
    assert content_identity(counting) == content_identity(base)

    class Act(nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, x):
            return self.fn(x)

    assert code_identity(Act(torch.relu)) != code_identity(Act(torch.tanh))
    hooked = copy.deepcopy(base)
    hooked.register_forward_hook(lambda m, i, o: o.detach())
    assert content_identity(hooked) != content_identity(base)
    base.train()
    assert content_identity(base.eval()) == content_identity(base)  # a mode is not content


def test_a_backward_hook_is_part_of_the_code():
    """Issue 54: a backward hook changes the gradients an inversion descends, not one forward output,
    so the behaviour probe cannot see it; a hooked model got the unhooked model's cached X'. Module
    backward hooks (full and pre) and torch's global backward hooks are now in the static identity;
    without any, the identity is what it was."""
    base = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
    before = content_identity(base)
    scaled = copy.deepcopy(base)
    handle = scaled[0].register_full_backward_hook(lambda m, gin, gout: tuple(g * 0.5 if g is not None else g
                                                                             for g in gin))
    assert content_identity(scaled) != before
    handle.remove()
    assert content_identity(scaled) == before
    pre = copy.deepcopy(base)
    pre[1].register_full_backward_pre_hook(lambda m, gout: tuple(g.clamp(-1, 1) for g in gout))
    assert content_identity(pre) not in (before, content_identity(scaled))
    handle = nn.modules.module.register_module_full_backward_hook(lambda m, gin, gout: None)
    try:
        assert content_identity(base) != before
    finally:
        handle.remove()
    assert content_identity(base) == before


def _identity_in_subprocess() -> str:
    code = "import untrusted_nets as n; from stir.models.identity import content_identity as c; print(c(n.tanh_net()))"
    env = {"PYTHONPATH": f"{REPO}:{HERE}", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def test_the_identity_is_stable_across_processes():
    import untrusted_nets as nets

    assert _identity_in_subprocess() == content_identity(nets.tanh_net())


def test_a_python_factory_identity_covers_its_module_source(tmp_path, monkeypatch):
    from stir.models.sources import SourceOptions, load

    for text in ("SCALE = 1.0\n", "SCALE = 2.0\n"):  # what the factory reads from its module, not a setting
        (tmp_path / f"factory_{len(text)}_{text[-4]}.py").write_text(
            f"import torch\nfrom torch import nn\n{text}"
            "def make():\n    torch.manual_seed(0)\n    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    a, b = sorted(p.stem for p in tmp_path.glob("factory_*.py"))
    ma, mb = load(f"python:{a}:make", SourceOptions()), load(f"python:{b}:make", SourceOptions())
    assert state_dict_identity(ma.module.state_dict()) == state_dict_identity(mb.module.state_dict())
    assert ma.identity != mb.identity and ma.record["code_sha256"] != mb.record["code_sha256"]


# ------------------------------------------------------------------ one shared store, through evaluate.py
@pytest.fixture(scope="module")
def shared(tmp_path_factory, cifar10_root):
    """One store that saw relu_net vs tanh_net, then the swapped pair, then relu_net with itself."""
    out = tmp_path_factory.mktemp("shared")
    mp = pytest.MonkeyPatch()
    try:
        for ref, target in (("relu_net", "tanh_net"), ("tanh_net", "relu_net"), ("relu_net", "relu_net")):
            run_entry_point("evaluate", args(out, cifar10_root, ref, target), mp)
    finally:
        mp.undo()
    return out


@pytest.mark.parametrize("ref,target", [("tanh_net", "relu_net"), ("relu_net", "relu_net")])
def test_each_pair_on_a_shared_store_gives_its_fresh_value(shared, ref, target, cifar10_root, tmp_path, monkeypatch):
    run_entry_point("evaluate", args(tmp_path / "fresh", cifar10_root, ref, target), monkeypatch)
    fresh, stored = pair_row(tmp_path / "fresh", ref, target), pair_row(shared, ref, target)
    assert {k: stored[k] for k in VALUES} == {k: fresh[k] for k in VALUES}


def test_relu_and_tanh_are_two_models_on_the_shared_store(shared):
    row = pair_row(shared, "relu_net", "tanh_net")
    assert row["ref_id"] != row["target_id"]
    assert row["stir_m2_given_m1"] != row["stir_m1_given_m2"]  # were equal: one identity, one stored direction
    self_pair = pair_row(shared, "relu_net", "relu_net")
    assert float(self_pair["similarity"]) == 1.0 and float(self_pair["similarity"]) != float(row["similarity"])


def test_pairs_csv_ids_follow_the_order_asked_for_after_a_swap(shared):
    first, swapped = pair_row(shared, "relu_net", "tanh_net"), pair_row(shared, "tanh_net", "relu_net")
    assert (swapped["ref_id"], swapped["target_id"]) == (first["target_id"], first["ref_id"])
    assert swapped["similarity"] == first["similarity"]  # the symmetric measure is stored once


# ------------------------------------------------------------------ a model that cannot be measured
@pytest.mark.parametrize("net,extra,said", [
    ("dropout_net", (), "'dropout_net' is not deterministic in eval mode"),
    ("detach_net", (), "'detach_net' cuts autograd in the forward of DetachNet"),
    ("no_grad_net", (), "'no_grad_net' cuts autograd at module 'net.conv' (Conv2d)"),
    ("size_assert_net", (), "cannot take a (2, 3, 32, 32) batch of images in [0, 1] (AssertionError: expects 64x64"),
    ("scalar_tap_net", ("tap_target=total",), "tap 'penultimate' of ScalarTapNet gave a tensor of shape () for a batch of"),
])
def test_a_model_that_cannot_be_measured_says_why_in_one_line_before_any_work(net, extra, said, cifar10_root,
                                                                              tmp_path, monkeypatch, capsys):
    message = refused("evaluate", args(tmp_path / "out", cifar10_root, "relu_net", net, *extra), monkeypatch, capsys)
    assert said in message
    assert not list((tmp_path / "out").glob("store/direction/*.json"))  # nothing measured before the refusal


def test_the_gradient_probe_in_the_inversion_itself(tmp_path):
    """Any path to an inversion (matrix, layers, a library call) meets the probe before any step."""
    import untrusted_nets as nets
    from stir.inversion import InversionConfig, invert
    from stir.models.probe import UnmeasurableModel
    from stir.models.sources.base import SourcedModel

    model = SourcedModel(nets.detach_net()).eval()
    model.set_taps({"penultimate": "head:input"})
    with pytest.raises(UnmeasurableModel, match="cuts autograd in the forward of DetachNet"):
        invert(model, torch.rand(2, 3, 32, 32), "penultimate", InversionConfig(steps=2))


@pytest.mark.parametrize("call", ["similarity", "pair"])
def test_a_stored_symmetric_similarity_read_the_other_way_round_names_the_ids_in_the_order_asked(call, tmp_path):
    """Two models of different weights: the similarity stored for (a, b) read back for (b, a) carries
    b's identity as ref_id (it kept (a, b)'s ids, only the names were swapped)."""
    import untrusted_nets as nets
    from stir.inversion import InversionConfig
    from stir.measure import Estimator, evaluate_pair, evaluate_similarity
    from stir.models.sources.base import SourcedModel
    from stir.store import ResultStore

    a, b = SourcedModel(nets.relu_net()).eval(), SourcedModel(nets.relu_net()).eval()
    with torch.no_grad():
        b.net.head.bias += 1.0
    for m in (a, b):
        m.set_taps({"penultimate": "head:input"})
    images, store = torch.rand(6, 3, 32, 32, generator=torch.Generator().manual_seed(0)), ResultStore(tmp_path)
    ids = {m: content_identity(m) for m in (a, b)}
    assert ids[a] != ids[b]
    for m1, m2 in ((a, b), (b, a)):
        if call == "similarity":
            s = evaluate_similarity(m1, m2, images, "penultimate", names=("m1", "m2"), store=store)
        else:
            s = evaluate_pair(m1, m2, images, "penultimate", estimator=Estimator(k=1, iri="arbitrary", inversion=InversionConfig(steps=2)),
                              names=("m1", "m2"), store=store, directions=("m2|m1",)).similarity
        assert (s.ref_id, s.target_id) == (ids[m1], ids[m2])
    assert store.hits >= 1


@pytest.mark.parametrize("extra,said", [
    (["inversion.tolerance=-1"], "inversion.tolerance must be > 0"),
    (["inversion.tolerance=0"], "inversion.tolerance must be > 0"),
    (["inversion.tolerance=nan"], "inversion.tolerance must be a finite number"),
    (["inversion.step_size=inf"], "inversion.step_size must be a finite number"),
    (["inversion.steps=1000000000"], "residual record of"),
])
def test_inversion_settings_that_cannot_work_are_one_line_before_any_model_loads(extra, said, cifar10_root, tmp_path,
                                                                                 monkeypatch, capsys):
    message = refused("evaluate", [*args(tmp_path / "out", cifar10_root, "relu_net", "tanh_net"), *extra],
                      monkeypatch, capsys)
    assert said in message and not (tmp_path / "out" / "store").exists()


def test_the_budget_check_in_the_inversion_itself():
    from stir.inversion import InversionConfig

    with pytest.raises(ValueError, match="lower inversion.steps"):
        InversionConfig(steps=10**12).check_budget(8)
    InversionConfig().check_budget(10_000)  # the published budget on 10k images: 40 MB


def test_an_allocation_that_fails_is_one_line_with_the_key_to_change(cifar10_root, tmp_path, monkeypatch, capsys):
    """What a batch too large for the machine ends in (the CPU allocator's own words), as one line."""
    import stir.inversion.engine as engine

    def no_memory(*a, **k):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you "
                           "tried to allocate 34359738368 bytes.")

    monkeypatch.setattr(engine, "solve", no_memory)
    message = refused("evaluate", args(tmp_path / "out", cifar10_root, "relu_net", "tanh_net"), monkeypatch, capsys)
    assert message.startswith("out of memory (") and "lower execution.batch_size" in message
