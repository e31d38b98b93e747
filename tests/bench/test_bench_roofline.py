"""bench/bench_roofline.py: the FLOPs it counts for an inversion step, and its convolution references."""
import torch
from torch.utils.flop_counter import FlopCounterMode

from bench.bench_cost import images, network
from bench.bench_roofline import TAP, conv_seconds, step_flops
from stir.models import representation


def _forward_flops(m, batch: int) -> float:
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        representation(m, images(batch), TAP)
    return counter.get_total_flops() / batch


def test_a_step_counts_one_forward_and_one_input_gradient_pass():
    m = network(4)
    forward = _forward_flops(m, 2)
    step = step_flops(m, batch=2)
    # The input-gradient pass of every convolution costs what its forward pass costs (the weight
    # gradients are not asked for), so a step is twice the forward pass: nothing more, nothing less.
    assert abs(step - 2 * forward) <= 1e-6 * step


def test_the_convolutions_alone_are_the_forward_pass_flops():
    m = network(4)
    conv = conv_seconds(m, batch=4, repeats=1)
    assert abs(conv["flops"] - _forward_flops(m, 2)) <= 1e-6 * conv["flops"]  # the penultimate tap: no linear layer
    assert conv["forward"] > 0 and conv["backward"] > 0
