"""Fitting a stitching layer: channel statistics, the initialisation they give, a short training loop.

A stitched network is A[:tap_a] -> S -> B[tap_b:] (``Stitched``). A and B are frozen throughout:
eval mode (batch-norm running statistics, never batch statistics, never updated), no weight
gradients (``stir.models.frozen``, which restores every flag afterwards). Only S is trained, on
the task loss (cross-entropy of the stitched logits against the labels), as in Bansal et al. (2021)
and Godfrey et al. (2022, section 5).

Initialisation (``initialise``), from channel statistics of both taps on the training images
(every position of every image is one sample of c channels; ``ChannelStats``, float64):

* ``linear``: the least-squares map of A's channels onto B's (with bias, a tiny ridge), then trained;
* ``g_relu``: P by matching channels, the Hungarian assignment (``scipy.optimize.linear_sum_assignment``)
  maximising the summed Pearson correlation between A's channel i and B's channel j; D by matching
  magnitudes, d_j = sqrt(E[z_b,j^2] / E[z_a,i^2]), i = P(j) (exact when B's tap is P D applied to A's;
  the least-squares scale through the origin shrinks poorly matched channels towards 0; on the
  profile=cpu ResNets the magnitude ratio ended 0.02 higher on average); then log D is trained with
  P fixed (the assignment is discrete);
* ``orthogonal``: the Procrustes solution on centred channels, Q = U V^T for U S V^T = svd(Cov(z_b, z_a)),
  bias m_b - Q m_a; then trained on the orthogonal manifold;
* ``identity``: nothing to fit.

``init="identity"`` instead starts ``g_relu`` at P = I, D = I (exactly the identity map) and
``linear`` at W = I, b = 0 (equal widths only). The training loop is a plain seeded loop
(Adam, fixed number of epochs over the training images, no augmentation): a small, nearly convex
problem that needs no Trainer. Device and dtype follow the images and the models.
"""
from __future__ import annotations

import logging
import math
from typing import List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from torch import Tensor, nn

from stir.data import to_float
from stir.models import frozen
from stir.stitching.layers import GReLUStitch, IdentityStitch, LinearStitch, OrthogonalStitch
from stir.models.taps import read_taps, run_from
from stir.progress import Progress

log = logging.getLogger(__name__)

F64 = torch.float64
INITS = ("match", "identity")


def as_images(x: Tensor) -> Tensor:
    """uint8 images (b, 3, h, w) -> float in [0, 1]; float images unchanged."""
    return to_float(x) if x.dtype == torch.uint8 else x


class Stitched(nn.Module):
    """A[:tap_a] -> S -> B[tap_b:]: logits (b, classes) of images x (b, 3, h, w) in [0, 1].

    A and B are held outside the module tree (``train()`` / ``parameters()`` see S only), so that
    nothing done to the stitched network can reach them. A's part runs without gradients; B's runs
    with its tap output replaced by S's (``stir.models.taps.run_from``).
    """

    def __init__(self, a: nn.Module, tap_a: str, layer: nn.Module, b: nn.Module, tap_b: str):
        super().__init__()
        self.layer = layer
        self._models = (a, b)  # a tuple: not registered as submodules
        self.tap_a, self.tap_b = tap_a, tap_b

    def forward(self, x: Tensor) -> Tensor:
        a, b = self._models
        with torch.no_grad():
            z = read_taps(a, x, [self.tap_a])[self.tap_a]  # (b, c_a, h, w) or (b, d_a)
        return run_from(b, x, self.tap_b, self.layer(z))


