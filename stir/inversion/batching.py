"""How many images an inversion optimises at once (``execution.batch_size``), and the working copies.

Every image of an inversion is optimised independently (eval-mode models, per-image steps), so the
batch size only trades memory for speed. ``batch_size = None`` (the default) picks it:

* CPU: at most ``CPU_BATCH`` (128) images, in even chunks (200 rows: two of 100). Per-image cost of an input-gradient step of a ResNet18 on this
  project's 2-core CPU is flat from 64 to 256 images and 1.6x higher at 640 (the activations leave
  the cache): docs/benchmarks/levers.md.
* CUDA: as many as fit in ``memory_gb`` (default: the device's free memory), from the memory one
  forward + input-gradient pass of a probe batch takes (``batch_for_memory``), so that the k seed
  draws of a direction (n x k images) run as one batch when they fit and in equal chunks otherwise.

The optimisation does not run on the caller's models but on ``working_model`` copies
(``stir.models.fold.InferenceCopy``): batch norm folded into the convolutions (``fold_batch_norm``)
and channels-last memory (``channels_last``); with ``compile`` the copy is cut at the tap and run
through ``torch.compile`` (opt-in: on CPU it adds about 5% to folding + channels-last and costs a
compilation per batch shape and mode). All change values only by floating-point rounding; the
residuals and everything reported are measured on the caller's models in full precision.
"""
from __future__ import annotations

import logging
import math
from typing import Callable, Sequence

import torch
from torch import Tensor, nn

from stir.inversion.config import ExecutionConfig
from stir.models.fold import CONVOLUTIONS, InferenceCopy, conv_bn_pairs
from stir.models.taps import split_reduction, tap_point
from stir.models.truncate import TapForward, compiled

log = logging.getLogger(__name__)

CPU_BATCH = 128  # images per optimisation batch on CPU (module docstring)
PROBE_BATCH = 16  # images of the CUDA memory probe
_HEADROOM = 1.25  # per-image memory is multiplied by this (allocator fragmentation, loop state)


def batch_for_memory(per_image_bytes: float, budget_bytes: float, rows: int) -> int:
    """The batch size that fits ``budget_bytes`` at ``per_image_bytes`` each, at most ``rows``, at least 1.

    Rows are spread evenly over the chunks that are needed (2,500 rows with room for 1,600 ->
    2 chunks of 1,250), so no chunk is a small remainder.
    """
    if per_image_bytes <= 0 or budget_bytes <= 0:
        raise ValueError(f"memory per image and budget must be > 0, got {per_image_bytes} and {budget_bytes}")
    fits = max(1, int(budget_bytes // (per_image_bytes * _HEADROOM)))
    if fits >= rows:
        return rows
    chunks = math.ceil(rows / fits)
    return math.ceil(rows / chunks)


def resolve_batch_size(run: ExecutionConfig, images: Tensor, probe: Callable[[Tensor], Tensor]) -> int:
    """``run.batch_size``, or the automatic choice for ``images`` (N, c, h, w) on their device.

    ``probe(x)`` runs the optimisation's objective on a batch x and returns its (b,) losses; on
    CUDA it is run once on ``PROBE_BATCH`` images to measure the memory one image takes.
    """
    rows = images.shape[0]
    if run.batch_size is not None:
        return run.batch_size
    if images.device.type != "cuda":
        return math.ceil(rows / math.ceil(rows / CPU_BATCH))  # at most CPU_BATCH, in even chunks
    device = images.device
    free, _ = torch.cuda.mem_get_info(device)
    base = torch.cuda.memory_allocated(device)
    budget = (run.memory_gb * 2**30 - base) if run.memory_gb is not None else free * 0.9
    torch.cuda.reset_peak_memory_stats(device)
    x = images[:PROBE_BATCH].detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(probe(x).sum(), x)
    per_image = (torch.cuda.max_memory_allocated(device) - base) / x.shape[0]
    del x, grad
    size = batch_for_memory(per_image, budget, rows)
    log.info("inversion batch size %d of %d images (%.1f MiB each, budget %.1f GiB)", size, rows,
             per_image / 2**20, budget / 2**30)
    return size


def working_model(model: nn.Module, tap: str, fold_batch_norm: bool, compile: bool, channels_last: bool) -> nn.Module:
    """The model the optimisation differentiates: a copy with batch norm folded, channels-last, and
    with ``compile`` cut at ``tap`` and compiled (``stir.models.truncate``); see the module doc.

    ``model`` itself when nothing applies (no foldable pair, no convolution, no compile). The module
    read by ``tap`` is never folded away. A model that cannot be cut for compiling runs eagerly.
    """
    point = tap_point(model, split_reduction(tap)[0])
    keep: Sequence[str] = (point.module,) if point.module is not None else ()
    pairs = conv_bn_pairs(model, keep) if fold_batch_norm else []
    convolutional = any(isinstance(m, CONVOLUTIONS) for m in model.modules())
    work = model
    if pairs or (channels_last and convolutional):
        work = InferenceCopy(model, fold=bool(pairs), channels_last=channels_last, keep=keep, pairs=pairs).module
    if compile:
        try:
            work = compiled(TapForward(work, tap))
        except TypeError as exc:
            log.warning("execution.compile: %s; running eagerly", exc)
    return work
