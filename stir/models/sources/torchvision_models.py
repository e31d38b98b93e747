"""``torchvision:ARCH``: a torchvision classification architecture, normalised by torchvision's metadata.

Weights: ``options.weights`` is a state-dict file, or one of the architecture's pretrained tags
(``DEFAULT``, ``IMAGENET1K_V1`` ...), read from torch's hub cache and downloaded there only with
``options.download``; none builds random weights (``num_classes`` sets the head; with a weights
file, its last linear layer's rows do unless ``num_classes`` is given). The input
normalisation is the mean/std of the tag's own transforms (for a file or random weights, of the
architecture's DEFAULT weights): ImageNet's (0.485, 0.456, 0.406) / (0.229, 0.224, 0.225), not
CIFAR's; give ``mean``/``std`` for weights trained with other constants. Images are not resized.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Optional

import torch

from stir.models.sources import SOURCES
from stir.models.sources.base import (LoadedModel, SourceError, SourceOptions, builder_origin, classes_in_weights,
                                      load_weights_file, wrap)

log = logging.getLogger(__name__)

# docs/models.md's sources table, read by docs/hooks/registries.py (torch-free): what it loads, its input
# normalisation, where the weights come from.
LOADS = "`torchvision.models.get_model(ARCH)`"
NORMALISATION = "mean/std of the weights' own `transforms()` (ImageNet's)"
WEIGHTS = ("`weights_ref=FILE` (a state dict; the head size is read from it) or a tag (`weights_ref=DEFAULT`, "
           "from torch's hub cache; downloaded only with `download_weights=true`); none: random weights")


def _weights_enum(arch: str):
    from torchvision.models import get_model_weights

    try:
        return get_model_weights(arch)
    except (KeyError, ValueError):
        return None


@SOURCES.register("torchvision")
def load(name: str, options: SourceOptions) -> LoadedModel:
    from torchvision.models import get_model, list_models

    spec = f"torchvision:{name}"
    if name not in list_models():
        raise SourceError(f"unknown torchvision architecture {name!r}; torchvision.models.list_models() lists them, "
                          f"e.g. {list_models()[:8]}")
    enum = _weights_enum(name)
    tag = _pretrained_tag(enum, options.weights)
    kwargs = dict(options.kwargs)
    if options.num_classes is not None:
        kwargs["num_classes"] = options.num_classes
    record = {"source": "torchvision", "arch": name, "weights": options.weights, "kwargs": dict(kwargs)}
    if tag is not None:
        _check_cached(spec, tag, options.download)
        net = get_model(name, weights=tag, **kwargs)
        record["weights_url"] = tag.url
    else:
        net = get_model(name, weights=None, **kwargs)
        if options.weights is not None and "num_classes" not in kwargs:  # the head the file was trained with
            classes = classes_in_weights(net, options.weights, spec)
            if classes is not None:
                kwargs["num_classes"] = record["kwargs"]["num_classes"] = classes
                net = get_model(name, weights=None, **kwargs)
        if options.weights is not None:
            record["weights"] = str(load_weights_file(net, options.weights, spec))
        else:
            log.warning("%s: random weights (no weights= given)", spec)
    meta = tag if tag is not None else (enum.DEFAULT if enum is not None else None)
    mean = std = None
    if meta is not None:
        transforms = meta.transforms()
        mean, std = tuple(transforms.mean), tuple(transforms.std)
        record["normalization_from"] = f"{meta}.transforms()"
    return wrap(net, options, mean, std, spec, record, origin=builder_origin(spec, options.kwargs))


def _pretrained_tag(enum, weights: Optional[str]):
    """The weights enum member a tag names (``DEFAULT``, ``IMAGENET1K_V1``); None for a file or no weights."""
    if weights is None or enum is None or Path(weights).suffix or os.sep in weights:
        return None
    try:
        return enum[weights]
    except KeyError:
        if Path(weights).exists():
            return None
        raise SourceError(f"torchvision weights {weights!r} is neither a file nor a tag of {enum.__name__}; "
                          f"tags: {['DEFAULT', *enum.__members__]}") from None


def _check_cached(spec: str, tag, download: bool) -> None:
    """Without download permission the tag's file must already be in torch's hub cache."""
    file = Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(tag.url)
    if not download and not file.is_file():
        raise SourceError(
            f"{spec}: pretrained weights {tag} are not on disk (looked in {file}) and downloads are off; "
            "pass download_weights=true to let torchvision download them, or weights=PATH for a local file"
        )
