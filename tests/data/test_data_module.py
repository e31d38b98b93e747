"""StirDataModule on tiny synthetic CIFAR-10 files: setup, loaders, properties, sampling."""
import pytest
import torch

from stir.config.schema import DataConfig
from stir.data import StirDataModule, split_indices
from stir.data import synthetic
from stir.data.datamodule import TEST_ORDER_SEED


@pytest.fixture
def cfg(tmp_path):
    synthetic.write_cifar10_python(tmp_path, n_train=60, n_test=20)
    return DataConfig(root=str(tmp_path), download=False, holdout_size=10, train_size=30, batch_size=8,
                      eval_batch_size=7, data_seed=4)


def test_setup_and_loaders(cfg):
    dm = StirDataModule(cfg, shuffle_seed=0)
    with pytest.raises(RuntimeError, match="setup"):
        dm.num_classes
    dm.prepare_data()
    dm.setup("fit")
    dm.setup("test")  # idempotent
    assert dm.num_classes == 10 and dm.image_shape == (3, 32, 32) and dm.classes[0] == "airplane"
    holdout, train = split_indices(60, 10, 30, 4)
    assert torch.equal(dm.train_indices, train) and torch.equal(dm.holdout_indices, holdout)
    written = synthetic.make_dataset(10, 60, 20)
    for loader, size, bs, fields in ((dm.train_dataloader(), 30, 8, 2), (dm.val_dataloader(), 10, 7, 3),
                                     (dm.test_dataloader(), 20, 7, 3)):
        x, y, *rows = next(iter(loader))  # evaluation batches also carry their rows in the split
        assert len(rows) == fields - 2 and all(torch.equal(r, torch.arange(bs)) for r in rows)
        assert x.shape == (bs, 3, 32, 32) and x.dtype == torch.uint8 and y.dtype == torch.int64
        assert len(loader.dataset) == size
    x, y = dm.split_tensors("train")
    assert torch.equal(x, written.train_images[train]) and torch.equal(y, written.train_labels[train])
    # The seeded shuffle repeats for the same seed.
    again = StirDataModule(cfg, shuffle_seed=0)
    again.setup()
    assert torch.equal(next(iter(dm.train_dataloader()))[1], next(iter(again.train_dataloader()))[1])


def test_sample_images(cfg):
    dm = StirDataModule(cfg)
    dm.setup()
    a, la = dm.sample_images("test", 5, seed=1)
    b, lb = dm.sample_images("test", 5, seed=1)
    c, _ = dm.sample_images("test", 5, seed=2)
    assert a.shape == (5, 3, 32, 32) and a.dtype == torch.uint8 and torch.equal(a, b) and torch.equal(la, lb)
    assert not torch.equal(a, c)
    assert dm.sample_images("holdout", 10, seed=0)[0].shape[0] == 10
    with pytest.raises(ValueError, match="n=31 .* 'train' split of 30"):
        dm.sample_images("train", 31, seed=0)
    with pytest.raises(ValueError, match="unknown split"):
        dm.sample_images("val", 1, seed=0)


def test_first_test_images_mix_classes_even_when_the_source_lists_them_by_class(tmp_path):
    # Robust test accuracy uses the first robust_test_size test images; an image folder (like the
    # CIFAR-10 JPEG archive) lists test/airplane/* first, so unshuffled they would be one class.
    written = synthetic.write_image_folder(tmp_path / "folder", num_classes=10, n_train=40, n_test=100)
    assert written.test_labels[:10].unique().numel() == 1  # the source order: by class
    cfg = DataConfig(source=str(tmp_path / "folder"), root=str(tmp_path / "cache"), holdout_size=10, eval_batch_size=50)
    dm = StirDataModule(cfg)
    dm.setup()
    images, labels = dm.split_tensors("test")
    assert labels[:20].unique().numel() >= 6
    perm = torch.randperm(100, generator=torch.Generator().manual_seed(TEST_ORDER_SEED))
    assert torch.equal(images, written.test_images[perm]) and torch.equal(labels, written.test_labels[perm])
    again = StirDataModule(cfg)
    again.setup()
    assert torch.equal(again.split_tensors("test")[1], labels)  # the same fixed order every time
    first = next(iter(dm.test_dataloader()))[1]
    assert torch.equal(first, labels[:50])


def test_the_training_order_of_an_epoch_depends_on_seed_and_epoch_only():
    """A resumed run builds a fresh loader: epoch e must still come in the uninterrupted run's order."""
    from stir.data.datamodule import EpochShuffle

    running = EpochShuffle(50, seed=3)
    orders = []
    for epoch in range(3):  # one sampler through three epochs, as an uninterrupted run
        running.set_epoch(epoch)
        orders.append(list(running))
    fresh = EpochShuffle(50, seed=3)  # a new process resuming at epoch 2
    fresh.set_epoch(2)
    assert list(fresh) == orders[2] and orders[0] != orders[1] != orders[2]
    assert sorted(orders[1]) == list(range(50))
    other = EpochShuffle(50, seed=4)
    other.set_epoch(2)
    assert list(other) != orders[2]


def test_ddp_shards_of_an_epoch_together_are_the_one_process_batches():
    """EpochShards: rank r's i-th batch of b / W images, joined over the ranks, is one process's i-th batch of b."""
    from stir.data.datamodule import EpochShards, EpochShuffle

    n, world, batch = 23, 3, 6
    one = EpochShuffle(n, seed=5)
    ranks = [EpochShards(n, 5, world, r) for r in range(world)]
    for epoch in (0, 4):
        one.set_epoch(epoch)
        for shard in ranks:
            shard.set_epoch(epoch)
        order = one.permutation().tolist()
        shares = [list(shard) for shard in ranks]
        assert all(len(s) == 8 for s in shares)  # 23 padded to 24: every rank as many steps
        for i in range(0, 8, batch // world):
            joined = sorted(x for s in shares for x in s[i:i + batch // world])
            start = i * world
            expected = (order + order[:1])[start:start + batch]  # the padding repeats the first position
            assert joined == sorted(expected), (epoch, i)


def test_ddp_evaluation_shards_count_each_row_once():
    """EvalShards + EvalRows: every row of the split on exactly one rank, the padding marked -1 (not a repeat)."""
    from stir.data.datamodule import EvalRows, EvalShards

    images, labels = torch.zeros(5, 3, 2, 2, dtype=torch.uint8), torch.arange(5)
    rows = EvalRows(images, labels)
    seen = [[rows[p][2] for p in EvalShards(5, 2, r)] for r in range(2)]
    assert [len(s) for s in seen] == [3, 3]
    assert sorted(r for s in seen for r in s) == [-1, 0, 1, 2, 3, 4]
