"""The atomic writer: permissions follow the umask, killed writers' temp files are cleaned up."""
import os
import stat
import subprocess
import sys

import pytest

from stir import atomic


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_written_files_respect_the_umask(tmp_path, umask, mode):
    previous = os.umask(umask)
    try:
        atomic.write_json(tmp_path / "metrics.json", {"a": 1})
        atomic.torch_save({"w": 1}, tmp_path / "weights.pt")
    finally:
        os.umask(previous)
    for name in ("metrics.json", "weights.pt"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == mode, name


def test_a_killed_writers_temp_file_is_removed_by_the_next_write(tmp_path):
    # A real process that is gone: its pid names the temp file a kill would have left.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = atomic._host()
    stale = tmp_path / f".metrics.json.{host}-{dead.pid}.abc123.tmp"
    live = tmp_path / f".other.json.{host}-{os.getpid()}.def456.tmp"  # a write in progress: kept
    foreign = tmp_path / ".notes.tmp"  # not ours: kept
    for f in (stale, live, foreign):
        f.write_bytes(b"partial")
    atomic.write_text(tmp_path / "metrics.json", "{}")
    assert not stale.exists() and live.exists() and foreign.exists()
    assert (tmp_path / "metrics.json").read_text() == "{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".notes.tmp", live.name, "metrics.json"])
