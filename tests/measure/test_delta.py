"""Table 3's Delta as a stored measurement (issue 52): its definition, its interval over images, its
own store kind, and the rows beside the paper's numbers."""
import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from stir.experiments.paper.delta import NOT_STORED, PAPER_DELTA, DeltaConfig, delta_rows, measure, table3_pairs
from stir.inversion.stimuli import StimulusConfig
from stir.measure.delta import DELTA, DeltaResult, bootstrap_mean, evaluate_delta
from stir.store import NotStored, ResultStore


def _net(seed: int) -> nn.Module:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return nn.Sequential(nn.Conv2d(3, 4, 3, 2, 1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 8)).eval()


def _images(n: int) -> torch.Tensor:
    return torch.rand(n, 3, 16, 16, generator=torch.Generator().manual_seed(0))


CFG = StimulusConfig(steps=12, step_size=0.1, record_steps=(5,))


def test_delta_is_the_mean_distance_with_a_bootstrap_interval_over_images():
    d = evaluate_delta(_net(0), _net(1), _images(6), "logits", cfg=CFG, names=("a", "b"))
    assert d.n == 6 and len(d.distance) == 6
    assert d.delta == pytest.approx(sum(d.distance) / 6)
    assert d.low <= d.delta <= d.high and d.low < d.high
    assert set(d.along) == {"5", "12"} and d.along["12"] == pytest.approx(d.delta, rel=1e-6)
    assert (d.ref, d.target, d.start) == ("a", "b", "image")
    mean, low, high = bootstrap_mean(torch.tensor([1.0, 1.0, 1.0]))
    assert (mean, low, high) == (1.0, 1.0, 1.0)  # no spread, no width
    assert math.isnan(bootstrap_mean(torch.tensor([2.0]))[1])  # one image: no interval


def test_a_delta_is_stored_under_its_own_kind_and_served_unchanged(tmp_path):
    m1, m2, x = _net(0), _net(1), _images(4)
    store = ResultStore(tmp_path / "store")
    first = evaluate_delta(m1, m2, x, "logits", cfg=CFG, ids=("id1", "id2"), store=store)
    assert len(list((tmp_path / "store" / DELTA).glob("*.json"))) == 1
    again = ResultStore(tmp_path / "store")
    second = evaluate_delta(m1, m2, x, "logits", cfg=CFG, ids=("id1", "id2"), store=again)
    assert again.hits == 1 and again.misses == 0
    assert second.to_dict() == DeltaResult.from_dict(first.to_dict()).to_dict()
    # the other start, the other direction: other measurements (other keys)
    evaluate_delta(m1, m2, x, "logits", cfg=StimulusConfig(start="seed", steps=12, step_size=0.1), ids=("id1", "id2"),
                   store=again)
    evaluate_delta(m2, m1, x, "logits", cfg=CFG, ids=("id2", "id1"), store=again)
    assert len(list((tmp_path / "store" / DELTA).glob("*.json"))) == 3
    with pytest.raises(NotStored):  # a read-only store measures nothing
        evaluate_delta(m1, m2, x[:3], "logits", cfg=CFG, ids=("id1", "id2"), store=again.as_read_only())
    bad = first.to_dict()
    bad["distance"] = bad["distance"][:-1]
    with pytest.raises(ValueError, match="holds 3 distances"):
        DeltaResult.from_dict(bad)


class _Ctx:
    """What ``paper_delta`` reads of a ``Context``: models by name, images, the store, a record."""

    def __init__(self, store: ResultStore):
        self.store, self.nets = store, {"v": _net(0), "v1": _net(1), "a": _net(2), "a1": _net(3)}

    def model(self, name):
        return SimpleNamespace(module=self.nets[name], label=name, identity=f"id-{name}")

    def labelled_images(self, model, n=None):
        return _images(n), torch.zeros(n, dtype=torch.long)

    def record(self, *models):
        return {"models": [m.label for m in models]}


def test_table3_rows_put_ours_beside_the_papers_and_say_what_the_store_lacks(tmp_path, monkeypatch):
    import stir.experiments.paper.delta as paper_delta

    monkeypatch.setattr(paper_delta, "evaluate_delta", _with_logits_tap(paper_delta.evaluate_delta))
    pairs = table3_pairs({"vanilla": ["v", "v1", "v2"], "at": ["a", "a1"]})
    assert pairs == {"vanilla / vanilla seed": ("v", "v1"), "AT / AT seed": ("a", "a1"), "AT / vanilla": ("a", "v")}
    cfg = DeltaConfig(n=3, steps=5, step_size=0.1)
    ctx = _Ctx(ResultStore(tmp_path / "store"))
    rows = delta_rows(ctx, {"AT / vanilla": pairs["AT / vanilla"]}, cfg)
    assert [(r["direction"], r["start"]) for r in rows] == [("m1|m2", "image"), ("m1|m2", "seed"), ("m2|m1", "image"),
                                                             ("m2|m1", "seed")]
    assert [r["Delta (paper)"] for r in rows] == [19.270, 19.270, 7.368, 7.368]
    assert all(r["Delta (ours)"] > 0 and r["why"] == "" for r in rows)
    # "m1|m2" keeps m2 (the reference) and pushes m1: AT pushed, vanilla kept
    d = measure(ctx, "a", "v", "m1|m2", "image", cfg)
    assert (d.ref, d.target) == ("v", "a") and d.delta == rows[0]["Delta (ours)"]
    unmeasured = delta_rows(_Ctx(ResultStore(tmp_path / "store").as_read_only()), {"AT / AT seed": pairs["AT / AT seed"]}, cfg)
    assert all(r["Delta (ours)"] is None and r["why"] == NOT_STORED for r in unmeasured)
    assert [r["Delta (paper)"] for r in unmeasured[::2]] == [PAPER_DELTA["AT / AT seed"][k][0] for k in ("m1|m2", "m2|m1")]


def _with_logits_tap(evaluate):
    """The tiny nets have no penultimate tap: read them at their logits."""
    def wrapped(ref, target, images, tap_ref="logits", tap_target=None, cfg=None, **kw):
        return evaluate(ref, target, images, "logits", None, cfg, **kw)
    return wrapped
