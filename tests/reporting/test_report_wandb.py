"""W&B report logging with the real wandb client, offline in tmp_path (never the network)."""
import json
import os
import sys

import numpy as np
import pytest

from stir.reporting import log_report, plot_bars
from stir.reporting.wandb_log import complete_runs

ROWS = [{"model": "resnet18", "stir": 0.81, "cka": None}, {"model": "vgg16", "stir": float("nan"), "cka": np.float32(0.5)}]


@pytest.fixture(autouse=True)
def _wandb_home(tmp_path, monkeypatch):
    # wandb-core's debug log (cache dir) and the staging copies of logged tables (data dir) would
    # otherwise land in the user's home.
    for var, sub in (("WANDB_CACHE_DIR", "cache"), ("WANDB_DATA_DIR", "data"), ("WANDB_CONFIG_DIR", "config")):
        monkeypatch.setenv(var, str(tmp_path / "wandb_home" / sub))


@pytest.fixture
def png(tmp_path):
    return plot_bars(["a", "b"], [0.2, 0.4], None, tmp_path / "fig.png", "t", "v")


def _state():
    import wandb
    return dict(os.environ), sys.exit, sys.excepthook, wandb.run


def test_offline_run_artefacts(tmp_path, png):
    import wandb

    before = _state()
    run_dir = log_report(
        project="stir-test", run_name="report", directory=tmp_path / "wb", mode="offline",
        config={"pairs": 2, "attack": {"eps": 0.5}},
        tables={"stir_table": (ROWS, ["model", "stir", "cka"]), "extra_table": ([{"x": 1}], None)},
        images={"stir_matrix_png": png}, summary={"stir_mean": 0.81, "agreement": np.float64(0.9)})
    assert _state() == before  # env (WANDB_SERVICE), exit hooks and wandb.run as found

    assert run_dir.is_dir() and run_dir.parent == (tmp_path / "wb" / "wandb").resolve()
    assert run_dir.name.startswith("offline-run-")
    run_id = run_dir.name.rsplit("-", 1)[1]
    record_log = (run_dir / f"run-{run_id}.wandb").read_bytes()
    for key in (b"stir_table", b"extra_table", b"stir_matrix_png", b"stir_mean", b"agreement", b"report",
                b"media/table/stir_table_0_", b"media/images/stir_matrix_png_0_"):
        assert key in record_log, key

    (table_file,) = (run_dir / "files" / "media" / "table").glob("stir_table_0_*.table.json")
    table = json.loads(table_file.read_text())  # json accepts the bare NaN token wandb writes
    assert table["columns"] == ["model", "stir", "cka"]
    assert table["data"][0] == ["resnet18", 0.81, None]
    assert table["data"][1][0] == "vgg16" and np.isnan(table["data"][1][1]) and table["data"][1][2] == 0.5
    (image_file,) = (run_dir / "files" / "media" / "images").glob("stir_matrix_png_0_*.png")
    assert image_file.read_bytes() == png.read_bytes()

    # A second report in the same process is a separate run folder.
    second = log_report(project="stir-test", run_name="again", directory=tmp_path / "wb", mode="offline",
                        config={}, tables={}, images={}, summary={"x": 1.0})
    assert second != run_dir and second.is_dir()
    assert wandb.run is None
    assert complete_runs(tmp_path / "wb") == [run_dir.name, second.name]  # both logged to the end


def test_disabled_and_bad_input_start_nothing(tmp_path, png):
    before = _state()
    kwargs = dict(project="p", run_name="r", directory=tmp_path / "wb", config={}, summary={})
    assert log_report(mode="disabled", tables={"t": (ROWS, None)}, images={"i": png}, **kwargs) is None
    with pytest.raises(ValueError):
        log_report(mode="sometimes", tables={}, images={}, **kwargs)
    with pytest.raises(FileNotFoundError):
        log_report(mode="offline", tables={}, images={"i": tmp_path / "missing.png"}, **kwargs)
    with pytest.raises(ValueError):
        log_report(mode="offline", tables={"k": (ROWS, None)}, images={"k": png}, **kwargs)
    assert not (tmp_path / "wb").exists()
    assert _state() == before


def test_a_report_served_from_the_store_gets_one_w_and_b_run_however_often_it_is_published(tmp_path):
    """publish_once: a report with no complete W&B run gets one even when nothing new was measured (its
    results came from shards); a second publication of the same numbers adds none; the lock on the
    report folder is what makes two evaluations that finish at once write one."""
    from filelock import FileLock, Timeout

    from stir.config.schema import LoggerConfig, WandbConfig
    from stir.reporting.publish import publish_once
    from stir.reporting.report import Report, Table

    out = tmp_path / "results" / "pair_a_vs_b-1234"
    report = Report(title="t", tables={"pairs": Table([{"stir": 0.5}])})
    logger = LoggerConfig(wandb=WandbConfig(mode="offline", project="p"))
    publish_once(report, out, logger, {"n": 1}, "evaluate/t", ["pair"], nothing_new=True)  # shards measured it
    assert len(complete_runs(out)) == 1
    publish_once(report, out, logger, {"n": 1}, "evaluate/t", ["pair"], nothing_new=True)  # a rerun: served
    assert len(complete_runs(out)) == 1
    publish_once(report, out, logger, {"n": 1}, "evaluate/t", ["pair"], nothing_new=False)  # measured anew
    assert len(complete_runs(out)) == 2
    held = FileLock(str(out.parent / f".{out.name}.lock"))
    with held, pytest.raises(Timeout):  # the same lock a concurrent publish_once waits on
        FileLock(str(out.parent / f".{out.name}.lock"), timeout=0.1).acquire()
