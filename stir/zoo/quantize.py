"""Weight-only int8 storage of a shipped model: a quarter of float32's bytes.

A weights file stored as ``int8`` (``python -m stir.zoo.ship --dtype int8``) holds, for every floating
tensor of two or more dimensions (convolution and linear weights, >98% of a CIFAR ResNet's
parameters), its per-output-channel symmetric quantisation

    q[c] = round(w[c] / s[c]) in [-127, 127] (int8),   s[c] = max |w[c]| / 127 (float32),

as two entries: ``NAME`` (the int8 tensor ``q``, the weight's shape) and ``NAME::int8_scale`` (``s``,
shape ``(out_channels,)``). Every other tensor (biases, batch-norm parameters and statistics, the input
normalisation) is kept as float32, and integer tensors as they are. ``dequantize`` gives the float32
state dict ``q[c] * s[c]`` that a network loads: the stored model is that function, so its accuracy is
measured again when it is shipped (``stir.zoo.ship.remeasure``), and its content identity is the
dequantized weights' (``stir.models.identity``).

Per-channel absmax scaling (Krishnamoorthi 2018, "Quantizing deep convolutional networks for efficient
inference", section 3.1) keeps each output channel's largest weight exact and bounds every weight's
error by s[c] / 2. The file is a plain tensor dict, read with ``torch.load(weights_only=True)`` like
every other shipped file.
"""
from __future__ import annotations

from typing import Dict, Mapping

import torch
from torch import Tensor

SCALE_SUFFIX = "::int8_scale"  # NAME::int8_scale is the per-output-channel scale of the int8 tensor NAME
QMAX = 127  # symmetric: -127..127 (-128 unused, so that q and -q are both representable)


def quantizes(tensor: Tensor) -> bool:
    """Whether a state-dict entry is stored as int8: floating, with an output-channel dimension and more."""
    return tensor.is_floating_point() and tensor.dim() >= 2


def quantize_state(state: Mapping[str, Tensor]) -> Dict[str, Tensor]:
    """The int8 file's tensors for a state dict (CPU, contiguous): weights as (int8, float32 scale)
    pairs, every other floating tensor as float32, integer tensors unchanged."""
    out: Dict[str, Tensor] = {}
    for name, value in state.items():
        if name.endswith(SCALE_SUFFIX):
            raise ValueError(f"state dict key {name!r} ends with {SCALE_SUFFIX!r}, the int8 format's scale suffix")
        value = value.detach().to("cpu")
        if not quantizes(value):
            out[name] = (value.float() if value.is_floating_point() else value).contiguous().clone()
            continue
        w = value.double().flatten(1)  # (out_channels, fan_in): float64 so that the rounding is exact
        scale = w.abs().amax(dim=1) / QMAX  # (out_channels,)
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero channel stays zero
        scale32 = scale.float()
        q = torch.round(w / scale32.double()[:, None]).clamp_(-QMAX, QMAX).to(torch.int8)
        out[name] = q.reshape(value.shape).contiguous()
        out[name + SCALE_SUFFIX] = scale32.contiguous()
    return out


def is_quantized(state: Mapping[str, Tensor]) -> bool:
    """Whether a state dict read from a file is in the int8 format (it has a scale entry)."""
    return any(name.endswith(SCALE_SUFFIX) for name in state)


def dequantize(state: Mapping[str, Tensor]) -> Dict[str, Tensor]:
    """The float32 state dict an int8 file stands for: ``q * scale`` per output channel; other entries
    as stored. A state dict not in the int8 format is returned as a plain dict, unchanged. Raises
    ValueError for a scale without its tensor, or an int8 tensor without its scale."""
    if not is_quantized(state):
        return dict(state)
    out: Dict[str, Tensor] = {}
    scales = {name[: -len(SCALE_SUFFIX)]: value for name, value in state.items() if name.endswith(SCALE_SUFFIX)}
    for name, value in state.items():
        if name.endswith(SCALE_SUFFIX):
            if name[: -len(SCALE_SUFFIX)] not in state:
                raise ValueError(f"int8 weights: {name} has no tensor {name[: -len(SCALE_SUFFIX)]!r}")
            continue
        if name in scales:
            scale = scales[name]
            if value.dtype != torch.int8 or scale.shape != (value.shape[0],):
                raise ValueError(f"int8 weights: {name} is {value.dtype} of shape {tuple(value.shape)} with a scale of "
                                 f"shape {tuple(scale.shape)}, not int8 with one scale per output channel")
            out[name] = value.float() * scale.float().view(-1, *([1] * (value.dim() - 1)))
        elif value.dtype == torch.int8:
            raise ValueError(f"int8 weights: {name} is int8 without its scale {name + SCALE_SUFFIX!r}")
        else:
            out[name] = value
    return out
