"""How close a faithful inversion step runs to this CPU's arithmetic rate (issue 12, target 1).

    python bench/bench_roofline.py --threads 2            # widths 8/16/32, ~30 s
    python bench/bench_roofline.py --quick                # widths 4/8, a smoke test

An exact lever cannot remove arithmetic: every step of the published procedure needs one forward
pass to the tap and one input-gradient pass. So the question after the levers is how much of the
machine's arithmetic rate a step already uses. For ResNet18 (batch norms not the identity, as
after training; cost does not depend on the weights' values) at each width, in one process:

- FLOPs of one step per image, counted by ``torch.utils.flop_counter.FlopCounterMode`` on the
  working copy the engine uses (batch norm folded, channels-last): the forward pass to the
  penultimate tap plus the backward pass to the input (no weight gradients), 2 FLOPs a
  multiply-add. Elementwise work (ReLU, additions, the loss) is not counted.
- The seconds of one step of ``invert`` with the shipped defaults (median of ``--repeats``), and
  from them the FLOP rate a step achieves.
- Two references in the same process: a float32 matrix product (``--gemm`` square, the best case
  of the BLAS), and the network's own convolutions run alone in the same layout and batch, forward
  and input-gradient (:func:`conv_seconds`): their summed time is what a step would cost if it
  were nothing but its convolutions at the library's own speed.

``step_over_convs_alone`` is the ceiling of every remaining exact lever: a step cannot get faster
than its convolutions run alone, only by doing less arithmetic (another estimator) or by a faster
kernel library. Results: bench/out/bench_roofline.json.
"""
from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `python bench/bench_roofline.py`: bench.bench_cost's network and images
    sys.path.insert(0, str(REPO))

from bench.bench_cost import images, network, seconds  # noqa: E402
from stir.atomic import write_text  # noqa: E402
from stir.inversion.batching import CPU_BATCH  # noqa: E402
from stir.models import representation  # noqa: E402
from stir.models.fold import InferenceCopy  # noqa: E402
from stir.reporting import to_markdown  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
TAP = "penultimate"
log = logging.getLogger("bench_roofline")


def best_seconds(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def step_flops(m: nn.Module, batch: int) -> float:
    """FLOPs of one inversion step (forward to the tap + input gradient) per image, on the working copy."""
    copy = InferenceCopy(m, channels_last=True).module
    x = images(batch).contiguous(memory_format=torch.channels_last).requires_grad_()
    with FlopCounterMode(display=False) as counter:
        rep = representation(copy, x, TAP)
        rep.square().sum().backward()  # only x requires a gradient: no weight gradients
    return counter.get_total_flops() / batch


def gemm_rate(size: int, repeats: int) -> float:
    """GFLOP/s of a float32 (size x size) @ (size x size) product."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    return 2 * size**3 / best_seconds(lambda: a @ b, repeats) / 1e9


def conv_seconds(m: nn.Module, batch: int, repeats: int) -> Dict[str, float]:
    """The network's convolutions run alone, channels-last, on their own input shapes at ``batch`` images.

    Returns their total FLOPs, the seconds of all their forward passes and of all their
    input-gradient passes (``aten.convolution_backward`` with only the input's gradient asked
    for, as in an inversion step): the convolution library's own speed on these shapes.
    """
    shapes: Dict[nn.Conv2d, torch.Size] = {}

    def record(mod: nn.Module, inp: tuple, out: torch.Tensor) -> None:
        shapes[mod] = inp[0].shape  # (b, c, h, w) of the convolution's input

    hooks = [mod.register_forward_hook(record) for mod in m.modules() if isinstance(mod, nn.Conv2d)]
    with torch.no_grad():
        m(images(2))
    for h in hooks:
        h.remove()
    flops = forward = backward = 0.0
    with torch.no_grad():
        for conv, shape in shapes.items():
            conv = conv.to(memory_format=torch.channels_last)
            x = torch.randn(batch, *shape[1:]).contiguous(memory_format=torch.channels_last)
            y = conv(x)
            g = torch.randn_like(y)
            w = conv.weight

            def grad_input() -> torch.Tensor:
                return torch.ops.aten.convolution_backward(
                    g, x, w, None, conv.stride, conv.padding, conv.dilation, False, [0, 0], conv.groups,
                    [True, False, False])[0]

            forward += best_seconds(lambda: conv(x), repeats)
            backward += best_seconds(grad_input, repeats)
            flops += 2 * y.numel() * conv.in_channels // conv.groups * conv.kernel_size[0] * conv.kernel_size[1]
    return {"flops": flops / batch, "forward": forward / batch, "backward": backward / batch}


def measure(widths: List[int], n: int, steps: int, repeats: int, gemm: int) -> Dict:
    peak = gemm_rate(gemm, repeats)
    rows = []
    for width in widths:
        m = network(width)
        flops = step_flops(m, batch=8)
        seconds(m, images(8), 1)  # warm-up
        t = statistics.median(seconds(m, images(n), steps) for _ in range(repeats)) / (steps + 1)
        conv = conv_seconds(m, min(n, CPU_BATCH), repeats)  # per image
        convs = conv["forward"] + conv["backward"]  # seconds per image-step at the library's own speed
        achieved = flops * n / t / 1e9
        rows.append({"width": width, "mflop_per_image_step": round(flops / 1e6, 1),
                     "ms_per_image_step": round(1e3 * t / n, 3), "step_gflops": round(achieved, 1),
                     "conv_fwd_gflops": round(conv["flops"] / conv["forward"] / 1e9, 1),
                     "conv_grad_input_gflops": round(conv["flops"] / conv["backward"] / 1e9, 1),
                     "ms_convs_alone": round(1e3 * convs, 3), "step_over_convs_alone": round(t / n / convs, 2),
                     "step_vs_gemm": round(achieved / peak, 2)})
        log.info("width %d: %s", width, rows[-1])
    return {"gemm_size": gemm, "gemm_gflops": round(peak, 1), "rows": rows}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--widths", type=int, nargs="+", default=[8, 16, 32])
    p.add_argument("--images", type=int, default=256)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--gemm", type=int, default=2048)
    p.add_argument("--quick", action="store_true", help="widths 4/8, 32 images, 3 steps, one repeat")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.quick:
        args.widths, args.images, args.steps, args.repeats, args.gemm = [4, 8], 32, 3, 1, 512
    torch.set_num_threads(args.threads)
    result = measure(args.widths, args.images, args.steps, args.repeats, args.gemm)
    result.update(threads=args.threads, images=args.images, steps=args.steps, torch=torch.__version__)
    OUT.mkdir(exist_ok=True)
    write_text(OUT / "bench_roofline.json", json.dumps(result, indent=2))
    print(f"float32 GEMM {args.gemm}^3: {result['gemm_gflops']} GFLOP/s ({args.threads} threads)")
    print(to_markdown(result["rows"]))


if __name__ == "__main__":
    main()
