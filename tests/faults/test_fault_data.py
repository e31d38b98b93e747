"""Item 5 of issue 21: a corrupt data.source is named with its fix before anything is written, and
restoring it lets the same command train (no leftover folder refused as "a different recipe")."""
import pytest

from faultkit import RUN, exit_of, truncate
from conftest import run_entry_point, tiny_train_args
from stir.data import DataSourceError, synthetic


def args(tmp_path, source):
    return tiny_train_args(tmp_path / "cache", tmp_path / "runs", f"data.source={source}", "data.holdout_size=20",
                           "data.batch_size=20", "trainer.robust_val_every_n_epochs=0", "trainer.robust_test_size=10")


@pytest.fixture
def archive(tmp_path):
    path = tmp_path / "images.tar.gz"
    synthetic.write_image_tar(path, n_train=40, n_test=20, seed=0, fmt="jpg")
    return path


def test_a_truncated_archive_is_named_and_leaves_no_run_folder_then_trains_once_restored(archive, tmp_path, monkeypatch):
    good = archive.read_bytes()
    truncate(archive)
    with pytest.raises(DataSourceError, match=rf"data.source='{archive}': the archive cannot be read .*EOFError.*copy "
                                              r"it again"):
        run_entry_point("train", args(tmp_path, archive), monkeypatch)
    assert not (tmp_path / "runs").exists()  # no folder, recipe or log of the bad archive
    code, stderr = exit_of("train", args(tmp_path, archive), monkeypatch)
    assert code == 2 and stderr.count("error:") == 1 and str(archive) in stderr and "Traceback" not in stderr

    archive.write_bytes(good)  # restored at the same path: the same command trains
    run_entry_point("train", args(tmp_path, archive), monkeypatch)
    assert (tmp_path / "runs" / RUN.format(seed=0) / "metrics.json").is_file()


@pytest.mark.parametrize("damage", ["garbage", "half"])
def test_an_image_that_does_not_decode_is_named(damage, tmp_path, monkeypatch):
    source = tmp_path / "images"
    synthetic.write_image_folder(source, n_train=40, n_test=20, seed=0, fmt="jpg")
    bad = sorted((source / "train").rglob("*.jpg"))[5]
    if damage == "garbage":
        bad.write_bytes(b"this is not a JPEG")
    else:
        truncate(bad)
    rel = bad.relative_to(source)
    with pytest.raises(DataSourceError, match=rf"image {rel} does not decode .*replace it with a good copy or delete it"):
        run_entry_point("train", args(tmp_path, source), monkeypatch)
    assert not (tmp_path / "runs").exists()


def test_a_leftover_folder_of_a_bad_source_with_no_training_is_moved_aside(archive, tmp_path, monkeypatch, capfd):
    """Folders that earlier versions left behind (config, recipe with the bad archive's hash, log; no
    checkpoint) no longer block the restored source."""
    from stir.config.store import compose_train
    from stir.training.runs import RunFolder, recipe_dir

    from conftest import REPO

    good = archive.read_bytes()
    truncate(archive)
    bad = compose_train(REPO / "configs", args(tmp_path, archive))
    RunFolder(recipe_dir(bad)).prepare(bad)  # what the old train.py wrote before reading the data
    (recipe_dir(bad) / "train.log").write_text("EOFError\n")
    archive.write_bytes(good)
    capfd.readouterr()
    run_entry_point("train", args(tmp_path, archive), monkeypatch)
    assert "holds no training" in "".join(capfd.readouterr())
    run = tmp_path / "runs" / RUN.format(seed=0)
    assert (run / "metrics.json").is_file() and list(run.parent.glob("seed0.replaced-*/train.log"))


def test_a_folder_of_another_recipe_that_holds_training_is_still_refused(archive, tmp_path, monkeypatch):
    run_entry_point("train", args(tmp_path, archive), monkeypatch)
    synthetic.write_image_tar(archive, n_train=40, n_test=20, seed=1, fmt="jpg")  # other content, same path
    with pytest.raises(ValueError, match=r"finished run of a different recipe \(data.source"):
        run_entry_point("train", args(tmp_path, archive), monkeypatch)
