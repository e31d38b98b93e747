"""Issue 67, items 2 and 3: the behaviour probe reads what the run computes. An impostor honest on the
four synthetic probe images and otherwise on the run's natural images, one whose rows after the fourth
or whose batches above four images compute otherwise, a backward hook whose closure, global or state
flips the gradient, a custom autograd backward: each was served the honest model's stored results; each
is now measured again (every value equal to a fresh store's) or refused in one line. A results folder
whose fingerprints are deleted or damaged is refused, not taken for a fresh start."""
from pathlib import Path

import pytest
import torch
from torch import nn

import behaviour_nets as nets
from conftest import refused, run_entry_point
from faultkit import eval_args
from stir.inversion import ExecutionConfig, InversionConfig
from stir.measure import CalibrationConfig, Estimator, evaluate_pair
from stir.models.behaviour import BatchCoupledError, UncheckedResults
from stir.models.identity import content_identity
from stir.models.sources.base import SourcedModel
from stir.store import ResultStore

EST = Estimator(k=1, iri="arbitrary", inversion=InversionConfig(mode="fast", steps=5, lr=0.05, seed=0),
                calibration=CalibrationConfig(permutations=2, resamples=10))
QUIET = ExecutionConfig(warn_below=0.0)


def natural_images(n: int = 8) -> torch.Tensor:
    """(n, 3, 32, 32) in [0, 1] with correlated colour channels (a grey picture, a little colour noise)."""
    g = torch.Generator().manual_seed(5)
    grey = torch.nn.functional.interpolate(torch.rand(n, 1, 8, 8, generator=g), size=(32, 32), mode="bilinear")
    return (grey + 0.05 * torch.rand(n, 3, 32, 32, generator=g)).clamp(0, 1)


def tapped(net: nn.Module) -> nn.Module:
    model = SourcedModel(net).eval()
    model.set_taps({"penultimate": "head:input"})
    return model


def stir_of(store, m1, m2, run=QUIET, n: int = 8) -> list:
    result = evaluate_pair(m1, m2, natural_images(n), "penultimate", "penultimate", EST, run=run, store=store,
                           names=("a", "b"))
    return [result.get(d).stir.values for d in ("m2|m1", "m1|m2")] + [result.similarity.value]


@pytest.fixture
def partner():
    return tapped(nets.relu_tanh_partner())


def honest_then_impostor(tmp_path, monkeypatch, model, partner, turn):
    """The pair measured honestly on a store, then after ``turn()`` (what the static identity cannot
    see): (honest values, values on the same store, values on a fresh store)."""
    monkeypatch.setattr(nets, "IMPOSTOR", False)
    store = ResultStore(tmp_path / "store")
    static = content_identity(model)
    honest = stir_of(store, model, partner)
    turn()
    assert content_identity(model) == static
    return honest, stir_of(store, model, partner), stir_of(ResultStore(tmp_path / "fresh"), model, partner)


def test_an_impostor_on_natural_images_is_measured_again(tmp_path, monkeypatch, partner):
    """Honest on the probe batch (no image of it is natural), tanh on the run's images: it was served the
    honest 0.689 / 0.510 where it computes 0.440 / 0.577 (issue 67)."""
    x = natural_images()
    assert nets.natural(x).all() and not nets.natural(torch.cat([x[:0], torch.rand(4, 3, 32, 32)])).any()
    honest, same, fresh = honest_then_impostor(tmp_path, monkeypatch, tapped(nets.natural_trigger_net()), partner,
                                               lambda: monkeypatch.setattr(nets, "IMPOSTOR", True))
    assert same != honest and same == fresh


@pytest.mark.parametrize("net,above", [(nets.RowTriggerNet, None), (nets.BigBatchNet, 4), (nets.BigBatchNet, 6)])
def test_a_model_whose_rows_or_larger_batches_compute_otherwise_is_refused(tmp_path, monkeypatch, partner, net, above):
    """Rows 4 and after, or batches above 4 images (the probe set's 6 images at once catch it) or above
    6 (the run's batch: 8 images, the probe set tiled to 8 rows, catches it): refused, not served."""
    if above is not None:
        monkeypatch.setattr(nets, "COUPLED_ABOVE", above)
    model = tapped(net())
    monkeypatch.setattr(nets, "IMPOSTOR", False)
    store = ResultStore(tmp_path / "store")
    stir_of(store, model, partner)
    monkeypatch.setattr(nets, "IMPOSTOR", True)
    with pytest.raises(BatchCoupledError, match="computes another output for an image when it is read with other"):
        stir_of(store, model, partner)


