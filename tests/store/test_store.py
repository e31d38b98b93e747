"""The result store: hits without recomputation, corrupt entries recomputed, keys, resume after a kill."""
import json

import pytest
import torch
from torch import nn

from stir.inversion import ExecutionConfig, InversionConfig
from stir.inversion.config import ControversialConfig
from stir.measure import CalibrationConfig, DirectionResult, Estimator, SimilarityResult, evaluate_direction, evaluate_pair, make_plan
from stir.measure.plan import DIRECTION, SIMILARITY, direction_parts, similarity_parts
from stir.store import STORE_VERSION, ResultStore

FAST_INVERSION = InversionConfig(mode="fast", steps=20, lr=0.05, seed=0)
FEW = CalibrationConfig(permutations=2, resamples=20)
QUIET = ExecutionConfig(warn_below=0.0)


def estimator(**kw) -> Estimator:
    return Estimator(**{"k": 2, "iri": "arbitrary", "inversion": FAST_INVERSION, "calibration": FEW, **kw})


class Killed(Exception):
    """Stands in for a process killed mid-experiment."""


class Counting(nn.Module):
    """A 3x8x8 -> 4 random linear read-out that counts its forward passes (and dies after ``die_after``)."""

    def __init__(self, seed: int):
        super().__init__()
        torch.manual_seed(seed)
        self.body = nn.Sequential(nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(48, 4))
        self.forwards = 0
        self.die_after = None

    def forward(self, x):
        self.forwards += 1
        if self.die_after is not None and self.forwards > self.die_after:
            raise Killed("killed mid-experiment")
        return self.body(x)


@pytest.fixture(scope="module")
def images() -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    blocks = torch.rand(8, 3, 2, 2, generator=g) * 0.6 + 0.2
    return (nn.functional.interpolate(blocks, size=8, mode="nearest") + 0.05 * torch.randn(8, 3, 8, 8, generator=g)).clamp(0, 1)


def run_pair(store, images, m1, m2, **kw):
    return evaluate_pair(m1, m2, images, "logits", "logits", estimator(), run=QUIET, store=store, **kw)


def test_second_call_is_served_from_the_store_without_any_forward_pass(tmp_path, images):
    m1, m2 = Counting(0), Counting(1)
    store = ResultStore(tmp_path)
    first = run_pair(store, images, m1, m2, record={"run": "unit"})
    assert (store.hits, store.misses) == (0, 3)  # the similarity and two directions
    assert len(list((tmp_path / "direction").glob("*.json"))) == 2
    assert len(list((tmp_path / "similarity").glob("*.json"))) == 1

    m1.forwards = m2.forwards = 0
    second = run_pair(store, images, m1, m2, names=("a", "b"))
    assert (store.hits, store.misses) == (3, 3)  # misses unchanged: nothing recomputed
    # Two forwards each: the finiteness probe on 4 images of X (stir.measure.undefined, run before the
    # store so that no stored entry is ever served for a model that is not finite), and the behaviour
    # probe (stir.models.behaviour: its 6 images tiled to the run's batch of 8, at once with their input
    # gradient, compared with what the first call's full probe found); no inversion, no representation.
    assert m1.forwards == 2 and m2.forwards == 2
    assert (second.ref, second.target) == ("a", "b")  # names are display only
    for d in ("m2|m1", "m1|m2"):
        assert second.get(d).stir == first.get(d).stir
        same = {k: json.dumps(c.to_dict()) for k, c in first.get(d).calibration.items()}  # NaN fields compare equal in JSON
        assert {k: json.dumps(c.to_dict()) for k, c in second.get(d).calibration.items()} == same
    assert second.similarity.value == first.similarity.value

    entries = store.entries("direction")
    assert len(entries) == 2 and all(e["record"] == {"run": "unit"} for e in entries)
    assert all("torch" in e["versions"] and e["timestamp"] for e in entries)
    assert {DirectionResult.from_dict(e["result"]).stir.values == first.stat("m2|m1", "stir").values for e in entries} == {True, False}
    assert (tmp_path / "VERSION").read_text().strip() == str(STORE_VERSION)


