"""``python:module.path:factory``: any ``nn.Module`` a factory returns, for everything else.

The factory is called with ``options.kwargs``; ``options.weights`` is a state-dict file loaded
into what it returns. The network must take images in [0, 1] (or give ``mean``/``std``) and
return (n, classes) logits.
"""
from __future__ import annotations

from torch import nn

from stir.models.sources.base import SourceError, SourceOptions, LoadedModel, import_object, load_weights_file, wrap


def load(name: str, options: SourceOptions) -> LoadedModel:
    spec = f"python:{name}"
    factory = import_object(name, what="model factory")
    if not callable(factory):
        raise SourceError(f"{spec}: {name!r} is not callable")
    try:
        net = factory(**dict(options.kwargs))
    except Exception as err:  # the user's factory: its failure in one line (HYDRA_FULL_ERROR=1 for the traceback)
        raise SourceError(f"{spec}: the factory raised {type(err).__name__}: {err} (called with kwargs "
                          f"{dict(options.kwargs)})") from err
    if not isinstance(net, nn.Module):
        raise SourceError(f"{spec}: the factory returned a {type(net).__name__}, not an nn.Module")
    record = {"source": "python", "factory": name, "kwargs": dict(options.kwargs), "weights": None}
    if options.weights is not None:
        record["weights"] = str(load_weights_file(net, options.weights, spec))
    return wrap(net, options, None, None, spec, record)
