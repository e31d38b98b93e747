"""glibc malloc keeps freed memory (``stir.allocator``): applied once, harmless to repeat."""
import ctypes.util
import platform

import pytest
import torch

from stir import allocator


@pytest.mark.skipif(platform.system() != "Linux" or "libc" not in (ctypes.util.find_library("c") or ""),
                    reason="glibc only")
def test_the_setting_applies_once_and_allocations_still_work():
    assert allocator.keep_freed_cpu_memory() is True
    assert allocator.keep_freed_cpu_memory() is True  # idempotent
    for _ in range(3):  # blocks above the old 128 KiB mmap threshold come from the heap and are reused
        x = torch.empty(8 << 20, dtype=torch.uint8).fill_(1)
        assert int(x.sum()) == 8 << 20
        del x
