"""Automatic batch sizes, the k seed draws as one batch, and the working copies (folded, channels-last)."""
from dataclasses import replace

import pytest
import torch
from torch import nn

from stir.config.schema import ModelConfig
from stir.inversion import ExecutionConfig, InversionConfig, invert, invert_adversarial, invert_adversarial_draws, invert_draws
from stir.inversion.batching import CPU_BATCH, batch_for_memory, resolve_batch_size, working_model
from stir.models import build
from stir.models.synthetic import with_trained_batch_norms

CFG = InversionConfig(steps=8, record_steps=(4,))
RUN = ExecutionConfig(warn_below=0.0)


def _resnet(seed: int) -> nn.Module:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        m = build(ModelConfig("resnet18", width=4), 10, (0.5,) * 3, (0.25,) * 3)
    return with_trained_batch_norms(m, seed).eval()


def _images(n: int, seed: int = 0) -> torch.Tensor:
    low = torch.rand(n, 3, 4, 4, generator=torch.Generator().manual_seed(seed))
    return nn.functional.interpolate(low, size=32, mode="bilinear", align_corners=False)


def test_batch_for_memory_fits_the_budget_in_even_chunks():
    assert batch_for_memory(1.0, 1e6, 500) == 500  # everything fits: one batch
    assert batch_for_memory(100.0, 1600 * 125.0, 2500) == 1250  # room for 1600: two even chunks, not 1600 + 900
    assert batch_for_memory(1e9, 1.0, 10) == 1  # nothing fits: one image at a time
    size = batch_for_memory(3e6, 16 * 2**30, 5000)
    assert size * 3e6 * 1.25 <= 16 * 2**30 and 5000 / size <= 5000 / (16 * 2**30 / 3.75e6) + 1
    with pytest.raises(ValueError, match="must be > 0"):
        batch_for_memory(0.0, 1.0, 10)


def test_the_automatic_batch_on_cpu_and_an_explicit_one():
    x = torch.rand(300, 3, 8, 8)
    never = lambda x: pytest.fail("no memory probe on CPU")  # noqa: E731
    assert resolve_batch_size(ExecutionConfig(), x, never) == 100  # 300 rows: three even chunks of at most 128
    assert resolve_batch_size(ExecutionConfig(), x[:256], never) == CPU_BATCH
    assert resolve_batch_size(ExecutionConfig(), x[:5], never) == 5
    assert resolve_batch_size(ExecutionConfig(batch_size=7), x, never) == 7
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        ExecutionConfig(batch_size=0)
    with pytest.raises(ValueError, match="memory_gb must be > 0"):
        ExecutionConfig(memory_gb=-1.0)


@pytest.mark.parametrize("batch_size", [None, 7])
def test_draws_inverted_together_equal_each_draw_alone_bit_for_bit(batch_size):
    m, x = _resnet(0), _images(10)
    cfg, run = CFG, replace(RUN, batch_size=batch_size)
    together = invert_draws(m, [x, x[:6]], "penultimate", cfg, run=run)
    alone = [invert(m, x, "penultimate", cfg, run=run),
             invert(m, x[:6], "penultimate", replace(cfg, seed=cfg.seed + 1), run=run)]
    for t, a in zip(together, alone):
        assert torch.equal(t.x_prime, a.x_prime) and torch.equal(t.residual, a.residual)
        assert all(torch.equal(t.snapshots[s], a.snapshots[s]) for s in a.snapshots)
        assert t.evaluations == a.evaluations == a.x_prime.shape[0] * (cfg.num_steps + 1)
    m2 = _resnet(1)
    adv = invert_adversarial_draws(m, m2, [x, x], "penultimate", cfg=cfg, run=run)
    assert torch.equal(adv[1].x_prime, invert_adversarial(m, m2, x, "penultimate", cfg=replace(cfg, seed=1), run=run).x_prime)


def test_cached_draws_are_reused_and_missing_ones_computed(tmp_path):
    m, x = _resnet(0), _images(6)
    cfg, run = CFG, replace(RUN, cache_dir=str(tmp_path))
    first = invert(m, x, "penultimate", replace(cfg, seed=1), run=run)  # draw 1 only
    both = invert_draws(m, [x, x], "penultimate", cfg, run=run)
    assert both[1].from_cache and not both[0].from_cache
    assert torch.equal(both[1].x_prime, first.x_prime)
    assert len(list(tmp_path.glob("*.pt"))) == 2  # one entry per draw
    again = invert_draws(m, [x, x], "penultimate", cfg, run=run)
    assert all(r.from_cache for r in again) and torch.equal(again[0].x_prime, both[0].x_prime)


def test_folding_and_channels_last_change_the_inversion_only_by_rounding():
    m, x = _resnet(0), _images(8)
    plain, fast = replace(CFG, steps=20, fold_batch_norm=False), replace(CFG, steps=20, fold_batch_norm=True)
    a = invert(m, x, "penultimate", plain, run=replace(RUN, channels_last=False))
    b = invert(m, x, "penultimate", fast, run=replace(RUN, channels_last=True))
    # the descent is chaotic over many steps; over 20 the rounding stays at the rounding level
    assert (a.x_prime - b.x_prime).abs().max() < 1e-3
    assert (a.residual - b.residual).abs().max() < 1e-4
    assert working_model(m, "penultimate", False, False, channels_last=False) is m  # nothing to change: no copy
    copy = working_model(m, "penultimate", True, False, channels_last=True)
    assert copy is not m and not any(isinstance(mod, nn.BatchNorm2d) for mod in copy.modules())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_automatic_batches_fit_the_memory_limit():
    m, x = _resnet(0).cuda(), _images(512).cuda()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    limit = 0.25  # GiB: far less than 512 images need at once
    r = invert_draws(m, [x, x], "penultimate", CFG, run=replace(RUN, memory_gb=limit))
    assert torch.cuda.max_memory_allocated() - base <= limit * 2**30
    alone = invert(m, x, "penultimate", CFG, run=replace(RUN, batch_size=1024))
    assert (r[0].x_prime - alone.x_prime).abs().max() < 1e-3  # chunking changes nothing but rounding
    assert CFG.model_precision == "32"  # the faithful default stays in float32 on CUDA
