"""Item 10 of issue 21: a fresh evaluation, one resumed after an interruption and a rerun served
entirely from the store write byte-identical reports (tables, Markdown, README, record, figures)."""
import shutil

import pytest

from faultkit import RUN, evaluate, train_seed_pair
from stir.store import ResultStore

BOTH = ["iri=both", "difficulty.steps=2", "inversion.steps=4", "inversion.record_steps=[2]", "n=6"]


def test_rows_of_a_result_read_back_from_the_store_have_the_same_columns_and_row_order():
    """The cause: the store writes JSON with sorted keys, and rows followed the dicts' order."""
    import json

    import torch
    from torch import nn

    from stir.experiments.rows import pair_convergence_rows, pair_row
    from stir.inversion import InversionConfig
    from stir.measure import CalibrationConfig, Estimator, evaluate_pair
    from stir.measure.results import DirectionResult, PairResult, SimilarityResult

    torch.manual_seed(0)
    net = lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(144, 5))  # noqa: E731
    estimator = Estimator(k=2, iri="both", inversion=InversionConfig(mode="fast", steps=4, record_steps=(2,)),
                          calibration=CalibrationConfig(permutations=2, resamples=5))
    pair = evaluate_pair(net(), net(), torch.rand(6, 3, 8, 8), "2", "2", estimator)
    stored = PairResult(
        similarity=SimilarityResult.from_dict(json.loads(json.dumps(pair.similarity.to_dict(), sort_keys=True))),
        directions={d: DirectionResult.from_dict(json.loads(json.dumps(r.to_dict(), sort_keys=True)))
                    for d, r in sorted(pair.directions.items())})
    assert list(pair_row(stored)) == list(pair_row(pair))
    assert [(r["direction"], r["iri"], r["step"]) for r in pair_convergence_rows(stored)] == [
        (r["direction"], r["iri"], r["step"]) for r in pair_convergence_rows(pair)]  # both IRI kinds: the convergence table has rows of each


@pytest.fixture(scope="module")
def runs(tmp_path_factory, cifar10_root):
    return train_seed_pair(cifar10_root, tmp_path_factory)


def report(out):
    """{file name: bytes} of the report folder (W&B is off)."""
    folder = (out / "pair_vanilla-seed0_vs_vanilla-seed1").resolve()
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_a_rerun_from_the_store_writes_the_same_bytes(runs, tmp_path, monkeypatch):
    out = tmp_path / "results"
    pair = [f"ref={runs / RUN.format(seed=0)}", f"target={runs / RUN.format(seed=1)}", "n=6"]  # arbitrary IRIs: fast
    evaluate(out, monkeypatch, *pair)
    fresh = report(out)
    assert {"pairs.csv", "pairs.md", "convergence.csv", "README.md", "record.json"} <= set(fresh)
    evaluate(out, monkeypatch, *pair)  # every result read back from the store (JSON with sorted keys)
    stored = report(out)
    assert [name for name in fresh if fresh[name] != stored.get(name)] == []


@pytest.mark.slow
def test_a_resumed_evaluation_writes_the_same_bytes_as_a_fresh_one(runs, tmp_path, monkeypatch):
    out = tmp_path / "results"
    pair = [f"ref={runs / RUN.format(seed=0)}", f"target={runs / RUN.format(seed=1)}", *BOTH]
    real_put, puts = ResultStore.put, []

    def interrupted(self, *args, **kwargs):  # killed right after the first measurement is stored
        if puts:
            raise KeyboardInterrupt
        puts.append(args[0])
        return real_put(self, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(ResultStore, "put", interrupted)
        with pytest.raises(SystemExit) as ended:  # evaluate.py ends a Ctrl-C with one line, exit 130 (issue 69)
            evaluate(out, monkeypatch, *pair)
        assert ended.value.code == 130
    assert len(list((out / "store").rglob("*.json"))) == 1
    evaluate(out, monkeypatch, *pair)  # resumed: one result from the store, the rest computed
    resumed = report(out)
    evaluate(out, monkeypatch, *pair)
    stored = report(out)
    shutil.rmtree(out / "store")
    shutil.rmtree(out / "inversion-cache")
    evaluate(out, monkeypatch, *pair)  # fresh again, in the same out_dir (record.json names it)
    fresh = report(out)
    assert [name for name in fresh if not (fresh[name] == resumed.get(name) == stored.get(name))] == []
