"""What the measure-judging experiments (layer_matching, grounding, invariance) share.

The taps of ``layers`` (whole maps: ``layers.reduce`` is not applied), the representations of many
images (float64 on the CPU, what the similarity measures take) and an untrained network of a zoo
model's architecture.
"""
from __future__ import annotations

from typing import Dict, List, Sequence

import torch
from torch import Tensor, nn

from stir.experiments.config import LayersConfig
from stir.models import build, channel_stats
from stir.models.depth import depth_taps, evenly_spaced, original_taps
from stir.models.identity import tensor_digest
from stir.models.taps import collect
from stir.zoo import Model

RANDOM_INIT = "random-init"


def taps_of(layers: LayersConfig, model: Model) -> List[str]:
    """The taps of ``layers.taps``: a list as given, "all" = every tap but logits, "original" = the
    original STIR code's list, "penultimate" alone; ``layers.count`` keeps that many, evenly spaced."""
    if layers.taps == "all":
        taps = depth_taps(model.module)
    elif layers.taps == "original":
        taps = original_taps(model.module)
    elif isinstance(layers.taps, str):
        taps = [layers.taps]
    else:
        taps = [str(t) for t in layers.taps]
    return evenly_spaced(taps, layers.count)


def flat_representations(model: Model, x: Tensor, taps: Sequence[str], batch_size: int) -> Dict[str, Tensor]:
    """{tap: (n, d)} float64 on the CPU, the model frozen in eval mode, in chunks."""
    return collect(model.module, x, list(taps), batch_size, dtype=torch.float64, device=torch.device("cpu"))


def random_init(model: Model, device: torch.device) -> nn.Module:
    """An untrained network of ``model``'s architecture (weights from its recipe's seed), in eval mode."""
    cfg = model.train
    if cfg is None:
        raise ValueError(f"{model.label!r} was not trained by this project: its architecture recipe is unknown, "
                         "so there is no random-init twin to build (invariance.random_init=false)")
    with torch.random.fork_rng(devices=[]):  # the global RNG is left as it was
        torch.manual_seed(cfg.seed)
        net = build(cfg.model, cfg.data.num_classes, *channel_stats(cfg.data.name))
    return net.eval().to(device)


def digest(x: Tensor) -> str:
    return tensor_digest(x.detach().cpu())