def test_a_truncated_entry_is_moved_aside_recomputed_and_rewritten(tmp_path, images):
    m1, m2 = Counting(0), Counting(1)
    store = ResultStore(tmp_path)
    first = run_pair(store, images, m1, m2, directions=("m2|m1",))
    [path] = (tmp_path / "direction").glob("*.json")
    path.write_text(path.read_text()[:100])  # a torn write from some other tool

    second = run_pair(store, images, m1, m2, directions=("m2|m1",))
    assert store.misses == 2 + 1 and store.hits == 1  # the similarity hit; the direction recomputed
    assert second.stat("m2|m1", "stir") == first.stat("m2|m1", "stir")
    assert json.loads(path.read_text())["result"]["stir"] is not None  # rewritten, whole
    assert path.with_name(path.name + ".corrupt").exists()


@pytest.mark.parametrize("edit, why", [
    (lambda r: r["calibration"]["stir"].update(low=None), "calibration field low is None, not a number"),
    (lambda r: r["stir"].update(mean=0.938), "is not the mean"),
    (lambda r: r["calibration"]["stir"].update(value=r["calibration"]["stir"]["high"] + 0.3), "outside its own interval"),
    (lambda r: r.update(k=None), "k is None, not an integer"),
])
def test_an_inconsistent_entry_is_moved_aside_numbered_and_recomputed_with_one_warning(tmp_path, images, caplog, edit,
                                                                                       why):
    """Issue 54: a store entry is checked on read (no null number, a mean that is its values' mean, a
    value inside its own interval); a bad one is moved aside (.corrupt, then .corrupt-2: an earlier
    copy is never replaced) and recomputed, with one warning line, instead of a TypeError on every run."""
    m1, m2 = Counting(0), Counting(1)
    store = ResultStore(tmp_path)
    first = run_pair(store, images, m1, m2, directions=("m2|m1",))
    [path] = (tmp_path / "direction").glob("*.json")
    for n, aside in enumerate((".corrupt", ".corrupt-2")):
        entry = json.loads(path.read_text())
        edit(entry["result"])
        path.write_text(json.dumps(entry))
        with caplog.at_level("WARNING", logger="stir.store"):
            caplog.clear()
            second = run_pair(ResultStore(tmp_path), images, m1, m2, directions=("m2|m1",))
        said = [r.getMessage() for r in caplog.records if r.name == "stir.store"]
        assert len(said) == 1 and why in said[0] and aside in said[0], said
        assert second.stat("m2|m1", "stir") == first.stat("m2|m1", "stir")  # recomputed: the true value
        assert json.loads(path.with_name(path.name + aside).read_text())["result"] != json.loads(path.read_text())["result"]
    assert json.loads(path.with_name(path.name + ".corrupt").read_text())["result"] == \
        json.loads(path.with_name(path.name + ".corrupt-2").read_text())["result"]  # the first copy kept


def test_entries_that_parse_but_do_not_validate_are_not_trusted(tmp_path):
    store = ResultStore(tmp_path)
    key = ResultStore.key(x=1)
    store.put("similarity", key, {"value": 0.5})  # lacks SimilarityResult's fields
    assert store.get("similarity", key) is not None  # fine without a validator
    assert store.get("similarity", key, validate=SimilarityResult.from_dict) is None
    assert not store.path("similarity", key).exists() and store.entries("similarity") == []

    other = ResultStore.key(x=2)
    store.put("similarity", other, {"value": 0.5})
    store.path("similarity", other).rename(store.path("similarity", key))  # right file, wrong key inside
    assert store.get("similarity", key) is None and store.misses == 2


