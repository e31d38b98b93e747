"""Item 7 of issue 21: Ctrl-C while a report is logged to W&B leaves a run with its config and no
tables; the rerun, served from the store, logs a complete one (and only then stops logging reruns)."""
import json

import pytest

from faultkit import RUN, evaluate, train


def offline_runs(folder):
    return sorted(folder.glob("wandb/offline-run-*"))


def has_tables(run):
    return bool(list(run.glob("files/media/table/*.table.json")))


@pytest.fixture
def wandb_dirs(tmp_path, monkeypatch):
    for var, name in (("WANDB_DATA_DIR", "wandb_data"), ("WANDB_CACHE_DIR", "wandb_cache"),
                      ("WANDB_CONFIG_DIR", "wandb_config")):
        monkeypatch.setenv(var, str(tmp_path / name))
    monkeypatch.setenv("WANDB_SILENT", "true")


def test_a_run_interrupted_while_logging_is_not_complete(wandb_dirs, tmp_path, monkeypatch):
    import wandb

    from stir.reporting.wandb_log import complete_runs, log_report

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(wandb, "Table", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        log_report(project="stir-test", run_name="r", directory=tmp_path / "report", mode="offline", config={"a": 1},
                   tables={"pairs": ([{"x": 1.0}], None)}, images={}, summary={"x": 1.0})
    (interrupted,) = offline_runs(tmp_path / "report")
    assert not has_tables(interrupted) and complete_runs(tmp_path / "report") == []


@pytest.mark.slow
def test_a_rerun_after_an_interrupted_wandb_run_logs_a_complete_one(wandb_dirs, cifar10_root, tmp_path, monkeypatch,
                                                                    capfd):
    import wandb

    runs, out = tmp_path / "runs", tmp_path / "results"
    for seed in (0, 1):
        train(cifar10_root, runs, monkeypatch, seed=seed)
    pair = [f"ref={runs / RUN.format(seed=0)}", f"target={runs / RUN.format(seed=1)}", "logger.wandb.mode=offline"]

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt  # what SIGINT raises in the main thread, here while the tables are logged

    with monkeypatch.context() as m:
        m.setattr(wandb, "Table", ctrl_c)
        with pytest.raises(SystemExit) as ended:  # evaluate.py ends a Ctrl-C with one line, exit 130 (issue 69)
            evaluate(out, monkeypatch, *pair)
        assert ended.value.code == 130
    (folder,) = out.glob("pair_vanilla-seed0_vs_vanilla-seed1-*")  # the report folder (not yet indexed)
    (interrupted,) = offline_runs(folder)
    assert not has_tables(interrupted) and not (folder / "wandb" / "complete.json").exists()

    capfd.readouterr()
    evaluate(out, monkeypatch, *pair)  # every result from the store
    assert "holds no complete W&B run" in "".join(capfd.readouterr())
    runs_now = offline_runs(folder)
    assert len(runs_now) == 2
    (complete,) = [r for r in runs_now if r != interrupted]
    assert has_tables(complete)
    assert json.loads((folder / "wandb" / "complete.json").read_text()) == [complete.name]

    evaluate(out, monkeypatch, *pair)  # complete now: no third run of the same numbers
    assert offline_runs(folder) == runs_now