def test_coupling_at_the_run_batch_size_is_refused_at_that_size(tmp_path, monkeypatch, partner):
    """Coupled above 6 images: refused when the run reads 8 at once, measured when it reads 4 at once
    (execution.batch_size=4: every read of the run is at most 4 images)."""
    monkeypatch.setattr(nets, "COUPLED_ABOVE", 6)
    monkeypatch.setattr(nets, "IMPOSTOR", True)
    model = tapped(nets.BigBatchNet())
    with pytest.raises(BatchCoupledError, match="against a batch of 8"):
        stir_of(ResultStore(tmp_path / "eight"), model, partner)
    assert len(stir_of(ResultStore(tmp_path / "four"), model, partner, ExecutionConfig(batch_size=4, warn_below=0.0))) == 3


def test_the_input_gradient_may_move_as_another_cpus_rounding_moves_it_and_no_more():
    """Another CPU's rounding flips a ReLU near 0 now and then: the VJP moved by up to 2.7e-3 across two
    hosts while the outputs moved by 5e-7. Such a move is the same behaviour; a sign flip, or an output
    moved by 2e-3, is not."""
    from stir.models.behaviour import TOLERANCE, VJP, VJP_TOLERANCE, difference

    g = torch.Generator().manual_seed(0)
    found = {"logits": torch.randn(6, 20, generator=g), VJP: torch.randn(6, 40, generator=g)}
    noise = torch.randn(6, 40, generator=g)

    def moved(tap, by):  # ``found`` with ``tap`` moved by ``by`` relative L2
        value = found[tap] + by * found[tap].norm() * noise[:, :found[tap].shape[1]] / noise[:, :found[tap].shape[1]].norm()
        return {**found, tap: value}
    assert difference(found, moved(VJP, 2.7e-3)) is None and difference(found, moved("logits", 5e-7)) is None
    assert "vjp differs" in difference(found, {**found, VJP: -found[VJP]})
    assert "vjp differs" in difference(found, moved(VJP, 2 * VJP_TOLERANCE))
    assert "logits differs" in difference(found, moved("logits", 2 * TOLERANCE))


def test_coupling_above_the_probes_cap_is_refused_when_the_run_measures_at_that_batch(tmp_path, monkeypatch, partner):
    """Coupled above 10 images, beyond the probe's cap (8 rows): the probe cannot see it, so the
    measurement reads the probe at the run's own batch first (16 images at once: refused, nothing stored);
    a run that reads at most 8 at once measures it (its value does not depend on the coupling)."""
    from stir.models.behaviour import PROBE_CAP

    monkeypatch.setattr(nets, "COUPLED_ABOVE", 10)
    monkeypatch.setattr(nets, "IMPOSTOR", True)
    assert PROBE_CAP < 10 < 16
    model = tapped(nets.BigBatchNet())
    store = ResultStore(tmp_path / "sixteen")
    with pytest.raises(BatchCoupledError, match="in a batch of 16, the run's"):
        stir_of(store, model, partner, ExecutionConfig(batch_size=16, warn_below=0.0), n=16)
    assert not list((tmp_path / "sixteen").rglob("direction/*.json"))  # refused before anything was stored
    eight = stir_of(ResultStore(tmp_path / "eight"), model, partner, ExecutionConfig(batch_size=8, eval_batch=8,
                                                                                    warn_below=0.0), n=16)
    assert len(eight) == 3


@pytest.mark.parametrize("how", ["closure", "global", "callable"])
def test_a_backward_hook_that_flips_gradients_is_measured_again(tmp_path, monkeypatch, partner, how):
    """A backward hook's source is in the static identity, not its closure's cell, the global it reads
    or a callable's state: a flipped gradient was served 0.689 where the model computes 0.378."""
    net = nets.hooked_net(how)
    turns = {"closure": lambda: net.flip_cell.__setitem__(0, -1.0),
             "global": lambda: monkeypatch.setattr(nets, "IMPOSTOR", True),
             "callable": lambda: setattr(net.flip_sign, "sign", -1.0)}
    honest, same, fresh = honest_then_impostor(tmp_path, monkeypatch, tapped(net), partner, turns[how])
    assert same != honest and same == fresh


def test_a_custom_autograd_backward_is_measured_again(tmp_path, monkeypatch, partner):
    honest, same, fresh = honest_then_impostor(tmp_path, monkeypatch, tapped(nets.CustomBackwardNet()), partner,
                                               lambda: monkeypatch.setattr(nets, "IMPOSTOR", True))
    assert same != honest and same == fresh


# ------------------------------------------------------------------ the local fingerprint store
def damage(store: Path, how: str, model: nn.Module = None) -> None:
    folder = store / "fingerprints"
    if how == "deleted":
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()
    elif how == "truncated":
        for f in folder.glob("*.pt"):
            f.write_bytes(f.read_bytes()[:100])
    else:  # the model's file deleted, its line in INDEX kept
        (folder / f"{content_identity(model)}.pt").unlink()