def test_every_result_relevant_setting_changes_the_key_and_nothing_else_does(images):
    ids, taps = ("id1", "id2"), ("logits", "logits")

    def key(images=images, ids=ids, taps=taps, run=None, difficulty=None, calibration=None, min_fraction_iri=0.0,
            measure="linear_cka", k=2, iri="both", min_fraction_adversarial=0.5, **cfg):
        e = Estimator(measure=measure, k=k, iri=iri, inversion=InversionConfig(**cfg), min_fraction_iri=min_fraction_iri,
                      difficulty=difficulty or ControversialConfig(), calibration=calibration or CalibrationConfig(),
                      min_fraction_adversarial=min_fraction_adversarial)
        return ResultStore.key(kind=DIRECTION, **direction_parts(make_plan(images, e, run), ids, taps))

    base = key()
    changed = [
        key(k=3), key(measure="rbf_cka"), key(iri="arbitrary"), key(seed=1), key(steps=10), key(tolerance=0.05),
        key(mode="fast"), key(taps=("logits", "body.1")), key(fake_relu=False), key(record_steps=(5,)),
        key(adversarial_objective="paper"), key(min_fraction_iri=0.5), key(min_fraction_adversarial=0.9), key(ids=("id2", "id1")), key(images=images[:4]),
        key(images=images.flip(0)), key(difficulty=ControversialConfig(steps=7)),
        key(calibration=CalibrationConfig(resamples=10)), key(calibration=CalibrationConfig(ceiling="independent")),
        key(calibration=CalibrationConfig(floor="images")), key(calibration=CalibrationConfig(guard=2.0)),
        key(images=[images, images.flip(0)]), key(fold_batch_norm=False),
    ]
    assert base not in changed and len(set(changed)) == len(changed)
    # How it runs is in no key.
    assert key(run=ExecutionConfig(batch_size=3, cache_dir="/tmp/x", progress=True, warn_below=0.1, compile=True)) == base

    # One description of the inversion for the store and the inversion cache: the cache's own.
    e = Estimator(iri="both")
    plan = make_plan(images, e)
    assert direction_parts(plan, ids, taps)["inversion"] == {
        "arbitrary": e.inversion.key_settings(False, "32"), "adversarial": e.inversion.key_settings(True, "32")}

    # The plain similarity has no direction for a symmetric measure, and ignores the inversion settings.
    sim = lambda plan, ids, taps: ResultStore.key(kind=SIMILARITY, **similarity_parts(plan, ids, taps))  # noqa: E731
    assert sim(plan, ids, taps) == sim(plan, ids[::-1], taps[::-1])
    other = make_plan(images, Estimator(k=5, iri="arbitrary", inversion=InversionConfig(seed=9)))
    assert sim(plan, ids, taps) == sim(other, ids, taps)
    asym = make_plan(images, Estimator(measure="linear_regression"))
    assert sim(asym, ids, taps) != sim(asym, ids[::-1], taps[::-1])


def test_a_pair_reuses_the_direction_a_matrix_already_stored(tmp_path, images):
    m1, m2 = Counting(0), Counting(1)
    store = ResultStore(tmp_path)
    direction = evaluate_direction(m1, m2, images, "logits", "logits", estimator(), run=QUIET, store=store)
    pair = run_pair(store, images, m1, m2, directions=("m2|m1",))
    assert store.hits == 1  # the direction; only the similarity was computed
    assert pair.stat("m2|m1", "stir") == direction.stir


def test_resume_after_a_kill_computes_only_what_is_missing(tmp_path, images):
    ref, targets = Counting(0), [Counting(1), Counting(2), Counting(3)]
    targets[2].die_after = 3  # past the input check and tgt(X): killed inside the first draw

    def sweep(store):
        return [evaluate_direction(ref, t, images, "logits", "logits", estimator(iri="both"), run=QUIET,
                                   names=("ref", f"t{i}"), store=store) for i, t in enumerate(targets)]

    with pytest.raises(Killed):
        sweep(ResultStore(tmp_path))
    assert len(list((tmp_path / "direction").glob("*.json"))) == 2  # the finished ones, nothing partial

    targets[2].die_after = None
    for m in (ref, *targets):
        m.forwards = 0
    store = ResultStore(tmp_path)  # a fresh process
    results = sweep(store)
    assert (store.hits, store.misses) == (2, 1)
    # The stored two: only the finiteness and behaviour probes (one forward of 4 images; the probe's 6 tiled to
    # the run's batch of 8, with their input gradient); the third recomputed.
    assert targets[0].forwards == 2 and targets[1].forwards == 2 and targets[2].forwards > 2
    assert [r.target for r in results] == ["t0", "t1", "t2"] and results[2].stir is not None
    assert len(store.entries("direction")) == 3


