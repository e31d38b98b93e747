"""Smoke test on the real CIFAR-10 JPEG archive (slow: decodes 60k images on the first run)."""
from pathlib import Path

import pytest

from stir.config.schema import DataConfig
from stir.data import load_dataset

REAL = Path("/work/shared/data/cifar10-jpg.tar.gz")


@pytest.mark.slow
@pytest.mark.skipif(not REAL.is_file(), reason=f"{REAL} absent")
def test_real_cifar10_jpg_tar(tmp_path):
    data = load_dataset(DataConfig(source=str(REAL), root=str(tmp_path), download=False))
    assert data.train_images.shape == (50000, 3, 32, 32) and data.test_images.shape == (10000, 3, 32, 32)
    assert data.num_classes == 10 and data.classes[0] == "airplane" and data.classes[-1] == "truck"
    assert data.train_labels.bincount().tolist() == [5000] * 10
