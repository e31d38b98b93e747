"""The fixed holdout split and nested training subsets, both drawn from one seeded permutation."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor


def split_indices(
    n_train: int, holdout_size: int, train_size: Optional[int], data_seed: int
) -> tuple[Tensor, Tensor]:
    """Split ``range(n_train)`` into a holdout set and a training subset.

    One permutation of the training indices from a ``torch.Generator`` seeded with ``data_seed``:
    holdout = its first ``holdout_size`` entries, training pool = the rest in permutation order,
    training subset = the pool's first ``train_size`` entries (all of it when None). So, for one
    seed, the holdout never changes with ``train_size`` and smaller subsets are prefixes of larger
    ones (5k within 10k within ... 45k).

    Returns:
        (holdout_idx (holdout_size,), train_idx (train_size,)), int64, in permutation order.

    Raises:
        ValueError: ``holdout_size`` not in [0, n_train), ``train_size`` not in [1, n_train - holdout_size].
    """
    if not 0 <= holdout_size < n_train:
        raise ValueError(f"data.holdout_size={holdout_size} must be >= 0 and smaller than the {n_train} training images")
    pool = n_train - holdout_size
    if train_size is not None and not 1 <= train_size <= pool:
        raise ValueError(
            f"data.train_size={train_size} must be in [1, {pool}]: {n_train} training images minus "
            f"data.holdout_size={holdout_size} leave {pool}"
        )
    generator = torch.Generator().manual_seed(data_seed)  # CPU generator: same draws on every machine
    perm = torch.randperm(n_train, generator=generator)  # (n_train,) int64
    holdout = perm[:holdout_size].clone()
    train = perm[holdout_size:][: pool if train_size is None else train_size].clone()
    return holdout, train


def sample_indices(n: int, size: int, seed: int) -> Tensor:
    """``n`` distinct indices into ``range(size)`` chosen by ``seed``; those for a smaller ``n`` are a prefix.

    Raises ValueError when ``n`` exceeds ``size``.
    """
    if not 0 <= n <= size:
        raise ValueError(f"cannot sample n={n} images from a split of {size}")
    return torch.randperm(size, generator=torch.Generator().manual_seed(seed))[:n].clone()
