"""``StirDataModule``: the in-memory data set, split and served as uint8 batches to Lightning.

Batches are ``(images (b, 3, H, W) uint8, labels (b,) int64)`` on the CPU; Lightning moves them to
the device, where the LightningModule augments (:func:`stir.data.augment_batch`, training only) and
converts (:func:`stir.data.to_float`). Keeping uint8 until then moves 4x fewer bytes to the device.
With ``data.device_resident`` the training split lives on the device instead and its batches come
out of :class:`stir.data.device_loader.DeviceBatches` already augmented (the system then does not
augment them again).

Under DDP (W processes) ``data.batch_size`` stays the global batch: each process loads
``batch_size / W`` images per step, rank r positions r, r + W, ... of the same (seed, epoch)
permutation (``EpochShards``), so the union of the ranks' i-th batches is the one-process run's i-th
batch. (Left to Lightning, ``EpochShuffle`` would be wrapped in a ``DistributedSamplerWrapper`` with
shuffling on, which permutes the permutation again with its own seed: other batches than one
process's.) Validation and test batches are ``(images, labels, rows)``: ``rows``
are the images' indices in the split, -1 for the padding that keeps every rank's batch count equal
(``EvalShards``), so the system counts every image once and draws robust subsets by index.
"""
from __future__ import annotations

import logging
from typing import Iterator, Optional

import lightning as L
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset as TorchDataset, DistributedSampler, Sampler, TensorDataset

from stir.config.schema import DataConfig
from stir.data.augment import Augment
from stir.data.dataset import Dataset
from stir.data.device_loader import DeviceBatches
from stir.data.load import load_dataset
from stir.data.splits import sample_indices, split_indices

log = logging.getLogger(__name__)

SPLIT_NAMES = ("train", "holdout", "test")
TEST_ORDER_SEED = 0  # the one fixed order of the test split (see setup)


class EpochShuffle(Sampler[int]):
    """A random permutation of ``range(n)`` per epoch, drawn from ``(seed, epoch)`` only.

    Unlike a DataLoader generator that advances from epoch to epoch, nothing here depends on how
    many epochs this process has already run: a resumed run continues the uninterrupted order.
    """

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed, self.epoch = n, int(seed), 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def permutation(self) -> Tensor:
        """(n,) int64: this epoch's order."""
        return torch.randperm(self.n, generator=torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch))

    def __iter__(self) -> Iterator[int]:
        return iter(self.permutation().tolist())

    def __len__(self) -> int:
        return self.n


class EpochShards(DistributedSampler):
    """Rank ``rank``'s share of ``EpochShuffle(n, seed)``: positions rank, rank + W, ... of the epoch's order.

    Like torch's DistributedSampler the order is padded to a multiple of W with its own first
    positions (every rank runs as many steps; when W does not divide n a few images come twice in an
    epoch). A DistributedSampler subclass, so Lightning uses it as it is (it would otherwise wrap
    EpochShuffle and shuffle the positions again); Lightning calls ``set_epoch`` before every epoch.
    """

    def __init__(self, n: int, seed: int, num_replicas: int, rank: int) -> None:
        super().__init__(range(n), num_replicas=num_replicas, rank=rank, shuffle=False, drop_last=False)
        self.order = EpochShuffle(n, seed)

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        self.order.set_epoch(epoch)

    def __iter__(self) -> Iterator[int]:
        order = self.order.permutation().tolist()
        order += order[: self.total_size - len(order)]
        return iter(order[self.rank:self.total_size:self.num_replicas])


class EvalShards(DistributedSampler):
    """Rank ``rank``'s share of an evaluation split: positions rank, rank + W, ... of ``range(total)``.

    ``total`` is n rounded up to a multiple of W, as in torch's DistributedSampler (every rank then
    runs the same number of batches: validation steps inside ``fit`` run through the DDP wrapper,
    whose forward is a collective). Positions >= n are padding, which ``EvalRows`` marks with row -1
    instead of repeating the first images (DistributedSampler's padding counts them twice). A
    DistributedSampler subclass, so Lightning uses it as it is instead of wrapping it.
    """

    def __init__(self, n: int, num_replicas: int, rank: int) -> None:
        super().__init__(range(n), num_replicas=num_replicas, rank=rank, shuffle=False, drop_last=False)

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.rank, self.total_size, self.num_replicas))


