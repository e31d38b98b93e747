"""``timm:ARCH``: a timm architecture, normalised by its ``pretrained_cfg`` (optional extra ``.[timm]``).

Weights: ``options.weights`` is a state-dict file, or ``pretrained`` (timm's hub, only with
``options.download``); none builds random weights (``num_classes`` sets the head). The input
normalisation is the mean/std of the model's ``pretrained_cfg`` (timm's own metadata).
"""
from __future__ import annotations

import logging

from stir.models.sources import SOURCES
from stir.models.sources.base import (LoadedModel, SourceError, SourceOptions, builder_origin, classes_in_weights,
                                      load_weights_file, wrap)

log = logging.getLogger(__name__)

# docs/models.md's sources table, read by docs/hooks/registries.py (torch-free): what it loads, its input
# normalisation, where the weights come from.
LOADS = "`timm.create_model(ARCH)` (extra `.[timm]`)"
NORMALISATION = "the model's `pretrained_cfg` mean/std"
WEIGHTS = "`weights_ref=FILE`, or `weights_ref=pretrained` with `download_weights=true`"


@SOURCES.register("timm")
def load(name: str, options: SourceOptions) -> LoadedModel:
    spec = f"timm:{name}"
    try:
        import timm
    except ImportError as err:
        raise SourceError(f"{spec}: timm is not installed; install the extra: pip install -e \".[timm]\"") from err
    if not timm.is_model(name):
        raise SourceError(f"unknown timm architecture {name!r}; timm.list_models('*pattern*') lists them")
    pretrained = options.weights == "pretrained"
    if pretrained and not options.download:
        raise SourceError(f"{spec}: weights=pretrained downloads from timm's hub, and downloads are off; pass "
                          "download_weights=true, or weights=PATH for a local state-dict file")
    kwargs = dict(options.kwargs)
    if options.num_classes is not None:
        kwargs["num_classes"] = options.num_classes
    net = timm.create_model(name, pretrained=pretrained, **kwargs)
    if options.weights is not None and not pretrained and "num_classes" not in kwargs:  # the file's head
        classes = classes_in_weights(net, options.weights, spec)
        if classes is not None:
            kwargs["num_classes"] = classes
            net = timm.create_model(name, pretrained=False, **kwargs)
    record = {"source": "timm", "arch": name, "weights": options.weights, "kwargs": kwargs, "timm": timm.__version__}
    if options.weights is not None and not pretrained:
        record["weights"] = str(load_weights_file(net, options.weights, spec))
    elif options.weights is None:
        log.warning("%s: random weights (no weights= given)", spec)
    cfg = getattr(net, "pretrained_cfg", None) or {}
    mean, std = cfg.get("mean"), cfg.get("std")
    record["normalization_from"] = "pretrained_cfg" if mean is not None else None
    return wrap(net, options, mean, std, spec, record, origin=builder_origin(spec, options.kwargs))
