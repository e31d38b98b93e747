"""What the measure-judging experiments (layer_matching, grounding, invariance) share.

Taps from ``layers``, flattened representations of many images, held-out images with labels,
an untrained network of a zoo model's architecture, and a stored unit of work.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from stir.data import StirDataModule, to_float
from stir.evaluation.layers import depth_taps, evenly_spaced, original_taps
from stir.evaluation.session import Session
from stir.evaluation.store import ResultStore
from stir.inversion.cache import tensor_digest
from stir.models import build, channel_stats, frozen, representations

log = logging.getLogger(__name__)

RANDOM_INIT = "random-init"


def taps_of(session: Session, name: str) -> List[str]:
    """The taps of ``layers.taps``: a list as given, "all" = every tap but logits, "original" = the
    original STIR code's list, "penultimate" alone; ``layers.count`` keeps that many, evenly spaced.
    (``layers.reduce`` is not applied: these experiments read whole maps.)"""
    layers = session.cfg.layers
    if layers.taps == "all":
        taps = depth_taps(session.network(name))
    elif layers.taps == "original":
        taps = original_taps(session.network(name))
    elif isinstance(layers.taps, str):
        taps = [layers.taps]
    else:
        taps = list(layers.taps)
    return evenly_spaced(taps, layers.count)


def flat_representations(model: nn.Module, x: Tensor, taps: Sequence[str], batch_size: int = 250) -> Dict[str, Tensor]:
    """{tap: (n, d)} float64 on the CPU, the model frozen in eval mode, in chunks."""
    chunks: Dict[str, List[Tensor]] = {t: [] for t in taps}
    with frozen(model), torch.no_grad():
        for s in range(0, x.shape[0], batch_size):
            for tap, rep in representations(model, x[s:s + batch_size], list(taps)).items():
                chunks[tap].append(rep.detach().double().cpu())
    return {t: torch.cat(c) for t, c in chunks.items()}


def labelled_images(session: Session, name: str, split: str, n: int) -> Tuple[Tensor, Tensor]:
    """n images of a split of model ``name``'s data set with their labels: ((n, 3, h, w) in [0, 1], (n,))."""
    data = StirDataModule(session.data_config(name))
    data.setup()
    images, labels = data.sample_images(split, n, session.cfg.image_seed)
    return to_float(images).to(session.device), labels


def random_init(session: Session, name: str) -> nn.Module:
    """An untrained network of ``name``'s architecture (weights from its recipe's seed), in eval mode."""
    cfg = session.model(name).config
    if cfg is None:
        raise ValueError(f"{name!r} is a bare checkpoint: its architecture recipe is unknown, cannot build a random-init twin")
    with torch.random.fork_rng(devices=[]):  # the global RNG is left as it was
        torch.manual_seed(cfg.seed)
        net = build(cfg.model, cfg.data.num_classes, *channel_stats(cfg.data.name))
    return net.eval().to(session.device)


def stored(store: ResultStore, kind: str, parts: Mapping[str, Any], compute: Callable[[], Any],
           parse: Callable[[Dict[str, Any]], Any], record: Optional[Dict[str, Any]] = None):
    """The stored result of ``kind`` keyed by ``parts``, or ``compute()`` stored the moment it is done."""
    key = ResultStore.key(kind=kind, **parts)
    entry = store.get(kind, key, validate=parse)
    if entry is not None:
        return parse(entry["result"])
    result = compute()
    store.put(kind, key, result.to_dict(), record)
    return result


def digest(x: Tensor) -> str:
    return tensor_digest(x.detach().cpu())
