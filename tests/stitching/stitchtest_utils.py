"""A tiny two-block conv net with declared taps, synthetic separable data, and a short training loop."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from stir.models.registry import Network, Tap

CLASSES = 4
SIDE = 8  # images (n, 3, 8, 8)


class TinyNet(Network):
    """conv-bn-relu (block1, (c, 8, 8)) -> conv-bn-relu stride 2 (block2, (c, 4, 4)) -> mean -> fc."""

    def __init__(self, c: int = 6, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.block1 = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU())
        self.block2 = nn.Sequential(nn.Conv2d(c, c, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU())
        self.fc = nn.Linear(c, CLASSES)
        self.taps = (Tap("block1", "block1", c, 1), Tap("block2", "block2", c, 2), Tap("logits", "fc", CLASSES, 0))

    def forward(self, x: Tensor) -> Tensor:  # (b, 3, 8, 8) -> (b, CLASSES)
        return self.fc(self.block2(self.block1(x)).mean(dim=(2, 3)))


def separable_data(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """Images in [0, 1] whose class (0..3) is the bright quadrant, plus noise: (n, 3, 8, 8), (n,)."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, CLASSES, (n,), generator=g)
    x = 0.3 * torch.rand(n, 3, SIDE, SIDE, generator=g)
    h = SIDE // 2
    for k in range(CLASSES):
        r, c = divmod(k, 2)
        x[y == k, :, r * h:(r + 1) * h, c * h:(c + 1) * h] += 0.6
    return x.clamp(0, 1), y


def trained(seed: int, data: tuple[Tensor, Tensor], steps: int = 60) -> TinyNet:
    """A TinyNet trained with Adam on ``data`` (full batch), returned in eval mode."""
    net = TinyNet(seed=seed)
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    net.train()
    for _ in range(steps):
        loss = F.cross_entropy(net(data[0]), data[1])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net.eval()


def permuted_scaled_copy(net: TinyNet, perm: Tensor, scale: Tensor) -> TinyNet:
    """The same function with block1's channels permuted and positively scaled (a G_ReLU symmetry).

    Copy's block1 channel j = scale[j] * net's block1 channel perm[j]: conv1 rows and batch-norm
    entries permuted, the batch-norm affine (gamma, beta) multiplied by scale (relu(d z) = d relu(z)
    for d > 0), and conv2's input channels permuted and divided by scale.
    """
    c = perm.numel()
    copy = TinyNet(c=c)
    copy.load_state_dict(net.state_dict())
    with torch.no_grad():
        conv1, bn1, conv2 = copy.block1[0], copy.block1[1], copy.block2[0]
        conv1.weight.copy_(net.block1[0].weight[perm])
        for name in ("running_mean", "running_var"):
            getattr(bn1, name).copy_(getattr(net.block1[1], name)[perm])
        bn1.weight.copy_(net.block1[1].weight[perm] * scale)
        bn1.bias.copy_(net.block1[1].bias[perm] * scale)
        conv2.weight.copy_(net.block2[0].weight[:, perm] / scale.view(1, c, 1, 1))
    return copy.eval()
