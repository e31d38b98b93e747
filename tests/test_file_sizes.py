"""No Python file in stir/, bench/ or tests/ over 600 lines (one file, one job: docs/architecture.md), and
no module of the paper application (``stir.experiments.paper``, one module per claim group) over 400."""
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIMITS = [(REPO / "stir", 600), (REPO / "bench", 600), (REPO / "tests", 600), (REPO / "stir" / "experiments" / "paper", 400)]


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def too_long(root: Path, limit: int) -> list:
    return [f"{path.relative_to(root.parent)}: {n} lines" for path in sorted(root.rglob("*.py"))
            if (n := lines(path)) > limit]


@pytest.mark.parametrize("root, limit", LIMITS, ids=["stir", "bench", "tests", "stir/experiments/paper"])
def test_no_file_is_longer_than_its_limit(root, limit):
    assert root.is_dir(), root
    long = too_long(root, limit)
    assert not long, f"over {limit} lines (move a coherent piece into a file named for its job):\n" + "\n".join(long)


def test_the_check_finds_a_long_file(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * 600)
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * 601)
    assert too_long(tmp_path / "pkg", 600) == ["pkg/long.py: 601 lines"]
