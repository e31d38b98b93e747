"""Decode-once cache: hits skip decoding, corrupt files are rebuilt, source changes start a new file."""
import logging
import os

import torch

from stir.config.schema import DataConfig
from stir.data import cache_file, load_dataset
from stir.data import synthetic

DECODE = "decoding"


def decodes(caplog):
    return sum(r.getMessage().startswith(DECODE) for r in caplog.records)


def test_cache_hit_skips_decoding(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="stir.data")
    src = tmp_path / "d.tar.gz"
    written = synthetic.write_image_tar(src, num_classes=3, n_train=9, n_test=3)
    cfg = DataConfig(source=str(src), root=str(tmp_path / "root"), num_classes=3)
    first = load_dataset(cfg)
    path = cache_file(cfg.root, src)
    assert path.is_file() and path.parent == tmp_path / "root" / "stir-cache" and path.name.startswith("d-")
    assert decodes(caplog) == 1
    mtime = path.stat().st_mtime_ns
    second = load_dataset(cfg)
    assert decodes(caplog) == 1  # no second decode
    assert path.stat().st_mtime_ns == mtime  # not rewritten
    assert torch.equal(second.train_images, written.train_images) and second.classes == first.classes
    assert not list(path.parent.glob("*.tmp*"))  # the temporary file was renamed, not left behind


def test_corrupt_cache_is_rebuilt(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="stir.data")
    src = tmp_path / "tree"
    written = synthetic.write_image_folder(src, num_classes=2, n_train=4, n_test=2)
    cfg = DataConfig(source=str(src), root=str(tmp_path / "root"), num_classes=2)
    load_dataset(cfg)
    path = cache_file(cfg.root, src)
    path.write_bytes(path.read_bytes()[:100])  # truncated
    data = load_dataset(cfg)
    assert torch.equal(data.test_images, written.test_images)
    assert any(r.levelno == logging.WARNING and "unreadable data cache" in r.getMessage() for r in caplog.records)
    assert decodes(caplog) == 2
    load_dataset(cfg)  # the rebuilt cache is valid again
    assert decodes(caplog) == 2


def test_changed_source_gets_new_cache(tmp_path):
    src = tmp_path / "d.tar"
    synthetic.write_image_tar(src, num_classes=2, n_train=4, n_test=2, seed=0)
    before = cache_file(tmp_path, src)
    written = synthetic.write_image_tar(src, num_classes=2, n_train=4, n_test=2, seed=1)
    os.utime(src, ns=(1, 1))  # make sure the mtime differs even on coarse clocks
    assert cache_file(tmp_path, src) != before
    cfg = DataConfig(source=str(src), root=str(tmp_path), num_classes=2)
    assert torch.equal(load_dataset(cfg).train_images, written.train_images)


def test_a_source_replaced_with_the_same_size_and_mtime_is_decoded_again(tmp_path, caplog):
    """Issue 54: the cache was keyed by path, size and mtime, so a tar replaced by another of the same
    size, its mtime set back, served the first tar's images. Keyed by content, it decodes the new one."""
    caplog.set_level(logging.INFO, logger="stir.data")
    first, second = tmp_path / "a.tar", tmp_path / "b.tar"
    synthetic.write_image_tar(first, num_classes=2, n_train=4, n_test=2, seed=0)
    replaced = synthetic.write_image_tar(second, num_classes=2, n_train=4, n_test=2, seed=1)
    size = max(first.stat().st_size, second.stat().st_size)
    for tar in (first, second):  # zero blocks after a tar's end are read as its end: same size, same images
        tar.write_bytes(tar.read_bytes() + bytes(size - tar.stat().st_size))
    src = tmp_path / "d.tar"
    src.write_bytes(first.read_bytes())
    os.utime(src, ns=(10**18, 10**18))
    cfg = DataConfig(source=str(src), root=str(tmp_path / "root"), num_classes=2)
    load_dataset(cfg)
    src.write_bytes(second.read_bytes())
    os.utime(src, ns=(10**18, 10**18))  # the size and the mtime of the first
    assert torch.equal(load_dataset(cfg).train_images, replaced.train_images)
    assert decodes(caplog) == 2
    src.write_bytes(first.read_bytes())  # the first content again: its cache, no third decode
    load_dataset(cfg)
    assert decodes(caplog) == 2
