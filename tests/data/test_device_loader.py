"""The device-resident training loader: the DataLoader path's batches and augmentation distribution, seeded.

Runs on the CPU (the device path is meant for GPUs; its logic is device-independent). The
distribution test reads each augmented image's crop offset and flip back from a probe image whose
pixels encode their own coordinates, over thousands of draws of both paths.
"""
import pytest
import torch
from scipy.stats import chi2_contingency
from torch.utils.data import DataLoader, TensorDataset

from stir.data import Augment, augment_batch
from stir.data.datamodule import EpochShuffle
from stir.data.device_loader import DeviceBatches


def data(n=50, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 3, 8, 8), generator=g, dtype=torch.uint8), torch.randint(0, 10, (n,), generator=g)


def test_without_augmentation_it_yields_the_dataloader_paths_batches():
    images, labels = data()
    dl = DataLoader(TensorDataset(images, labels), batch_size=16, sampler=EpochShuffle(50, seed=3))
    dev = DeviceBatches(images, labels, 16, EpochShuffle(50, seed=3), "cpu", augment=None, seed=3)
    assert len(dev) == len(dl) == 4
    for epoch in (0, 1):
        dl.sampler.set_epoch(epoch)
        dev.sampler.set_epoch(epoch)
        for (a, ya), (b, yb) in zip(dl, dev):
            assert torch.equal(a, b) and torch.equal(ya, yb)


def test_batches_are_a_function_of_seed_and_epoch():
    images, labels = data()

    def epoch(seed, e):
        loader = DeviceBatches(images, labels, 16, EpochShuffle(50, seed), "cpu", Augment(), seed)
        loader.sampler.set_epoch(e)
        return [x for x, _ in loader]

    first = epoch(1, 2)
    assert all(torch.equal(a, b) for a, b in zip(first, epoch(1, 2)))  # reproducible, whatever ran before
    torch.manual_seed(123)  # the global RNG plays no part
    assert all(torch.equal(a, b) for a, b in zip(first, epoch(1, 2)))
    assert not all(torch.equal(a, b) for a, b in zip(first, epoch(1, 3)))  # another epoch
    assert not all(torch.equal(a, b) for a, b in zip(first, epoch(2, 2)))  # another seed


def probe(n: int) -> torch.Tensor:
    """(n, 3, 32, 32) uint8: channel 0 holds row + 1, channel 1 holds column + 1 (zero padding reads as 0)."""
    rows = torch.arange(1, 33, dtype=torch.uint8)
    img = torch.stack([rows[:, None].expand(32, 32), rows[None, :].expand(32, 32), torch.zeros(32, 32, dtype=torch.uint8)])
    return img.expand(n, 3, 32, 32).clone()


def read_params(out: torch.Tensor, padding: int) -> torch.Tensor:
    """(n,) cell index of (top, left, flip) recovered from augmented probes (centre pixels: never padding)."""
    v = out.long()
    top = v[:, 0, 16, 16] - 1 - 16 + padding
    flip = (v[:, 1, 16, 17] - v[:, 1, 16, 16]) < 0
    left = torch.where(flip, v[:, 1, 16, 16] - 1 - 15 + padding, v[:, 1, 16, 16] - 1 - 16 + padding)
    side = 2 * padding + 1
    assert int(top.min()) >= 0 and int(top.max()) < side and int(left.min()) >= 0 and int(left.max()) < side
    return (top * side + left) * 2 + flip.long()


@pytest.mark.parametrize("mode", ["zeros", "reflect"])
def test_device_augmentation_has_the_cpu_paths_distribution(mode):
    """Crop offsets and flips of both paths: the same joint distribution (chi-square), uniform marginals."""
    padding, n, batch = 4, 16200, 540
    augment = Augment(padding, True, mode)
    images, labels = probe(n), torch.zeros(n, dtype=torch.long)
    torch.manual_seed(0)  # the CPU path: the training step's augment_batch on the global RNG
    cpu = torch.cat([read_params(augment_batch(x, padding=padding, padding_mode=mode), padding)
                     for x in images.split(batch)])
    loader = DeviceBatches(images, labels, batch, EpochShuffle(n, 0), "cpu", augment, seed=0)
    device = torch.cat([read_params(x, padding) for x, _ in loader])
    cells = 2 * (2 * padding + 1) ** 2  # 162 (top, left, flip) combinations
    counts = torch.stack([torch.bincount(cpu, minlength=cells), torch.bincount(device, minlength=cells)])
    assert chi2_contingency(counts.numpy())[1] > 1e-3  # the two samples: one distribution
    expected = n / cells  # 100 per cell; each path's cells uniform within 5 sigma
    assert (counts.float() - expected).abs().max() < 5 * expected ** 0.5
    assert abs(float((device % 2).float().mean()) - 0.5) < 4 * (0.25 / n) ** 0.5


def test_the_training_split_moves_to_the_device_once():
    images, labels = data()
    loader = DeviceBatches(images, labels, 16, EpochShuffle(50, 0), "cpu", Augment(), 0)
    assert loader.images.device.type == "cpu" and len(list(loader)) == 4
    assert sum(len(y) for _, y in loader) == 50