class ChannelStats:
    """Running float64 moments of two taps' channels, every (image, position) one sample.

    ``update(za, zb)`` with za (b, c_a, h, w) / (b, c_a) and zb likewise; ``compute`` gives the
    sample count n, means (c_a,), (c_b,), second moments E[z_a z_a^T] (c_a, c_a), E[z_b^2] (c_b,)
    and E[z_a z_b^T] (c_a, c_b).
    """

    def __init__(self) -> None:
        self.n = 0
        self.sa = self.sb = self.saa = self.sbb = self.sab = None

    def update(self, za: Tensor, zb: Tensor) -> None:
        xa = za.movedim(1, -1).reshape(-1, za.shape[1]).to(F64)  # (b*h*w, c_a)
        xb = zb.movedim(1, -1).reshape(-1, zb.shape[1]).to(F64)  # (b*h*w, c_b)
        parts = (xa.sum(0), xb.sum(0), xa.T @ xa, (xb * xb).sum(0), xa.T @ xb)
        if self.sa is None:
            self.sa, self.sb, self.saa, self.sbb, self.sab = parts
        else:
            for name, value in zip(("sa", "sb", "saa", "sbb", "sab"), parts):
                setattr(self, name, getattr(self, name) + value)
        self.n += xa.shape[0]

    def compute(self) -> Tuple[int, Tensor, Tensor, Tensor, Tensor, Tensor]:
        if self.n == 0:
            raise ValueError("ChannelStats.compute() before any update()")
        n = self.n
        return n, self.sa / n, self.sb / n, self.saa / n, self.sbb / n, self.sab / n

    def correlation(self) -> Tensor:
        """Pearson correlation (c_a, c_b) between channels; 0 where a channel is constant."""
        _, ma, mb, eaa, ebb, eab = self.compute()
        va = (torch.diagonal(eaa) - ma**2).clamp_min(0)
        vb = (ebb - mb**2).clamp_min(0)
        cov = eab - ma[:, None] * mb[None, :]
        denom = (va.sqrt()[:, None] * vb.sqrt()[None, :])
        return torch.where(denom > 0, cov / denom.clamp_min(torch.finfo(F64).tiny), torch.zeros_like(cov))


def channel_stats(a: nn.Module, b: nn.Module, tap_a: str, tap_b: str, images: Tensor, batch_size: int) -> ChannelStats:
    """``ChannelStats`` of A's tap and B's tap over ``images`` (n, 3, h, w), both models frozen."""
    stats = ChannelStats()
    with frozen(a, b), torch.no_grad():
        for start in range(0, images.shape[0], batch_size):
            x = as_images(images[start:start + batch_size])
            stats.update(read_taps(a, x, [tap_a])[tap_a], read_taps(b, x, [tap_b])[tap_b])
    return stats


def match_channels(correlation: Tensor) -> np.ndarray:
    """perm (c_b,): B's channel j is matched to A's channel perm[j], maximising sum_j corr[perm[j], j].

    The Hungarian algorithm (``scipy.optimize.linear_sum_assignment``) on the (c_a, c_b) correlations.
    """
    rows, cols = linear_sum_assignment(correlation.detach().cpu().numpy(), maximize=True)
    perm = np.empty(correlation.shape[1], dtype=np.int64)
    perm[cols] = rows
    return perm


def initialise(layer: nn.Module, stats: Optional[ChannelStats], init: str = "match") -> None:
    """Set ``layer`` to its starting point (module docstring); ``stats`` is needed for ``init='match'``."""
    if init not in INITS:
        raise ValueError(f"unknown stitching init {init!r}; choose one of {list(INITS)}")
    if isinstance(layer, IdentityStitch):
        return
    with torch.no_grad():
        if init == "identity":
            _identity_init(layer)
            return
        if stats is None:
            raise ValueError("init='match' needs the channel statistics of both taps")
        if isinstance(layer, GReLUStitch):
            perm = match_channels(stats.correlation())
            _, _, _, eaa, ebb, _ = stats.compute()
            idx = torch.as_tensor(perm, device=eaa.device)
            power_a = torch.diagonal(eaa)[idx]  # (c,) E[z_a,perm[j]^2]
            # d_j = rms(z_b,j) / rms(z_a,perm[j]): B's channel keeps its own magnitude (1 where undefined).
            scale = torch.where((power_a > 0) & (ebb > 0), (ebb / power_a.clamp_min(torch.finfo(F64).tiny)).sqrt(),
                                torch.ones_like(ebb))
            layer.set_permutation(perm)
            layer.log_scale.copy_(scale.log().to(layer.log_scale))
        elif isinstance(layer, LinearStitch):
            _, ma, mb, eaa, _, eab = stats.compute()
            c_a = ma.shape[0]
            # Normal equations of [z_a, 1] -> z_b with a ridge of 1e-6 of the mean eigenvalue.
            gram = torch.zeros(c_a + 1, c_a + 1, dtype=F64, device=ma.device)
            gram[:c_a, :c_a], gram[:c_a, c_a], gram[c_a, :c_a], gram[c_a, c_a] = eaa, ma, ma, 1.0
            cross = torch.cat([eab, mb[None, :]], dim=0)  # (c_a + 1, c_b)
            ridge = 1e-6 * torch.diagonal(gram).mean()
            sol = torch.linalg.solve(gram + ridge * torch.eye(c_a + 1, dtype=F64, device=ma.device), cross)
            layer.map.weight.copy_(sol[:c_a].T.to(layer.map.weight))
            layer.map.bias.copy_(sol[c_a].to(layer.map.bias))
        elif isinstance(layer, OrthogonalStitch):
            _, ma, mb, _, _, eab = stats.compute()
            cov = eab - ma[:, None] * mb[None, :]  # (c_a, c_b) = Cov(z_a, z_b)
            u, _, vh = torch.linalg.svd(cov.T)  # Cov(z_b, z_a) = U S V^T
            q = u @ vh  # (c_b, c_a) orthogonal
            layer.map.weight = q.to(layer.map.bias)
            layer.map.bias.copy_((mb - q @ ma).to(layer.map.bias))
        else:
            raise TypeError(f"no initialisation for {type(layer).__name__}")


