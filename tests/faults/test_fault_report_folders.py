"""Issue 30, reports are their own: the report folder carries the models' identities (the same command
in two working directories writes two reports), labels that slug alike get two files, no report is
written through a symbolic link or outside ``out_dir``, and long names are shortened with a hash."""
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from conftest import refused, run_entry_point
from faultkit import RUN, eval_args, evaluate, train_seed_pair
from stir.reporting.report import SLUG_LIMIT, slug, unique_slugs


@pytest.fixture(scope="module")
def runs(tmp_path_factory, cifar10_root):
    return train_seed_pair(cifar10_root, tmp_path_factory)


def reports(out: Path):
    return sorted(p for p in out.iterdir() if p.is_dir() and not p.is_symlink() and p.name.startswith("pair_"))


def test_one_command_in_two_working_directories_writes_two_reports(runs, tmp_path, monkeypatch):
    """``ref=runs/m1 target=runs/m2`` names other models from another directory: another report folder."""
    out = tmp_path / "D"
    for where, (a, b) in (("A", (0, 1)), ("B", (1, 0))):
        for name, seed in (("m1", a), ("m2", b)):
            shutil.copytree(runs / RUN.format(seed=seed), tmp_path / where / "runs" / name)
    monkeypatch.chdir(tmp_path / "A")
    evaluate(out, monkeypatch, "ref=runs/m1", "target=runs/m2")
    (first,) = reports(out)
    before = (first / "pairs.csv").read_text()
    monkeypatch.chdir(tmp_path / "B")
    evaluate(out, monkeypatch, "ref=runs/m1", "target=runs/m2")
    assert len(reports(out)) == 2 and (first / "pairs.csv").read_text() == before  # the first report is kept
    assert len(json.loads((out / "index.json").read_text())) == 2


def test_labels_that_slug_alike_get_two_files(tmp_path):
    from stir.config.schema import LoggerConfig
    from stir.reporting import Figure, Report, Table, plot_bars
    from stir.reporting.publish import publish

    names = ["convergence_coll/m+1/seed0_vs_r", "convergence_coll/m-1/seed0_vs_r"]
    assert slug(names[0]) == slug(names[1])  # what the labels were folded to
    stems = unique_slugs(names)
    assert len(set(stems.values())) == 2 and unique_slugs(["a/b"]) == {"a/b": "a-b"}  # a name alone keeps its slug
    figure = lambda v: Figure(plot_bars, dict(labels=["a"], values=[v], errors=None, title="t", ylabel="y"))  # noqa: E731
    report = Report("t", tables={"coll/m+1": Table([{"a": 1.0}]), "coll/m-1": Table([{"a": 2.0}])},
                    figures={names[0]: figure(1.0), names[1]: figure(2.0)})
    written = publish(report, tmp_path, LoggerConfig().without_wandb(), {}, run_name="t")
    assert len({p.name for p in written.values()}) == 2 and all(p.is_file() for p in written.values())
    assert len(list(tmp_path.glob("coll-m*.csv"))) == 2
    readme = (tmp_path / "README.md").read_text()
    assert len(set(re.findall(r"\]\(([^)]+\.png)\)", readme))) == 2


def test_a_report_folder_that_is_a_symlink_is_refused_and_nothing_is_written_through_it(runs, tmp_path, monkeypatch,
                                                                                        capsys):
    out, victim = tmp_path / "out", tmp_path / "victim"
    pair = [f"ref={runs / RUN.format(seed=0)}", f"target={runs / RUN.format(seed=1)}"]
    evaluate(out, monkeypatch, *pair)
    (folder,) = reports(out)
    shutil.rmtree(folder)
    victim.mkdir()
    (victim / "README.md").write_text("the victim's own")
    folder.symlink_to(victim, target_is_directory=True)
    message = refused("evaluate", eval_args(out, *pair), monkeypatch, capsys)
    assert "is a symbolic link" in message and str(folder) in message
    assert sorted(p.name for p in victim.iterdir()) == ["README.md"]
    assert (victim / "README.md").read_text() == "the victim's own"


def test_a_linked_folder_inside_a_report_that_leads_outside_is_refused(runs, tmp_path, monkeypatch, capsys):
    out, victim = tmp_path / "out", tmp_path / "victim"
    pair = [f"ref={runs / RUN.format(seed=0)}", f"target={runs / RUN.format(seed=1)}"]
    evaluate(out, monkeypatch, *pair)
    (folder,) = reports(out)
    victim.mkdir()
    (folder / "wandb").symlink_to(victim, target_is_directory=True)
    message = refused("evaluate", eval_args(out, *pair), monkeypatch, capsys)
    assert "outside out_dir" in message and not list(victim.iterdir())


def test_a_200_character_parent_folder_is_shortened_with_a_hash(runs, tmp_path, monkeypatch):
    """Labels are made of folder names: two of 200 characters made a report name past 255 bytes
    (Errno 36, after every result was stored)."""
    long = "p" * 200
    for name, seed in (("a", 0), ("b", 1)):
        shutil.copytree(runs / RUN.format(seed=seed), tmp_path / name / long / "seed0")
    out = tmp_path / "out"
    evaluate(out, monkeypatch, f"ref={tmp_path / 'a' / long / 'seed0'}", f"target={tmp_path / 'b' / long / 'seed0'}")
    (folder,) = reports(out)
    assert len(folder.name) <= SLUG_LIMIT + 9 and (folder / "pairs.csv").is_file()
    assert all(len(p.name) <= 255 for p in folder.iterdir())


def test_slug_shortens_long_names_with_a_hash_of_the_whole_name():
    a, b = "x" * 300 + "a", "x" * 300 + "b"
    assert len(slug(a)) == SLUG_LIMIT and slug(a) != slug(b) and slug(a) == slug(a)
    assert slug("short/name") == "short-name"
    assert os.sep not in slug("/" * 400 + "y" * 400)
