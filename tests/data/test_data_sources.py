"""Readers: CIFAR python layouts, image folders, tars; config checks and error messages."""
import pickle

import pytest
import torch

from stir.config.schema import DataConfig
from stir.data import DataNotFoundError, load_dataset, read_cifar_python, read_image_source
from stir.data import synthetic


def assert_same(read, written):
    assert torch.equal(read.train_images, written.train_images)
    assert torch.equal(read.train_labels, written.train_labels)
    assert torch.equal(read.test_images, written.test_images)
    assert torch.equal(read.test_labels, written.test_labels)
    assert read.classes == written.classes
    assert read.train_images.dtype == torch.uint8 and read.train_labels.dtype == torch.int64


def test_cifar10_python_layout_reads_back_exactly(tmp_path):
    written = synthetic.write_cifar10_python(tmp_path, n_train=23, n_test=7)
    assert_same(read_cifar_python("cifar10", tmp_path), written)
    # Through the config route, with no download allowed: the files are found under root.
    data = load_dataset(DataConfig(name="cifar10", root=str(tmp_path), download=False))
    assert_same(data, written)
    assert data.image_shape == (3, 32, 32) and data.num_classes == 10


def test_cifar10_pixel_layout_is_rows_of_chw(tmp_path):
    written = synthetic.write_cifar10_python(tmp_path, n_train=5, n_test=2)
    with open(tmp_path / "cifar-10-batches-py" / "data_batch_1", "rb") as f:
        entry = pickle.load(f, encoding="bytes")  # official files: bytes keys under encoding="bytes"
    row = torch.from_numpy(entry[b"data"][0])
    assert row.shape == (3072,) and row.dtype == torch.uint8
    img = written.train_images[0]
    assert torch.equal(row[:1024], img[0].flatten()) and torch.equal(row[2048:], img[2].flatten())
    assert entry[b"labels"][0] == int(written.train_labels[0])
    with open(tmp_path / "cifar-10-batches-py" / "batches.meta", "rb") as f:
        assert set(pickle.load(f, encoding="latin1")) >= {"label_names"}  # str keys for torchvision's reader


def test_cifar100_python_layout_reads_back_exactly(tmp_path):
    written = synthetic.write_cifar100_python(tmp_path, n_train=120, n_test=100)
    data = load_dataset(DataConfig(name="cifar100", root=str(tmp_path), download=False, num_classes=100))
    assert_same(data, written)
    with open(tmp_path / "cifar-100-python" / "train", "rb") as f:
        entry = pickle.load(f, encoding="bytes")
    assert entry[b"coarse_labels"] == [y // 5 for y in entry[b"fine_labels"]]


def test_image_folder_of_pngs(tmp_path):
    written = synthetic.write_image_folder(tmp_path / "tree", num_classes=3, n_train=9, n_test=6)
    assert_same(read_image_source(tmp_path / "tree"), written)
    assert written.classes == ("class000", "class001", "class002")


@pytest.mark.parametrize("name,prefix", [("d.tar.gz", ""), ("d.tar", "cifar10"), ("d.tgz", "")])
def test_image_tar(tmp_path, name, prefix):
    written = synthetic.write_image_tar(tmp_path / name, num_classes=4, n_train=12, n_test=4, prefix=prefix)
    assert_same(read_image_source(tmp_path / name), written)


def test_classes_sorted_by_name_give_labels(tmp_path):
    data = synthetic.make_dataset(3, 6, 3, classes=("b_cls", "a_cls", "c_cls"))  # label 0 = b_cls on disk
    synthetic.write_image_folder(tmp_path, data)
    read = read_image_source(tmp_path)
    assert read.classes == ("a_cls", "b_cls", "c_cls")
    # Images written as b_cls now carry label 1.
    b_images = data.train_images[data.train_labels == 0]
    assert torch.equal(read.train_images[read.train_labels == 1], b_images)


def test_source_class_count_mismatch(tmp_path):
    synthetic.write_image_folder(tmp_path / "tree", num_classes=3, n_train=6, n_test=3)
    cfg = DataConfig(source=str(tmp_path / "tree"), root=str(tmp_path / "cache"), num_classes=10)
    with pytest.raises(ValueError, match=r"has 3 classes .* data.num_classes=10"):
        load_dataset(cfg)


def test_cifar_class_count_mismatch(tmp_path):
    with pytest.raises(ValueError, match="set data.num_classes=100"):
        load_dataset(DataConfig(name="cifar100", root=str(tmp_path), download=False, num_classes=10))


def test_unknown_name(tmp_path):
    with pytest.raises(ValueError, match="cifar10, cifar100"):
        load_dataset(DataConfig(name="imagenet", root=str(tmp_path)))


def test_missing_data_without_download(tmp_path):
    cfg = DataConfig(name="cifar10", root=str(tmp_path / "nowhere"), download=False)
    with pytest.raises(DataNotFoundError) as err:
        load_dataset(cfg)
    msg = str(err.value)
    assert isinstance(err.value, FileNotFoundError)
    assert str(tmp_path / "nowhere") in msg and "data.source=PATH" in msg and "data.download=true" in msg


def test_missing_source(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_dataset(DataConfig(source=str(tmp_path / "absent.tar.gz"), root=str(tmp_path)))


def test_bad_trees(tmp_path):
    (tmp_path / "notar.gz").write_bytes(b"not a tar")
    with pytest.raises(ValueError, match="not a tar"):
        read_image_source(tmp_path / "notar.gz")
    synthetic.write_image_folder(tmp_path / "tree", num_classes=2, n_train=4, n_test=2)
    for f in (tmp_path / "tree" / "test").rglob("*.png"):
        f.unlink()
    with pytest.raises(ValueError, match="no test images"):
        read_image_source(tmp_path / "tree")