class EvalRows(TorchDataset):
    """Position p of an evaluation split -> ``(image, label, row)``: row p, or -1 for padding (p >= n)."""

    def __init__(self, images: Tensor, labels: Tensor) -> None:
        self.images, self.labels = images, labels  # (n, 3, H, W) uint8, (n,) int64

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, p: int) -> tuple[Tensor, Tensor, int]:
        n = len(self.labels)
        return self.images[p % n], self.labels[p % n], p if p < n else -1


class StirDataModule(L.LightningDataModule):
    """CIFAR (or an image-folder source) held in memory, with a fixed holdout and nested training subsets.

    Args:
        cfg: the data configuration.
        shuffle_seed: seeds the training loader's shuffling generator. None: ``torch.initial_seed()``
            when the loader is built, i.e. the seed ``lightning.seed_everything`` set, so the batch
            order follows the run's seed while ``cfg.data_seed`` fixes only which images are used.
            Under DDP every rank draws the same permutation and takes every W-th position of it
            (``EpochShards``; see the module docstring).
    """

    def __init__(self, cfg: DataConfig, shuffle_seed: Optional[int] = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.shuffle_seed = shuffle_seed
        self._data: Optional[Dataset] = None  # whole data set, kept only between prepare_data and setup
        self._splits: Optional[dict[str, tuple[Tensor, Tensor]]] = None  # split -> (images, labels)
        self._train_idx: Optional[Tensor] = None
        self._holdout_idx: Optional[Tensor] = None
        self._classes: tuple[str, ...] = ()

    # ---------------------------------------------------------------- Lightning hooks
    def prepare_data(self) -> None:
        """Download / decode and cache once (Lightning calls this on one process per node)."""
        if self._splits is None and self._data is None:
            self._data = load_dataset(self.cfg)

    def setup(self, stage: Optional[str] = None) -> None:
        """Load (from the cache when there is one) and split; later calls do nothing."""
        if self._splits is not None:
            return
        data = self._data if self._data is not None else load_dataset(self.cfg)
        self._data = None  # the splits below are copies: drop the full training tensor (~150 MB)
        holdout_idx, train_idx = split_indices(
            data.train_images.shape[0], self.cfg.holdout_size, self.cfg.train_size, self.cfg.data_seed
        )
        self._holdout_idx, self._train_idx, self._classes = holdout_idx, train_idx, data.classes
        # The test split in one fixed shuffled order: an image folder lists its classes one after
        # another, so its first k images (the robust-accuracy subset) would all be airplanes.
        test_order = torch.randperm(len(data.test_labels), generator=torch.Generator().manual_seed(TEST_ORDER_SEED))
        self._splits = {
            "train": (data.train_images[train_idx], data.train_labels[train_idx]),  # (n_train, 3, H, W)
            "holdout": (data.train_images[holdout_idx], data.train_labels[holdout_idx]),
            "test": (data.test_images[test_order], data.test_labels[test_order]),
        }
        log.info("data %s: %d train (seed %d), %d holdout, %d test images, %d classes", self.cfg.name,
                 len(train_idx), self.cfg.data_seed, len(holdout_idx), len(data.test_labels), len(data.classes))

    def train_dataloader(self) -> DataLoader | DeviceBatches:
        seed = self.shuffle_seed if self.shuffle_seed is not None else torch.initial_seed()
        images, labels = self.split_tensors("train")
        # The order of epoch e is a function of (seed, e) alone (Lightning calls set_epoch before each
        # epoch), so a run resumed at epoch e sees the batches the uninterrupted run would have seen.
        if self.cfg.device_resident:
            return DeviceBatches(images, labels, self.cfg.batch_size, EpochShuffle(len(labels), seed),
                                 self.device, Augment.of(self.cfg), seed)
        world, rank = self._world()
        sampler = EpochShards(len(labels), seed, world, rank) if world > 1 else EpochShuffle(len(labels), seed)
        return DataLoader(TensorDataset(images, labels), batch_size=self.process_batch_size,
                          sampler=sampler, num_workers=0,
                          pin_memory=torch.cuda.is_available())

    def val_dataloader(self) -> DataLoader:
        return self._loader("holdout", self.cfg.eval_batch_size, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", self.cfg.eval_batch_size, shuffle=False)

    def _loader(self, split: str, batch_size: int, shuffle: bool, generator: Optional[torch.Generator] = None) -> DataLoader:
        """Batches ``(images, labels, rows)`` of a split in its fixed order; this rank's ``EvalShards`` under DDP."""
        images, labels = self.split_tensors(split)
        world, rank = self._world()
        sampler = EvalShards(len(labels), world, rank) if world > 1 else None
        # num_workers=0: the data is already decoded in memory; worker processes would only copy it.
        return DataLoader(EvalRows(images, labels), batch_size=batch_size, shuffle=shuffle if sampler is None else None,
                          sampler=sampler, generator=generator, num_workers=0, pin_memory=torch.cuda.is_available())

    def _world(self) -> tuple[int, int]:
        """(processes, this one's global rank) of the Trainer (1, 0 outside one)."""
        trainer = getattr(self, "trainer", None)
        return (trainer.world_size, trainer.global_rank) if trainer is not None else (1, 0)

    @property
    def process_batch_size(self) -> int:
        """The training batch of this process: ``data.batch_size`` (global) / the Trainer's process count."""
        world, _ = self._world()
        if self.cfg.batch_size % world:
            raise ValueError(f"data.batch_size={self.cfg.batch_size} (the global batch) is not a multiple of the "
                             f"{world} training processes; give a multiple of {world}")
        return self.cfg.batch_size // world

    # ---------------------------------------------------------------- for evaluation code
    def split_tensors(self, split: str) -> tuple[Tensor, Tensor]:
        """(images (n, 3, H, W) uint8, labels (n,) int64) of 'train' (the subset), 'holdout' or 'test'."""
        splits = self._require_setup()
        if split not in splits:
            raise ValueError(f"unknown split {split!r}; choose one of: {', '.join(SPLIT_NAMES)}")
        return splits[split]

    def sample_images(self, split: str, n: int, seed: int) -> tuple[Tensor, Tensor]:
        """``n`` distinct images of a split, chosen by ``seed`` (a smaller ``n`` gives a prefix).

        Returns (images (n, 3, H, W) uint8, labels (n,) int64) on the CPU. ValueError if ``n`` is
        larger than the split.
        """
        images, labels = self.split_tensors(split)
        try:
            idx = sample_indices(n, images.shape[0], seed)
        except ValueError:
            raise ValueError(f"cannot sample n={n} images from the {split!r} split of {images.shape[0]} images "
                             f"(data.holdout_size={self.cfg.holdout_size}, data.train_size={self.cfg.train_size})") from None
        return images[idx], labels[idx]

    # ---------------------------------------------------------------- properties
    @property
    def device(self) -> torch.device:
        """The training device (the Trainer's root device; the CPU outside a Trainer)."""
        trainer = getattr(self, "trainer", None)
        return trainer.strategy.root_device if trainer is not None else torch.device("cpu")

    def _require_setup(self) -> dict[str, tuple[Tensor, Tensor]]:
        if self._splits is None:
            raise RuntimeError("StirDataModule.setup() has not run yet")
        return self._splits

    @property
    def num_classes(self) -> int:
        self._require_setup()
        return len(self._classes)

    @property
    def classes(self) -> tuple[str, ...]:
        self._require_setup()
        return self._classes

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(3, H, W)."""
        return tuple(self._require_setup()["test"][0].shape[1:])  # type: ignore[return-value]

    @property
    def train_indices(self) -> Tensor:
        """(train_size,) int64: the training subset's indices into the full training set (provenance)."""
        self._require_setup()
        assert self._train_idx is not None
        return self._train_idx

    @property
    def holdout_indices(self) -> Tensor:
        """(holdout_size,) int64: the holdout's indices into the full training set."""
        self._require_setup()
        assert self._holdout_idx is not None
        return self._holdout_idx
