"""Issue 34: results/index.md links each report folder (and the latest report of a name) to its README.md,
written atomically; the same index gives the same text."""
import re
from pathlib import Path

from stir import atomic
from stir.reporting import index as index_module
from stir.reporting.index import record_report, report_dir


def report(root: Path, name: str, settings: dict) -> Path:
    """A report folder as publish leaves it (README.md, record.json), recorded in the index."""
    folder = report_dir(root, name, settings)
    folder.mkdir(parents=True)
    (folder / "README.md").write_text(f"# {name}\n")
    (folder / "record.json").write_text('{"config": {}}')
    record_report(root, name, folder, settings)
    return folder


def links(text: str) -> list:
    return re.findall(r"\[([^\]]+)\]\(([^)]+)\)", text)


def test_index_md_links_every_report_folder_to_its_readme(tmp_path):
    first = report(tmp_path, "pair_a_vs_b", {"n": 10})
    second = report(tmp_path, "pair_a_vs_b", {"n": 20})
    other = report(tmp_path, "matrix_m", {"n": 10})
    text = (tmp_path / "index.md").read_text()
    found = links(text)
    targets = {target for _, target in found}
    for folder in (first, second, other):
        assert (folder.name, f"{folder.name}/README.md") in found  # the folder's name, linked
    assert "pair_a_vs_b/README.md" in targets and "matrix_m/README.md" in targets  # the latest of each name
    for _, target in found:  # relative links from index.md's folder, each to a file that exists
        assert not target.startswith("/") and (tmp_path / target).is_file(), target
    assert (tmp_path / "pair_a_vs_b/README.md").resolve() == (second / "README.md").resolve()
    assert "| folder | updated | n |" in text and "## pair_a_vs_b" in text


def test_index_md_is_written_atomically_and_the_same_index_gives_the_same_text(tmp_path, monkeypatch):
    written = []
    real = atomic.write_text
    monkeypatch.setattr(atomic, "write_text", lambda path, text, *a, **kw: (written.append(Path(path).name),
                                                                            real(path, text, *a, **kw))[1])
    folder = report(tmp_path, "pair_a_vs_b", {"n": 10})
    assert "index.md" in written
    before = (tmp_path / "index.md").read_text()
    index = index_module._read_index(tmp_path)
    assert index_module._markdown(index, tmp_path) == before  # nothing else goes into the text
    record_report(tmp_path, "pair_a_vs_b", folder, {"n": 10})  # the same report again: still one row
    again = (tmp_path / "index.md").read_text()
    assert again.count(f"[{folder.name}]") == 1
    assert re.sub(r"\d{4}-\d\d-\d\dT[\d:+]+", "T", again) == re.sub(r"\d{4}-\d\d-\d\dT[\d:+]+", "T", before)
    assert not list(tmp_path.glob(".index.md*")) and not list(tmp_path.glob("*.tmp"))  # no temp file left


def test_a_folder_removed_since_it_was_indexed_is_listed_without_a_dead_link(tmp_path):
    gone = report(tmp_path, "pair_a_vs_b", {"n": 10})
    kept = report(tmp_path, "pair_a_vs_b", {"n": 20})
    (gone / "README.md").unlink()
    record_report(tmp_path, "pair_a_vs_b", kept, {"n": 20})
    text = (tmp_path / "index.md").read_text()
    assert f"{gone.name} (no README.md)" in text
    for _, target in links(text):
        assert (tmp_path / target).is_file(), target


def test_the_latest_link_is_keyed_by_profile_and_never_mixes_two(tmp_path):
    """Issue 55: after a laptop run of a pair, results/pair_a_vs_b showed the laptop report to a user who
    had just run the cpu one. Each profile has its link; the default profile keeps the plain name."""
    from stir.experiments import latest_link

    assert latest_link("pair_a_vs_b", {"zoo": {"profile": "full"}}) == "pair_a_vs_b"
    assert latest_link("pair_a_vs_b", {"zoo": {"profile": "cpu"}}) == "pair_a_vs_b@cpu"
    made = {}
    for profile in ("cpu", "laptop", "cpu"):
        settings = {"zoo.profile": profile, "n": len(made)}
        folder = report_dir(tmp_path, "pair_a_vs_b", settings)
        folder.mkdir(parents=True)
        (folder / "README.md").write_text(f"# {profile}\n")
        record_report(tmp_path, "pair_a_vs_b", folder, settings, latest=latest_link("pair_a_vs_b", {"zoo": {"profile": profile}}))
        made[profile] = folder
    assert (tmp_path / "pair_a_vs_b@cpu" / "README.md").read_text() == "# cpu\n"  # the newest cpu report
    assert (tmp_path / "pair_a_vs_b@cpu").resolve() == made["cpu"].resolve()
    assert (tmp_path / "pair_a_vs_b@laptop" / "README.md").read_text() == "# laptop\n"
    assert not (tmp_path / "pair_a_vs_b").exists()
    text = (tmp_path / "index.md").read_text()
    assert "Latest: [pair_a_vs_b@cpu]" in text and "Latest: [pair_a_vs_b@laptop]" in text


def test_the_exact_link_stays_on_its_models_when_a_label_moves_to_others(tmp_path):
    """Issue 54: the latest link was keyed by labels (and profile), so a label another zoo file gives to
    other models took the link. The exact link carries 6 hex digits of the models' identities: the same
    labels on other models get another one, and the first still names the first models' report."""
    from stir.experiments import exact_link, latest_link

    config = {"zoo": {"profile": "laptop"}}
    first = exact_link("pair_a_vs_b", config, {"a": "1" * 64, "b": "2" * 64})
    other = exact_link("pair_a_vs_b", config, {"a": "1" * 64, "b": "3" * 64})
    assert first.startswith("pair_a_vs_b@laptop.") and len(first) == len("pair_a_vs_b@laptop.") + 6 and first != other
    assert first == exact_link("pair_a_vs_b", config, {"b": "2" * 64, "a": "1" * 64})  # order-free
    assert exact_link("pair_a_vs_b", config, {}) is None
    folders = {}
    for exact, text in ((first, "# first"), (other, "# other")):
        settings = {"zoo.profile": "laptop", "models": exact}
        folder = report_dir(tmp_path, "pair_a_vs_b", settings)
        folder.mkdir(parents=True)
        (folder / "README.md").write_text(text)
        record_report(tmp_path, "pair_a_vs_b", folder, settings, latest=latest_link("pair_a_vs_b", config), exact=exact)
        folders[exact] = folder
    assert (tmp_path / "pair_a_vs_b@laptop" / "README.md").read_text() == "# other"  # the label's link moved
    assert (tmp_path / first / "README.md").read_text() == "# first"  # the exact link did not
    assert (tmp_path / other).resolve() == folders[other].resolve()


def test_labels_in_any_script_keep_their_letters_in_file_names():
    from stir.reporting.report import SLUG_LIMIT, slug

    assert slug("pair_模型_vs_b") == "pair_模型_vs_b" and slug("pair_模型_vs_b") != slug("pair_网络_vs_b")
    assert slug("modèle/seed0") == "modèle-seed0"
    long = slug("模" * 300)
    assert len(long.encode()) <= SLUG_LIMIT and long != slug("模" * 301)
