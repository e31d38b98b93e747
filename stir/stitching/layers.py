"""Stitching layers S between A's tap (c_a channels) and B's tap (c_b channels).

A feature map z (b, c, h, w) is mapped channel-wise at every position (a 1x1 convolution); a vector
z (b, d) is mapped as a (b, d) -> (b, d') linear map. Kinds (``KINDS``):

* ``identity``: S(z) = z. No parameters; needs equal shapes (the baseline "just plug it in").
* ``linear``: S(z) = W z + b, a full 1x1 convolution with bias (a linear layer on vectors),
  c_a -> c_b channels (Bansal, Nakkiran & Barak 2021; Csiszarik et al. 2021).
* ``g_relu``: S(z) = P D z, P a permutation of channels and D = diag(exp(s)) a positive scaling:
  an element of G_ReLU, the intertwiner group of ReLU (Godfrey, Brown, Emerson & Kvinge, NeurIPS
  2022, theorem 4.2: the matrices A with relu(A z) = A relu(z) are exactly P D, D positive
  diagonal). No bias: a bias is not part of the group (relu(z + b) != relu(z) + b), so the
  restricted layer is the group element itself. P is fixed after matching (not learnt); the scales
  are learnt through their logarithm s, so they stay positive. Needs c_a == c_b.
* ``orthogonal``: S(z) = Q z + b with Q orthogonal (``torch.nn.utils.parametrizations.orthogonal``),
  initialised at the Procrustes solution; needs c_a == c_b.

How each layer is initialised before training is in ``stir.stitching.fit.initialise``.
"""
from __future__ import annotations

from typing import Sequence, Tuple

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrizations

KINDS = ("identity", "linear", "g_relu", "orthogonal")


def _channels_last(z: Tensor) -> Tensor:
    """(b, c, h, w) -> (b, h, w, c); (b, d) unchanged."""
    return z.movedim(1, -1) if z.dim() == 4 else z


def _channels_first(z: Tensor) -> Tensor:
    return z.movedim(-1, 1) if z.dim() == 4 else z


class IdentityStitch(nn.Module):
    kind = "identity"

    def forward(self, z: Tensor) -> Tensor:
        return z


class LinearStitch(nn.Module):
    """S(z) = W z + b per position: W (c_b, c_a), b (c_b,). z (b, c_a, h, w) -> (b, c_b, h, w), or (b, c_a) -> (b, c_b)."""

    kind = "linear"

    def __init__(self, c_a: int, c_b: int, *, device=None, dtype=None):
        super().__init__()
        self.map = nn.Linear(c_a, c_b, bias=True, device=device, dtype=dtype)

    def forward(self, z: Tensor) -> Tensor:
        return _channels_first(self.map(_channels_last(z)))


class OrthogonalStitch(nn.Module):
    """S(z) = Q z + b per position, Q (c, c) orthogonal (parametrised, stays orthogonal while trained)."""

    kind = "orthogonal"

    def __init__(self, c: int, *, device=None, dtype=None):
        super().__init__()
        self.map = parametrizations.orthogonal(nn.Linear(c, c, bias=True, device=device, dtype=dtype))

    def forward(self, z: Tensor) -> Tensor:
        return _channels_first(self.map(_channels_last(z)))


class GReLUStitch(nn.Module):
    """S(z) = P D z: output channel j is exp(log_scale[j]) * z[:, perm[j]] (G_ReLU, Godfrey et al. thm 4.2).

    ``perm`` (c,) int64 is a buffer (found by matching, then fixed); ``log_scale`` (c,) is the only
    parameter. At perm = arange(c), log_scale = 0 the layer is exactly the identity.
    z (b, c, h, w) -> (b, c, h, w), or (b, c) -> (b, c).
    """

    kind = "g_relu"

    def __init__(self, c: int, *, device=None, dtype=None):
        super().__init__()
        self.register_buffer("perm", torch.arange(c, device=device))
        self.log_scale = nn.Parameter(torch.zeros(c, device=device, dtype=dtype))

    def set_permutation(self, perm: Sequence[int]) -> None:
        perm = torch.as_tensor(perm, dtype=torch.int64, device=self.perm.device)
        if sorted(perm.tolist()) != list(range(self.perm.numel())):
            raise ValueError(f"not a permutation of {self.perm.numel()} channels: {perm.tolist()}")
        self.perm.copy_(perm)

    def forward(self, z: Tensor) -> Tensor:
        scale = self.log_scale.exp()  # (c,) > 0
        shape = (1, -1, 1, 1) if z.dim() == 4 else (1, -1)
        return z[:, self.perm] * scale.view(shape)


def build_layer(kind: str, shape_a: Tuple[int, ...], shape_b: Tuple[int, ...], *, device=None, dtype=None) -> nn.Module:
    """The stitching layer ``kind`` from A's tap shape to B's, per image: (c, h, w) or (d,).

    ValueError, naming the kinds or the shapes, for an unknown kind, taps of different spatial sizes
    (or a map against a vector), or channel counts the kind cannot bridge.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown stitching layer {kind!r}; choose one of {list(KINDS)}")
    if shape_a[1:] != shape_b[1:] or len(shape_a) != len(shape_b):
        raise ValueError(
            f"incompatible taps for stitching: A's tap gives {shape_a}, B's {shape_b} per image (channels, "
            f"height, width); a stitching layer maps channels at each position, so the spatial sizes must agree: "
            f"choose taps at the same resolution")
    c_a, c_b = shape_a[0], shape_b[0]
    if kind == "linear":
        return LinearStitch(c_a, c_b, device=device, dtype=dtype)
    if c_a != c_b:
        raise ValueError(f"stitching layer {kind!r} needs equal channel counts, got {c_a} (A) and {c_b} (B); "
                         f"'linear' bridges different widths")
    if kind == "identity":
        return IdentityStitch()
    if kind == "g_relu":
        return GReLUStitch(c_a, device=device, dtype=dtype)
    return OrthogonalStitch(c_a, device=device, dtype=dtype)
