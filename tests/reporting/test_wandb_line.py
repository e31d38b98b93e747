"""The line train.py and evaluate.py end with: where the W&B run is, how to upload it, where the
dashboards are (issue 55: train.py said nothing of its offline run)."""
import os
import re

import pytest

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


def test_the_dashboard_check_of_a_run_folder_that_is_not_there_is_one_line_exit_2(tmp_path, capsys):
    """An unmatched shell glob (`results/x/wandb/offline-run-*` with no such run) reached read_run as its own
    text and ended in a traceback; now one line naming it and what to pass, exit 2."""
    from stir.reporting import dashboard

    missing = tmp_path / "results" / "pair_at_vs_vanilla" / "wandb" / "offline-run-*"
    with pytest.raises(SystemExit) as done:
        dashboard.main(["check", str(missing)])
    err = capsys.readouterr().err.strip().splitlines()
    assert done.value.code == 2 and len(err) == 1 and err[0].startswith(f"error: no W&B run folder at {missing}")