def _identity_init(layer: nn.Module) -> None:
    if isinstance(layer, GReLUStitch):
        layer.perm.copy_(torch.arange(layer.perm.numel(), device=layer.perm.device))
        layer.log_scale.zero_()
    elif isinstance(layer, (LinearStitch, OrthogonalStitch)):
        w = layer.map.weight
        if w.shape[0] != w.shape[1]:
            raise ValueError(f"init='identity' needs equal channel counts, the layer maps {w.shape[1]} -> {w.shape[0]}")
        eye = torch.eye(w.shape[0], dtype=w.dtype, device=w.device)
        if isinstance(layer, OrthogonalStitch):
            layer.map.weight = eye
        else:
            layer.map.weight.copy_(eye)
        layer.map.bias.zero_()


def train_layer(
    net: Stitched, images: Tensor, labels: Tensor, *, epochs: int, batch_size: int, lr: float, seed: int,
    progress: bool = False, desc: str = "stitching",
) -> List[float]:
    """Train S (``net.layer``) for ``epochs`` passes over (images (n, 3, h, w), labels (n,)); mean loss per epoch.

    Adam on S's parameters only, batches in an order drawn from a CPU generator seeded with ``seed``;
    A and B frozen in eval mode throughout (flags restored after). A layer without parameters
    (identity) is not trained: returns []. ``progress``: a bar (or log lines) over the batches,
    ``desc`` saying which fit.
    """
    params = [p for p in net.layer.parameters() if p.requires_grad]
    if not params or epochs == 0:
        return []
    a, b = net._models
    opt = torch.optim.Adam(params, lr=lr)
    g = torch.Generator().manual_seed(seed)
    losses = []
    batches = epochs * math.ceil(images.shape[0] / batch_size)
    with frozen(a, b), Progress(batches, desc, "batch", enabled=progress, leave=False) as bar:
        net.layer.train()
        for epoch in range(epochs):
            order = torch.randperm(images.shape[0], generator=g).to(images.device)
            total, count = 0.0, 0
            for start in range(0, images.shape[0], batch_size):
                idx = order[start:start + batch_size]
                x, y = as_images(images[idx]), labels[idx]
                loss = F.cross_entropy(net(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total, count = total + loss.item() * idx.numel(), count + idx.numel()
                bar.update(1, epoch=f"{epoch + 1}/{epochs}", loss=total / count)
            losses.append(total / count)
            log.debug("stitching %s: epoch %d loss %.4f", type(net.layer).__name__, epoch, losses[-1])
    return losses


@torch.no_grad()
def accuracy(model: nn.Module, images: Tensor, labels: Tensor, batch_size: int, *frozen_too: nn.Module) -> float:
    """Top-1 accuracy of ``model`` on (images (n, 3, h, w), labels (n,)), in eval mode (flags restored).

    ``frozen_too``: further models ``model`` runs (a stitched network's A and B), also frozen.
    """
    correct = 0
    with frozen(model, *frozen_too):
        for start in range(0, images.shape[0], batch_size):
            x, y = as_images(images[start:start + batch_size]), labels[start:start + batch_size]
            correct += (model(x).argmax(dim=1) == y).sum().item()
    return correct / images.shape[0]
