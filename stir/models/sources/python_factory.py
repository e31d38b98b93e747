"""``python:module.path:factory``: any ``nn.Module`` a factory returns, for everything else.

The factory is called with ``options.kwargs``; ``options.weights`` is a state-dict file loaded
into what it returns. The network must take images in [0, 1] (or give ``mean``/``std``) and
return (n, classes) logits.
"""
from __future__ import annotations

import hashlib
import inspect
import json
from typing import Any

from torch import nn

from stir.models.sources import SOURCES
from stir.models.sources.base import SourceError, SourceOptions, LoadedModel, import_object, load_weights_file, wrap

# docs/models.md's sources table, read by docs/hooks/registries.py (torch-free): what it loads, its input
# normalisation, where the weights come from.
LOADS = "whatever `factory()` returns (an `nn.Module`)"
NORMALISATION = "none: it must take [0, 1] images (or give `mean`/`std` in a zoo entry)"
WEIGHTS = "optional `weights_ref=FILE`"


@SOURCES.register("python")
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
    record["code_sha256"] = factory_code(factory)
    origin = f"python factory {record['code_sha256']} kwargs {json.dumps(record['kwargs'], sort_keys=True, default=str)}"
    return wrap(net, options, None, None, spec, record, origin=origin)


def factory_code(factory: Any) -> str:
    """sha256 hex of a factory's source and of its module's whole source: what it builds, and what
    that may call there without leaving a trace in the module tree (its qualified name where Python
    has no source)."""
    h = hashlib.sha256(b"stir-factory-v1\n")
    for obj in (factory, inspect.getmodule(factory)):
        try:
            h.update(inspect.getsource(obj).encode())
        except (OSError, TypeError):
            h.update(f"<no source: {getattr(obj, '__qualname__', None) or getattr(obj, '__name__', repr(type(obj)))}>".encode())
        h.update(b"\0")
    return h.hexdigest()
