"""The line train.py and evaluate.py end with: where the W&B run is, how to upload it, where the
dashboards are (issue 55: train.py said nothing of its offline run)."""
import os
import re

from stir.reporting.wandb_log import offline_run_line


def test_the_newest_offline_run_with_its_sync_command_and_the_dashboards_page(tmp_path):
    old, new = tmp_path / "wandb/offline-run-20260101_000000-a", tmp_path / "wandb/offline-run-20260102_000000-b"
    for i, run in enumerate((old, new)):
        run.mkdir(parents=True)
        os.utime(run, (1_000_000 + i, 1_000_000 + i))
    line = offline_run_line(tmp_path, "offline")
    assert line == f"W&B offline run: {new} (upload: `wandb sync {new}`; dashboards: docs/evaluation.md#dashboard)"


def test_no_run_says_why():
    assert re.match(r"W&B: off \(logger.wandb.mode=disabled\); dashboards: docs/evaluation.md#dashboard",
                    offline_run_line("anywhere", "disabled"))


def test_the_entry_points_end_with_it():
    from conftest import REPO

    for script in ("train.py", "evaluate.py"):
        assert "offline_run_line(" in (REPO / script).read_text(), script