@pytest.mark.parametrize("how", ["deleted", "truncated", "one file deleted"])
def test_a_store_whose_fingerprints_are_lost_is_refused_not_a_fresh_start(tmp_path, monkeypatch, partner, how):
    """Deleting the fingerprints let a model that differs even on the probe batch become "the first
    behaviour" and take the stored results; truncating them was a warning ("ignoring it")."""
    monkeypatch.setattr(nets, "ACT", "relu")
    model = tapped(nets.global_net())
    store = ResultStore(tmp_path / "store")
    stir_of(store, model, partner)
    damage(tmp_path / "store", how, model)
    monkeypatch.setattr(nets, "ACT", "tanh")
    with pytest.raises(UncheckedResults, match=f"{tmp_path / 'store'} holds results but"):
        stir_of(ResultStore(tmp_path / "store"), model, partner)
    assert len(stir_of(ResultStore(tmp_path / "fresh"), model, partner)) == 3  # a store without results: a fresh start


def test_evaluate_refuses_a_results_folder_without_its_fingerprints_in_one_line(tmp_path, cifar10_root, monkeypatch,
                                                                               capsys):
    args = eval_args(tmp_path / "out", f"data.root={cifar10_root}", "data.download=false", "data.holdout_size=40",
                     "ref=python:behaviour_nets:global_net", "target=python:behaviour_nets:relu_tanh_partner")
    monkeypatch.setattr(nets, "ACT", "relu")
    run_entry_point("evaluate", args, monkeypatch)
    damage(tmp_path / "out" / "store", "deleted")
    monkeypatch.setattr(nets, "ACT", "tanh")
    message = refused("evaluate", args, monkeypatch, capsys)
    assert f"{tmp_path / 'out' / 'store'} holds results but its fingerprint folder fingerprints/" in message


def reindex(out: Path):
    """``python -m stir.store reindex OUT`` as a user runs it: (exit status, stderr)."""
    import os
    import subprocess
    import sys

    from conftest import REPO

    done = subprocess.run([sys.executable, "-m", "stir.store", "reindex", str(out)], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"})
    return done.returncode, done.stderr


def test_a_store_written_before_its_index_is_migrated_by_the_command_its_refusal_names(tmp_path, monkeypatch, partner):
    """A store of fingerprints without INDEX (written before it was kept) was refused with "move it aside";
    the refusal names python -m stir.store reindex, which lists the files; the store is then served, and
    still checked (an impostor is measured again). Each read is by copies of the models (a new process's)."""
    from copy import deepcopy

    monkeypatch.setattr(nets, "ACT", "relu")
    model = tapped(nets.global_net())
    store = tmp_path / "out" / "store"
    honest = stir_of(ResultStore(store), deepcopy(model), deepcopy(partner))
    (store / "fingerprints" / "INDEX").unlink()
    with pytest.raises(UncheckedResults, match=f"python -m stir.store reindex {store} "):
        stir_of(ResultStore(store), deepcopy(model), deepcopy(partner))
    status, err = reindex(tmp_path / "out")
    assert status == 0, err
    files = sorted(p.stem for p in (store / "fingerprints").glob("*.pt"))
    assert len(files) == 2 and (store / "fingerprints" / "INDEX").read_text().split() == files
    served = ResultStore(store)
    assert stir_of(served, deepcopy(model), deepcopy(partner)) == honest and served.misses == 0
    monkeypatch.setattr(nets, "ACT", "tanh")
    assert stir_of(ResultStore(store), deepcopy(model), deepcopy(partner)) != honest


@pytest.mark.parametrize("how, said", [("one file deleted", "a file was lost and INDEX is not written"),
                                       ("truncated", "is damaged")])
def test_reindex_refuses_a_store_whose_fingerprints_are_not_all_there(tmp_path, monkeypatch, partner, how, said):
    monkeypatch.setattr(nets, "ACT", "relu")
    model = tapped(nets.global_net())
    stir_of(ResultStore(tmp_path / "out" / "store"), model, partner)
    (tmp_path / "out" / "store" / "fingerprints" / "INDEX").unlink()
    damage(tmp_path / "out" / "store", how, model)
    status, err = reindex(tmp_path / "out")
    lines = err.strip().splitlines()
    assert status == 2 and lines[0].startswith("error: ") and said in lines[0], err
    assert f"move {tmp_path / 'out' / 'store'} aside to measure again" in lines[0]
    assert not (tmp_path / "out" / "store" / "fingerprints" / "INDEX").exists()
