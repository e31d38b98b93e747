"""The tutorial notebooks (docs/tutorials/*.ipynb): stored with the outputs the documentation site
shows, listed in its nav and the README, and (slow, in .ci/run) executed top to bottom from the
shipped zoo, the served ones giving the outputs they store (issue 55); their data path comes from
STIR_CIFAR10, and execute.py writes copies unless asked to update them (issue 69)."""
import importlib.util
import json
import logging
import os
from pathlib import Path

import nbformat
import pytest
import yaml

from conftest import REPO

TUTORIALS = REPO / "docs" / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))
# Served from zoo/store (nothing measured): a fresh run prints exactly what is stored. your_own_model
# measures (a CNN trained here, a short inversion), so only its shape is compared.
SERVED = {"stir_of_two_models", "layerwise"}
# The project's CIFAR-10 copy: where the notebooks look for it, STIR_CIFAR10 or beside the clone.
DEFAULT_COPY = REPO.parent / "shared" / "data" / "cifar10-jpg.tar.gz"
DATA_COPY = Path(os.environ.get("STIR_CIFAR10") or DEFAULT_COPY)
REFRESH = "python docs/tutorials/execute.py --update"


def executor():
    spec = importlib.util.spec_from_file_location("tutorials_execute", TUTORIALS / "execute.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def texts(book) -> list:
    """Every code cell's outputs as text: {"stdout": ..., "stderr": ..., "data": [markdown, plain text or
    "image"], "errors": [...]}, cell by cell (a stream's split into outputs follows the kernel's timing)."""
    out = []
    for cell in book.cells:
        if cell.cell_type != "code":
            continue
        shown = {"stdout": "", "stderr": "", "data": [], "errors": []}
        for output in cell.outputs:
            if output.output_type == "stream":
                shown[output.name] += output.text
            elif output.output_type in ("execute_result", "display_data"):
                data = output.get("data", {})
                shown["data"].append(data.get("text/markdown") or ("image" if "image/png" in data else data.get("text/plain")))
            else:
                shown["errors"].append(output.get("ename"))
        out.append(shown)
    return out


def kinds(book) -> list:
    return [sorted(k for k, v in cell.items() if v) for cell in texts(book)]


def test_three_tutorials_are_stored_executed_in_order_with_outputs():
    assert {p.stem for p in NOTEBOOKS} == SERVED | {"your_own_model"}
    for path in NOTEBOOKS:
        book = nbformat.read(path, as_version=4)
        code = [c for c in book.cells if c.cell_type == "code"]
        counts = [c.execution_count for c in code]
        assert counts == list(range(1, len(code) + 1)), f"{path.name}: not stored as one run top to bottom; {REFRESH}"
        assert all(o.output_type != "error" for c in code for o in c.outputs), path.name
        stored = json.dumps(texts(book))
        assert "Traceback" not in stored and "/work/" not in stored and "Warning:" not in stored, path.name
        assert sum(len(c.outputs) for c in code) >= 3, path.name
    assert any("image/png" in o.get("data", {}) for c in nbformat.read(TUTORIALS / "layerwise.ipynb", 4).cells
               if c.cell_type == "code" for o in c.outputs), "the layer-wise curves are drawn"


def test_the_site_renders_the_stored_notebooks_and_the_readme_links_them():
    config = yaml.load((REPO / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    jupyter = [p["mkdocs-jupyter"] for p in config["plugins"] if isinstance(p, dict) and "mkdocs-jupyter" in p]
    assert jupyter and jupyter[0]["execute"] == "false", "the site shows the stored outputs, it does not run them"
    nav = json.dumps(config["nav"])
    readme = (REPO / "README.md").read_text()
    for path in NOTEBOOKS:
        assert f"tutorials/{path.name}" in nav, path.name
    assert "](docs/tutorials/index.md)" in readme
    assert "mkdocs-jupyter" in (REPO / "docs" / "requirements.txt").read_text()


@pytest.mark.slow  # about 2 min on one CPU thread: two served notebooks and one that trains and measures a little
@pytest.mark.skipif(not DATA_COPY.exists(), reason="the notebooks read the project's CIFAR-10 copy (STIR_CIFAR10)")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_each_tutorial_executes_and_the_served_ones_give_their_stored_outputs(path, tmp_path):
    tracked = path.read_bytes()
    # as a user runs it: a failing cell raises nbclient's CellExecutionError, with its traceback
    assert executor().main([path.name, "--out", str(tmp_path)]) == 0
    assert path.read_bytes() == tracked, f"{path.name}: execute.py without --update rewrote the tracked notebook"
    fresh = nbformat.read(tmp_path / path.name, as_version=4)
    stored = nbformat.read(path, as_version=4)
    if path.stem in SERVED:  # what it prints and shows (stderr: the log's warnings, which may vary with the machine)
        shown = lambda book: [{k: v for k, v in cell.items() if k != "stderr"} for cell in texts(book)]  # noqa: E731
        assert shown(fresh) == shown(stored), f"{path.name}: its stored outputs are stale; {REFRESH}"
    else:
        assert kinds(fresh) == kinds(stored), f"{path.name}: its stored outputs are stale; {REFRESH}"


def first_code_cell(path) -> str:
    return next(cell.source for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_each_tutorial_reads_its_data_path_from_stir_cifar10(path, tmp_path, monkeypatch):
    """The first cell (nothing heavy: the check comes before any data is read) takes the path from
    STIR_CIFAR10, absolute or from the current folder, else the copy beside the clone, and a missing
    one stops it with a line naming the variable."""
    monkeypatch.chdir(tmp_path)  # the cell changes to the repository root once the data is found
    monkeypatch.setattr(logging, "basicConfig", lambda **kwargs: None)  # the cell's, for the notebook's kernel
    cell = first_code_cell(path)

    monkeypatch.setenv("STIR_CIFAR10", str(tmp_path / "missing.tar.gz"))
    with pytest.raises(FileNotFoundError, match="set STIR_CIFAR10") as err:
        exec(cell, {})
    assert str(tmp_path / "missing.tar.gz") in str(err.value)

    (tmp_path / "copy.tar.gz").write_bytes(b"")
    for value in (str(tmp_path / "copy.tar.gz"), "copy.tar.gz"):
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("STIR_CIFAR10", value)
        namespace = {}
        exec(cell, namespace)
        assert namespace["DATA"] == (tmp_path / "copy.tar.gz").resolve(), value
        assert Path.cwd() == REPO

    monkeypatch.delenv("STIR_CIFAR10")
    namespace = {}
    try:
        exec(cell, namespace)
    except FileNotFoundError:  # no copy beside this clone: DATA is assigned before the check
        pass
    assert namespace["DATA"] == DEFAULT_COPY.resolve()


def test_execute_py_writes_copies_unless_asked_to_update(tmp_path, monkeypatch):
    """Without --update the notebook's file keeps its bytes and the executed copy goes to --out (default
    build/tutorials/, which git ignores); with --update the outputs go into the file. The kernel is
    replaced by a marker (the slow test above executes them for real)."""
    module = executor()
    assert module.parser().parse_args([]).out == module.OUT == REPO / "build" / "tutorials"
    assert "/build/" in (REPO / ".gitignore").read_text().splitlines()

    def mark(path, timeout=None):
        book = nbformat.read(path, as_version=4)
        book.metadata["executed"] = True
        return book

    monkeypatch.setattr(module, "execute", mark)
    monkeypatch.setattr(module, "OUT", tmp_path / "build")
    folder = tmp_path / "tutorials"
    folder.mkdir()
    notebook = folder / "a.ipynb"
    notebook.write_bytes((TUTORIALS / "stir_of_two_models.ipynb").read_bytes())
    tracked = notebook.read_bytes()

    assert module.main([str(notebook)]) == 0
    assert notebook.read_bytes() == tracked
    assert nbformat.read(tmp_path / "build" / "a.ipynb", as_version=4).metadata["executed"]

    assert module.main([str(notebook), "--out", str(tmp_path / "elsewhere")]) == 0
    assert notebook.read_bytes() == tracked and (tmp_path / "elsewhere" / "a.ipynb").is_file()

    with pytest.raises(SystemExit) as exit_:  # a copy over the notebook itself would be an update
        module.main([str(notebook), "--out", str(folder)])
    assert exit_.value.code == 2 and notebook.read_bytes() == tracked

    assert module.main([str(notebook), "--update"]) == 0
    assert nbformat.read(notebook, as_version=4).metadata["executed"]


def test_execute_py_gives_the_kernel_this_stir_and_an_absolute_stir_cifar10(tmp_path, monkeypatch):
    module = executor()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STIR_CIFAR10", "copy.tar.gz")  # from here, not from the notebook's folder
    env = module.kernel_env()
    assert env["STIR_CIFAR10"] == str(tmp_path / "copy.tar.gz")
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(REPO)
