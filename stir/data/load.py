"""``load_dataset(cfg)``: the one entry point from a :class:`DataConfig` to an in-memory :class:`Dataset`."""
from __future__ import annotations

import logging

from stir.config.schema import DataConfig
from stir.data.cache import cached_dataset
from stir.data.dataset import Dataset
from stir.data.sources import cifar_spec, load_cifar, read_image_source, source_kind

log = logging.getLogger(__name__)


def load_dataset(cfg: DataConfig) -> Dataset:
    """Load the whole data set named by ``cfg`` into memory (CPU, uint8 images, int64 labels).

    * ``cfg.source`` set: decode that image folder / tar(.gz) once, cached under ``cfg.root``; its
      class count must equal ``cfg.num_classes``.
    * otherwise: CIFAR-10/100 python pickles under ``cfg.root``, downloaded by torchvision first if
      missing and ``cfg.download``; ``cfg.num_classes`` must match the data set.

    Raises:
        ValueError: unknown ``cfg.name``, class-count mismatch, malformed files.
        DataNotFoundError: (a FileNotFoundError) nothing to read and nothing to download.
    """
    spec = cifar_spec(cfg.name)  # an unknown name fails first, whatever the source
    if cfg.source is not None:
        source_kind(cfg.source)  # absent / not an archive: say so before hashing it for the cache
        data = cached_dataset(cfg.source, cfg.root, lambda: read_image_source(cfg.source))
        if data.num_classes != cfg.num_classes:
            raise ValueError(
                f"data.source={cfg.source!r} has {data.num_classes} classes ({_names(data.classes)}) but "
                f"data.num_classes={cfg.num_classes}; set data.num_classes={data.num_classes} or use another source"
            )
        return data
    if cfg.num_classes != spec.num_classes:
        raise ValueError(
            f"data.name={cfg.name!r} has {spec.num_classes} classes but data.num_classes={cfg.num_classes}; "
            f"set data.num_classes={spec.num_classes}"
        )
    return load_cifar(cfg.name, cfg.root, cfg.download)


def _names(classes: tuple[str, ...], limit: int = 12) -> str:
    shown = ", ".join(classes[:limit])
    return shown + (f", ... ({len(classes)} in all)" if len(classes) > limit else "")