def test_the_references_arbitrary_iris_are_inverted_once_for_all_targets(tmp_path, images):
    """With ``execution.cache_dir`` the engine's cache (keyed without the target) serves every target."""
    ref = Counting(0)
    e = estimator(inversion=InversionConfig(mode="fast", steps=20, lr=0.05, seed=0, early_stop=False),
                  calibration=CalibrationConfig(ceiling="same_draws", permutations=2, resamples=20))
    run = ExecutionConfig(warn_below=0.0, cache_dir=str(tmp_path))
    first = evaluate_direction(ref, Counting(1), images, "logits", "logits", e, run=run)
    inverting = ref.forwards
    assert inverting >= 20 + 1  # both draws as one batch: 20 gradient steps and the final evaluation
    ref.forwards = 0
    second = evaluate_direction(ref, Counting(2), images, "logits", "logits", e, run=run)
    # the finiteness probe, the input check and its second pass (is the model deterministic? issue 30),
    # the gradient-path check of the reference (it is inverted), one pass per draw, ref(X) for the
    # calibration, the cost probe's two (stir.measure.cost), the behaviour probe's read (its batch tiled to the
    # run's, with the input gradient: stir.models.behaviour, compared with the first call's), the probe at
    # the run's full batch before a measurement (its own batch and the full one: check_batch): no inversion
    assert ref.forwards <= 1 + 2 + 1 + 2 + 1 + 2 + 1 + 2
    assert second.quality["arbitrary"]["median_residual"] == first.quality["arbitrary"]["median_residual"]


def test_a_second_process_waits_for_the_key_and_reuses_the_first_ones_result(tmp_path):
    """Process 2 needs a result process 1 is computing: it waits on the key's lock, then reads it."""
    import os
    import shutil
    import subprocess
    import sys
    import threading
    import time
    from pathlib import Path

    import store_worker

    scratch = ResultStore(tmp_path / "scratch")
    store_worker.measure(scratch)  # the result "process 1" is about to store
    (entry,) = (tmp_path / "scratch/direction").glob("*.json")
    shared = ResultStore(tmp_path / "shared")
    repo = Path(__file__).resolve().parents[2]
    with shared.lock("direction", entry.stem):  # process 1 computing
        proc = subprocess.Popen([sys.executable, str(Path(store_worker.__file__)), "direction", str(shared.root)],
                                env={**os.environ, "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1"},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
        reader.start()
        deadline = time.time() + 120
        while not any("waiting for its result" in line for line in lines) and time.time() < deadline:
            assert proc.poll() is None, "".join(lines)[-2000:]  # must wait, not compute on its own
            time.sleep(0.1)
        (shared.root / "direction").mkdir(parents=True)
        shutil.copy(entry, shared.root / "direction" / entry.name)  # process 1 stores, then releases
    out = proc.stdout.read()
    proc.wait(timeout=120)
    reader.join(timeout=10)
    err = "".join(lines)
    assert proc.returncode == 0, err[-2000:]
    assert out.split() == ["1", "0"]  # one hit, no miss: nothing computed
    assert "waiting for its result" in err and "result stored" not in err


def test_processes_racing_for_one_missing_entry_compute_it_once(tmp_path):
    """Three real processes, all started before any can finish, ask for the same missing entry: exactly
    one computes it (the others wait on its lock and read it), and all get the same value."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import store_worker

    repo = Path(__file__).resolve().parents[2]
    rendezvous = tmp_path / "rendezvous"
    rendezvous.mkdir()
    racers = 3
    procs = [subprocess.Popen([sys.executable, str(Path(store_worker.__file__)), "race", str(tmp_path / "store"),
                               str(rendezvous), str(racers)],
                              env={**os.environ, "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(racers)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-1000:] for _, err in outs]
    computed = (rendezvous / "computed").read_text().split()
    assert len(computed) == 1  # one computation
    assert {out.strip() for out, _ in outs} == {f"{float(computed[0])}"}  # every racer got that process's value
    assert len(list((tmp_path / "store" / "race").glob("*.json"))) == 1


def test_an_older_store_version_is_said_once_and_not_reused(tmp_path, caplog):
    import logging

    old = tmp_path / "direction"
    old.mkdir(parents=True)
    (old / ("0" * 64 + ".json")).write_text("{}")  # an entry written before the VERSION marker
    store = ResultStore(tmp_path)
    with caplog.at_level(logging.WARNING):
        assert store.get("direction", "1" * 64) is None
        assert store.get("direction", "2" * 64) is None
    said = [r.getMessage() for r in caplog.records if "store version" in r.getMessage()]
    assert len(said) == 1 and "2 or earlier" in said[0] and "computed again" in said[0]
    assert (tmp_path / "VERSION").read_text().strip() == str(STORE_VERSION)
