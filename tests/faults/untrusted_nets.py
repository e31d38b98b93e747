"""Networks for issue 30's identity cases (``python:untrusted_nets:NAME``): the same weights (seed 0)
under another forward, and networks that misbehave. Each takes (b, 3, 32, 32) images in [0, 1] and
returns (b, 10) logits."""
import torch
import torch.nn.functional as F
from torch import Tensor, nn


class SmallNet(nn.Module):
    """conv (3 -> 8, stride 2) -> activation -> spatial mean -> linear (8 -> 10); weights from seed 0."""

    def __init__(self):
        super().__init__()
        with torch.random.fork_rng():
            torch.manual_seed(0)
            self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.head = nn.Linear(8, 10)

    def features(self, x: Tensor) -> Tensor:  # (b, 8)
        return torch.relu(self.conv(x)).mean(dim=(2, 3))

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))


class TanhNet(SmallNet):
    def features(self, x: Tensor) -> Tensor:
        return torch.tanh(self.conv(x)).mean(dim=(2, 3))


class DropoutNet(SmallNet):
    """Dropout forced on whatever the mode: not a function of its input."""

    def features(self, x: Tensor) -> Tensor:
        return F.dropout(torch.relu(self.conv(x)).mean(dim=(2, 3)), 0.5, training=True)


class DetachNet(SmallNet):
    """Cuts autograd: no gradient reaches the input."""

    def features(self, x: Tensor) -> Tensor:
        return torch.relu(self.conv(x)).mean(dim=(2, 3)).detach()


class NoGradNet(SmallNet):
    def features(self, x: Tensor) -> Tensor:
        with torch.no_grad():
            return torch.relu(self.conv(x)).mean(dim=(2, 3))


class SizeAssertNet(SmallNet):
    """Asserts an input size the data does not have."""

    def forward(self, x: Tensor) -> Tensor:
        assert x.shape[-1] == 64, "expects 64x64 images"
        return super().forward(x)


def relu_net() -> nn.Module:
    return SmallNet()


def tanh_net() -> nn.Module:
    return TanhNet()


def dropout_net() -> nn.Module:
    return DropoutNet()


def detach_net() -> nn.Module:
    return DetachNet()


def no_grad_net() -> nn.Module:
    return NoGradNet()


def size_assert_net() -> nn.Module:
    return SizeAssertNet()


class Total(nn.Module):
    def forward(self, h: Tensor) -> Tensor:
        return h.sum()  # 0-d: one number for the whole batch


class ScalarTapNet(SmallNet):
    """A module (``total``) that returns a 0-d tensor: not a tap."""

    def __init__(self):
        super().__init__()
        self.total = Total()

    def forward(self, x: Tensor) -> Tensor:
        h = self.features(x)
        return self.head(h) + 0 * self.total(h)


def scalar_tap_net() -> nn.Module:
    return ScalarTapNet()
