"""Issue 30, no code from a file: every file kind the project reads, with one planted object whose
unpickling would write a marker file. Nothing may run (the marker never appears), and where the file
is refused the message is one line (exit status 2 through the real entry points); caches that hold
such an entry drop it and recompute."""
import io
import json
import logging
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import refused, tiny_train_args
from faultkit import RUN, eval_args, evaluate, train_seed_pair
from stir.data import synthetic
from stir.provenance import file_sha256
from stir.untrusted import RestrictedUnpickler, UnsafeFileError, load_cifar_pickle, load_plain


class Planted:
    """Unpickling this opens (creates) ``marker``: the code a hostile file would run."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


@pytest.fixture
def marker(tmp_path) -> Path:
    path = tmp_path / "MARKER"
    yield path
    assert not path.exists(), "a file ran code while it was read"


def plant_torch(path: Path, marker: Path, key: str = "planted") -> None:
    """Rewrite the torch file at ``path`` (or a new one) with one extra ``Planted`` entry."""
    blob = torch.load(path, map_location="cpu", weights_only=True) if path.is_file() else {}
    if isinstance(blob, dict):
        blob[key] = Planted(marker)
    else:
        blob = [blob, Planted(marker)]
    torch.save(blob, path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, cifar10_root):
    return train_seed_pair(cifar10_root, tmp_path_factory)


def one_line(err: BaseException) -> str:
    text = str(err)
    assert "\n" not in text.strip(), text
    return text


# ------------------------------------------------------------------ the readers themselves
def test_load_plain_refuses_a_planted_object_in_one_line_naming_the_file(tmp_path, marker):
    file = tmp_path / "any.pt"
    plant_torch(file, marker)
    with pytest.raises(UnsafeFileError) as err:
        load_plain(file)
    assert str(file) in one_line(err.value) and "io.open" in str(err.value)


def test_the_restricted_unpickler_refuses_every_global_but_numpy_arrays(tmp_path, marker):
    file = tmp_path / "batch"
    file.write_bytes(pickle.dumps({b"data": Planted(marker)}, protocol=2))
    with pytest.raises(UnsafeFileError) as err:
        load_cifar_pickle(file)
    assert str(file) in one_line(err.value) and "io.open" in str(err.value)
    for name in (("os", "system"), ("builtins", "eval"), ("numpy", "load"), ("numpy.core.multiarray", "eval")):
        with pytest.raises(UnsafeFileError):
            RestrictedUnpickler(io.BytesIO(b"")).find_class(*name)


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_the_restricted_unpickler_reads_what_the_cifar_format_holds_at_any_protocol(tmp_path, protocol):
    entry = {b"data": np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3072), b"labels": [3, 7],
             b"batch_label": b"training batch 1 of 5", b"filenames": [b"a.png", b"b.png"], "n": np.int64(2)}
    file = tmp_path / "batch"
    file.write_bytes(pickle.dumps(entry, protocol=protocol))
    back = load_cifar_pickle(file)
    assert np.array_equal(back[b"data"], entry[b"data"]) and back[b"labels"] == [3, 7]
    assert back[b"filenames"] == [b"a.png", b"b.png"] and back["n"] == 2


# ------------------------------------------------------------------ every file kind, where it is read
def test_a_last_ckpt_that_runs_code_refuses_the_evaluation_in_one_line(runs, tmp_path, monkeypatch, capsys, marker):
    """The unfinished folder's refusal is built from its checkpoint (point_epoch): it read the file
    with weights_only=False and ran the planted code twice; now it refuses in one line."""
    killed = shutil.copytree(runs / RUN.format(seed=1), tmp_path / "runs" / RUN.format(seed=1))
    (killed / "metrics.json").unlink()
    (killed / "weights.pt").unlink()
    plant_torch(killed / "last.ckpt", marker)
    message = refused("evaluate", eval_args(tmp_path / "out", f"ref={runs / RUN.format(seed=0)}", f"target={killed}"),
                      monkeypatch, capsys)
    assert str(killed / "last.ckpt") in message and "is refused" in message
    message = refused("evaluate", eval_args(tmp_path / "out", f"ref={runs / RUN.format(seed=0)}", f"target={killed}",
                                            "allow_unfinished=true"), monkeypatch, capsys)
    assert str(killed / "last.ckpt") in message
    assert (killed / "last.ckpt").is_file()  # refused, not moved aside as damage


def test_a_last_ckpt_that_runs_code_refuses_the_resumed_training_in_one_line(runs, cifar10_root, tmp_path,
                                                                             monkeypatch, capsys, marker):
    killed = shutil.copytree(runs / RUN.format(seed=1), tmp_path / "runs" / RUN.format(seed=1))
    (killed / "metrics.json").unlink()
    (killed / "weights.pt").unlink()
    plant_torch(killed / "last.ckpt", marker)
    args = tiny_train_args(cifar10_root, tmp_path / "runs", "seed=1", "trainer.robust_val_every_n_epochs=0")
    message = refused("train", [*args, f"run_dir={killed}"], monkeypatch, capsys)
    assert str(killed / "last.ckpt") in message and not (killed / "metrics.json").exists()


def test_a_weights_pt_that_runs_code_is_refused_in_one_line(runs, tmp_path, monkeypatch, capsys, marker):
    """A finished folder whose weights.pt was replaced, metrics.json recording its sha256 (so it is not
    merely corrupt): the evaluation refuses it."""
    run = shutil.copytree(runs / RUN.format(seed=1), tmp_path / "runs" / RUN.format(seed=1))
    plant_torch(run / "weights.pt", marker)
    metrics = json.loads((run / "metrics.json").read_text())
    (run / "metrics.json").write_text(json.dumps({**metrics, "weights_sha256": file_sha256(run / "weights.pt")}))
    message = refused("evaluate", eval_args(tmp_path / "out", f"ref={runs / RUN.format(seed=0)}", f"target={run}"),
                      monkeypatch, capsys)
    assert str(run / "weights.pt") in message


@pytest.mark.parametrize("reader", ["weights", "source"])
def test_a_weights_file_of_another_source_that_runs_code_is_one_line(reader, tmp_path, marker):
    from stir.models.sources.base import SourceError, read_state_dict
    from stir.models.weights import WeightsError, read_weights

    file = tmp_path / "w.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, file)
    plant_torch(file, marker)
    with pytest.raises((WeightsError, SourceError)) as err:
        read_weights(file) if reader == "weights" else read_state_dict(str(file), f"file:{file}")
    assert str(file) in one_line(err.value)


def test_inversion_cache_entries_that_run_code_are_dropped_and_recomputed(runs, tmp_path, monkeypatch, marker):
    """Evaluate once; plant an object in every inversion-cache entry and drop the results store; the
    rerun reads none of them as data, recomputes, and gives the same numbers."""
    out = tmp_path / "out"
    pair = [f"ref={runs / RUN.format(seed=0)}", f"target={runs / RUN.format(seed=1)}"]
    evaluate(out, monkeypatch, *pair)
    first = (out / "pair_vanilla-seed0_vs_vanilla-seed1" / "pairs.csv").read_text()
    entries = sorted((out / "inversion-cache").rglob("*.pt"))
    assert entries
    for entry in entries:
        plant_torch(entry, marker)
    shutil.rmtree(out / "store")
    evaluate(out, monkeypatch, *pair)
    assert (out / "pair_vanilla-seed0_vs_vanilla-seed1" / "pairs.csv").read_text() == first


def test_a_data_cache_that_runs_code_is_rebuilt(tmp_path, caplog, marker):
    from stir.data.cache import cache_file, cached_dataset

    source = tmp_path / "images.tar"
    source.write_bytes(b"any source")
    built = []

    def build():
        built.append(1)
        return synthetic.make_dataset(n_train=10, n_test=10)

    first = cached_dataset(source, tmp_path, build)
    plant_torch(cache_file(tmp_path, source), marker)
    with caplog.at_level(logging.WARNING):
        again = cached_dataset(source, tmp_path, build)
    assert torch.equal(first.train_images, again.train_images) and len(built) == 2
    assert any("ignoring unreadable data cache" in r.getMessage() and "is refused" in r.getMessage()
               and "\n" not in r.getMessage() for r in caplog.records)


def test_a_predictor_file_that_runs_code_is_refused(tmp_path, marker):
    from stir.inversion.predictor import PredictionFiles

    torch.save([Planted(marker)], tmp_path / "rank0.pt")
    with pytest.raises(UnsafeFileError) as err:
        PredictionFiles(str(tmp_path)).merge()
    assert "rank0.pt" in one_line(err.value)


@pytest.mark.parametrize("victim", ["batches.meta", "data_batch_1", "test_batch"])
def test_a_cifar_file_that_runs_code_refuses_training_in_one_line(victim, tmp_path, monkeypatch, capsys, marker):
    root = tmp_path / "cifar"
    synthetic.write_cifar10_python(root, n_train=50, n_test=10, seed=0)
    file = root / "cifar-10-batches-py" / victim
    file.write_bytes(pickle.dumps({b"label_names": [b"a"], b"data": Planted(marker)}, protocol=2))
    message = refused("train", tiny_train_args(root, tmp_path / "runs"), monkeypatch, capsys)
    assert str(file) in message and "io.open" in message


# ------------------------------------------------------------------ real processes (slow)
@pytest.mark.slow
@pytest.mark.parametrize("entry", ["evaluate", "train"])
def test_a_planted_last_ckpt_in_a_real_process_is_exit_2_one_line_and_runs_nothing(entry, runs, cifar10_root, tmp_path,
                                                                                    marker):
    import subprocess

    from faultkit import entry_point_command, env

    killed = shutil.copytree(runs / RUN.format(seed=1), tmp_path / "runs" / RUN.format(seed=1))
    (killed / "metrics.json").unlink()
    (killed / "weights.pt").unlink()
    plant_torch(killed / "last.ckpt", marker)
    if entry == "evaluate":
        args = eval_args(tmp_path / "out", f"ref={runs / RUN.format(seed=0)}", f"target={killed}")
    else:
        args = [*tiny_train_args(cifar10_root, tmp_path / "runs", "seed=1", "trainer.robust_val_every_n_epochs=0"),
                f"run_dir={killed}"]
    done = subprocess.run(entry_point_command(entry, *args), env={**env(tmp_path), "HYDRA_FULL_ERROR": "0"},
                          capture_output=True, text=True, timeout=600)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(errors) == 1 and str(killed / "last.ckpt") in errors[0] and "Traceback" not in done.stderr
