"""CI runs every test: each ``slow``-marked test is on a ``pytest -m slow`` line of ``.ci/run``, whose
lines are the README's test commands (tests/test_docs.py checks that part)."""
import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SLOW_MARK = re.compile(r"pytest\.mark\.slow\b|marks=\[?[^\n]*\bslow\b")


def pytest_lines(ci_text: str):
    """The pytest command lines of a shell script, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", ci_text)
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].strip()
        if re.match(r"^(\S+=\S+\s+)*(python -m )?pytest\b", line):
            yield shlex.split(line)


def slow_test_files(tests: Path):
    """Test files that mark a test (or the module) slow, relative to the repository root."""
    return sorted(str(path.relative_to(REPO)) for path in tests.rglob("test_*.py") if SLOW_MARK.search(path.read_text()))


def covers(words, path: str) -> bool:
    """Whether the pytest line ``words`` runs the slow tests of ``path``: it selects the slow mark and
    names no paths (testpaths: every test), or names the file or a folder above it; no -k or deselection."""
    if "-m" not in words or words[words.index("-m") + 1] != "slow":
        return False
    if "-k" in words or any(w.startswith("--deselect") or w.startswith("--ignore") for w in words):
        return False
    takes_value = {"-m", "-n", "--dist", "--durations", "-p", "--timeout", "-c", "--rootdir", "--maxfail"}
    paths, skip = [], False
    for word in words[1:]:
        if skip:
            skip = False
        elif word in takes_value:
            skip = True
        elif not word.startswith("-"):
            paths.append(word.rstrip("/"))
    return not paths or any(path == p or path.startswith(p + "/") for p in paths)


def test_every_slow_test_file_is_on_a_line_of_ci():
    lines = list(pytest_lines((REPO / ".ci/run").read_text()))
    assert lines, ".ci/run runs no pytest line"
    files = slow_test_files(REPO / "tests")
    assert files, "no slow test found: the scan is broken"
    left_out = [f for f in files if not any(covers(words, f) for words in lines)]
    assert not left_out, f"slow tests on no line of .ci/run: {left_out}"


def test_the_check_sees_a_file_left_out():
    """The check above can fail: a slow line naming files covers only those."""
    words = shlex.split("pytest -m slow -n 2 tests/training/test_ddp.py tests/faults")
    assert covers(words, "tests/training/test_ddp.py") and covers(words, "tests/faults/test_fault_processes.py")
    assert not covers(words, "tests/test_readme_tour.py")
    assert not covers(shlex.split("pytest -m slow -k 'not tour'"), "tests/test_readme_tour.py")
    assert not covers(shlex.split("pytest"), "tests/test_readme_tour.py")  # the default suite deselects slow
    assert covers(shlex.split("pytest -m slow --durations=25"), "tests/test_readme_tour.py")
