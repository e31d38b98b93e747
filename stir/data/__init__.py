"""Data: CIFAR-10/100 or an image-folder source, held in memory as uint8 tensors.

Public API:
    load_dataset(cfg) -> Dataset               whole data set, CPU uint8 (N, 3, H, W) + int64 (N,)
    split_indices(n_train, holdout_size, train_size, data_seed) -> (holdout_idx, train_idx)
    StirDataModule(cfg, shuffle_seed=None)     LightningDataModule over the splits
    augment_batch(x, generator=None) / to_float(x)   batched, on-device augmentation and conversion
    stir.data.synthetic                        writers of tiny test data sets in the real layouts
"""
from stir.data.augment import Augment, augment_batch, crop_flip, sample_crop_flip, to_float
from stir.data.cache import cache_file, cached_dataset
from stir.data.datamodule import StirDataModule
from stir.data.dataset import DataNotFoundError, DataSourceError, Dataset
from stir.data.load import load_dataset
from stir.data.sources import CIFAR10_CLASSES, cifar_spec, load_cifar, read_cifar_python, read_image_source
from stir.data.splits import sample_indices, split_indices

__all__ = [
    "Augment",
    "CIFAR10_CLASSES",
    "DataNotFoundError",
    "DataSourceError",
    "Dataset",
    "StirDataModule",
    "augment_batch",
    "cache_file",
    "cached_dataset",
    "cifar_spec",
    "crop_flip",
    "load_cifar",
    "load_dataset",
    "read_cifar_python",
    "read_image_source",
    "sample_crop_flip",
    "sample_indices",
    "split_indices",
    "to_float",
]
