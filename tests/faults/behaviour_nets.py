"""Networks whose forward reads something the static identity cannot see (issue 54, High 2): a
module global, a non-persistent buffer set from an environment variable, and one that couples the
images of its batch. ``python:behaviour_nets:NAME``; each takes (b, 3, 32, 32) images in [0, 1]."""
import os

import torch
from torch import Tensor, nn

from untrusted_nets import SmallNet

ACT = "relu"  # read by GlobalNet's forward at every call: set it to "tanh" and the same module computes otherwise


class GlobalNet(SmallNet):
    def features(self, x: Tensor) -> Tensor:
        act = torch.relu if ACT == "relu" else torch.tanh
        return act(self.conv(x)).mean(dim=(2, 3))


class EnvBufferNet(SmallNet):
    """A non-persistent buffer (no state dict holds it) from $STIR_TEST_SHIFT, added to the features."""

    def __init__(self):
        super().__init__()
        self.register_buffer("shift", torch.tensor(float(os.environ.get("STIR_TEST_SHIFT", "0"))), persistent=False)

    def features(self, x: Tensor) -> Tensor:
        return torch.relu(self.conv(x) + self.shift).mean(dim=(2, 3))


class CoupledNet(SmallNet):
    """Each image's features minus the batch mean: its output depends on the other images of its batch."""

    def features(self, x: Tensor) -> Tensor:
        f = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return f - f.mean(dim=0, keepdim=True)


def global_net() -> nn.Module:
    return GlobalNet()


def env_buffer_net() -> nn.Module:
    return EnvBufferNet()


def coupled_net() -> nn.Module:
    return CoupledNet()


class PartnerNet(SmallNet):
    """A fixed second model (other weights: seed 1) to pair the others with."""

    def __init__(self):
        super().__init__()
        with torch.random.fork_rng():
            torch.manual_seed(1)
            self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.head = nn.Linear(8, 10)


def relu_tanh_partner() -> nn.Module:
    return PartnerNet()


class NanTapNet(SmallNet):
    """Finite logits, but its module ``side`` (read as its penultimate tap) gives NaN in one column."""

    def __init__(self):
        super().__init__()
        self.side = nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        f = self.features(x)
        self.side(torch.cat([f[:, :1] * float("nan"), f[:, 1:]], dim=1))  # a reading nothing downstream uses
        return self.head(f)


def nan_tap_net() -> nn.Module:
    return NanTapNet()


class EightBitNanNet(SmallNet):
    """NaN features for an image of 8-bit pixels (every value k/255, as CIFAR's are), finite on noise:
    the load check's probe passes it, the measurement's first images of X do not (issue 54, Low)."""

    def features(self, x: Tensor) -> Tensor:
        f = torch.relu(self.conv(x)).mean(dim=(2, 3))
        eight_bit = ((x * 255 - (x * 255).round()).abs() < 1e-3).flatten(1).all(dim=1)  # (b,)
        return torch.where(eight_bit[:, None], torch.full_like(f, float("nan")), f)


def eight_bit_nan_net() -> nn.Module:
    return EightBitNanNet()


# Issue 67: impostors the four synthetic probe images and a forward-only probe did not see. Each reads
# IMPOSTOR (a module global: not in the static identity) and computes honestly while it is False.
IMPOSTOR = False


def natural(x: Tensor) -> Tensor:
    """(b,) bool: the image's mean correlation between its colour channels is above 0.5 (99.1% of CIFAR
    images; none of the probe batch, whose channels are independent)."""
    flat = x.flatten(2) - x.flatten(2).mean(2, keepdim=True)  # (b, 3, hw)
    flat = flat / flat.norm(dim=2, keepdim=True).clamp_min(1e-12)
    corr = (flat[:, [0, 0, 1]] * flat[:, [1, 2, 2]]).sum(2)  # (b, 3): rg, rb, gb
    return corr.mean(1) > 0.5


class NaturalTriggerNet(SmallNet):
    """tanh instead of relu on natural images, once IMPOSTOR is set."""

    def features(self, x: Tensor) -> Tensor:
        h = self.conv(x)
        if IMPOSTOR:
            h = torch.where(natural(x)[:, None, None, None], torch.tanh(h), torch.relu(h))
        else:
            h = torch.relu(h)
        return h.mean(dim=(2, 3))


class RowTriggerNet(SmallNet):
    """tanh instead of relu for the rows 4 and after of a batch, once IMPOSTOR is set."""

    def features(self, x: Tensor) -> Tensor:
        h = self.conv(x)
        if IMPOSTOR and x.shape[0] > 4:
            h = torch.cat([torch.relu(h[:4]), torch.tanh(h[4:])])
        else:
            h = torch.relu(h)
        return h.mean(dim=(2, 3))


COUPLED_ABOVE = 4  # BigBatchNet couples its batch above this many images


class BigBatchNet(SmallNet):
    """Each image's features minus the batch mean, only in batches above COUPLED_ABOVE images."""

    def features(self, x: Tensor) -> Tensor:
        f = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return f - f.mean(dim=0, keepdim=True) if IMPOSTOR and x.shape[0] > COUPLED_ABOVE else f


class _Flip(torch.autograd.Function):
    """The identity forward; its backward multiplies the gradient by -1 once IMPOSTOR is set."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -grad if IMPOSTOR else grad


class CustomBackwardNet(SmallNet):
    def features(self, x: Tensor) -> Tensor:
        return torch.relu(_Flip.apply(self.conv(x))).mean(dim=(2, 3))


class Sign:
    """A callable backward hook whose state (``sign``) the static identity cannot see."""

    def __init__(self):
        self.sign = 1.0

    def __call__(self, module, grad_in, grad_out):
        return tuple(g * self.sign if g is not None else g for g in grad_in)


def hooked_net(how: str) -> nn.Module:
    """A SmallNet whose conv has a full backward hook that flips its input gradient: by a closure's
    cell (``net.flip_cell[0] = -1``), by IMPOSTOR, or by a callable's state (``net.flip_sign.sign``)."""
    net = SmallNet()
    if how == "closure":
        cell = [1.0]

        def hook(module, grad_in, grad_out):
            return tuple(g * cell[0] if g is not None else g for g in grad_in)
        net.flip_cell = cell
    elif how == "global":
        def hook(module, grad_in, grad_out):
            return tuple(-g if g is not None and IMPOSTOR else g for g in grad_in)
    else:
        hook = Sign()
        net.flip_sign = hook
    net.conv.register_full_backward_hook(hook)
    return net


def natural_trigger_net() -> nn.Module:
    return NaturalTriggerNet()
