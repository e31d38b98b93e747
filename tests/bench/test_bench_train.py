"""bench/bench_train.py curve and plot (bench/train_curve.py): the accuracy curve leaves the run it
measures unchanged; the plot and its table."""
import json

import pytest
import torch

from bench.train_curve import CONFIGS, common_target_line, curve_main, plot_main, time_to
from stir.config.store import compose_train
from stir.data import synthetic
from stir.training.pipeline import train
from stir.training.runs import load_state_dict

COMMON = ["loss=at", "model.width=4", "trainer.max_epochs=2", "data.holdout_size=20", "data.batch_size=20",
          "attack.steps=1", "eval_attack.steps=2", "trainer.robust_val_size=10", "trainer.robust_test_size=10",
          "trainer.robust_val_every_n_epochs=1"]


def test_the_curve_measures_each_epoch_and_trains_the_run_train_py_trains(tmp_path):
    source = tmp_path / "images"
    synthetic.write_image_folder(source, n_train=60, n_test=20, seed=0)
    out = tmp_path / "out"
    curve_main(["t", *COMMON, f"--source={source}", f"--root={tmp_path / 'cache'}", f"--runs-dir={tmp_path / 'a'}",
                "--robust-images=10", f"--out={out}"])
    record = json.loads((out / "bench_train_curve_t.json").read_text())
    rows = record["curve"]
    assert [r["epoch"] for r in rows] == [1, 2] and 0 < rows[0]["wall_s"] < rows[1]["wall_s"]
    assert 0 < rows[0]["cpu_s"] < rows[1]["cpu_s"]
    assert all(0 <= r["test_acc"] <= 1 and 0 <= r["robust_acc"] <= 1 for r in rows)
    assert record["final"]["test/acc"] == pytest.approx(rows[-1]["test_acc"])  # the same network, the same images
    # The same recipe without the curve's callback: the same weights, bit for bit.
    plain = train(compose_train(CONFIGS, [*COMMON, f"data.source={source}", f"data.root={tmp_path / 'cache'}",
                                          f"runs_dir={tmp_path / 'b'}", "logger.wandb.mode=disabled"]))
    a, b = load_state_dict(record["run_dir"]), load_state_dict(str(plain))
    assert [k for k in a if not torch.equal(a[k], b[k])] == []


def test_time_to_target_and_the_plot(tmp_path):
    curve = [{"wall_s": 60, "cpu_s": 30, "test_acc": 0.5, "robust_acc": 0.2},
             {"wall_s": 120, "cpu_s": 60, "test_acc": 0.6, "robust_acc": 0.25},
             {"wall_s": 180, "cpu_s": 90, "test_acc": 0.58, "robust_acc": 0.31}]
    assert time_to(curve, {"test_acc": 0.55}) == 120 and time_to(curve, {"test_acc": 0.55}, "cpu_s") == 60
    assert time_to(curve, {"test_acc": 0.55, "robust_acc": 0.30}) == 180
    assert time_to(curve, {"test_acc": 0.9}) is None
    for name, loss in (("fast", "at"), ("paper", "vanilla")):
        (tmp_path / f"bench_train_curve_{name}.json").write_text(json.dumps(
            {"name": name, "recipe_name": name, "loss": loss, "width": 16, "threads": 1, "curve": curve}))
    plot_main([f"--results={tmp_path}", f"--out={tmp_path / 'curves.png'}"])
    assert (tmp_path / "curves.png").stat().st_size > 10_000
    table = (tmp_path / "curves.md").read_text()
    assert "| fast | fast | at | 16 | 3 | 1 | 3.0 | 1.5 | 0.5800 | 0.3100 | 3.0 | 1.5 |" in table
    assert "| paper | paper | vanilla | 16 | 3 | 1 | 3.0 | 1.5 | 0.5800 | 0.3100 | not reached | not reached |" in table
    assert "to test acc" not in table  # one vanilla curve: nothing to compare


def test_the_common_target_compares_vanilla_curves_that_miss_the_fixed_one():
    slow = [{"wall_s": 60 * e, "cpu_s": 60 * e, "test_acc": a} for e, a in ((1, 0.70), (2, 0.80), (3, 0.83))]
    fast = [{"wall_s": 45 * e, "cpu_s": 30 * e, "test_acc": a} for e, a in ((1, 0.75), (2, 0.84), (3, 0.86))]
    runs = [{"name": "paper", "loss": "vanilla", "curve": slow}, {"name": "fast", "loss": "vanilla", "curve": fast},
            {"name": "fast_at", "loss": "at", "curve": [{"wall_s": 1, "cpu_s": 1, "test_acc": 0.1}]}]
    line = common_target_line(runs)
    assert "to test acc >= 0.8300" in line  # paper's final accuracy; the AT curve's 0.1 is not a vanilla one
    assert "paper 3.0 wall / 3.0 CPU min" in line and "fast 1.5 wall / 1.0 CPU min" in line
    old = [{k: v for k, v in row.items() if k != "cpu_s"} for row in slow]  # no CPU clock recorded
    assert "paper 3.0 wall / - CPU min" in common_target_line([{**runs[0], "curve": old}, runs[1]])
