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
