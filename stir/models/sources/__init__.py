"""Model sources: a string names a model anywhere, a registry maps its prefix to a loader.

Each module of this package registers its ``load`` under its prefix (``@SOURCES.register("timm")``);
``names()`` lists them (the table of docs/models.md is generated from it). The built-in ones:

    zoo:NAME, NAME, PATH            this project's zoo / run folders (``stir.zoo``)
    robustbench:MODEL_NAME          RobustBench's model zoo (optional extra ``.[robustbench]``)
    torchvision:ARCH                a torchvision architecture (weights file or pretrained tag)
    timm:ARCH                       a timm architecture (optional extra ``.[timm]``)
    python:module.path:factory      any nn.Module a factory returns
    realnet:NAME                    a real pretrained CIFAR-10 network of shared/realnets
                                    (``stir.models.realnets``; a registered architecture, all its taps)

Every loader returns a ``LoadedModel``: the module (images in [0, 1] -> (n, classes) logits, eval
mode, on the CPU) with its ``penultimate`` tap, a content identity and a record (``realnet``
returns the registered network itself, with every tap; the others wrap the foreign network). Nothing is
downloaded unless ``SourceOptions.download`` allows it.

The ``zoo`` prefix is reserved here: zoo models need this project's training layer, a higher
floor than ``stir.models``, so ``stir.zoo`` resolves them.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from torch import nn

from stir.models.sources.base import (
    LoadedModel, RobustBenchOptions, SourceError, SourcedModel, SourceOptions, content_identity, split_spec, wrap,
)
from stir.registry import Registry

ZOO = "zoo"
Loader = Callable[[str, SourceOptions], LoadedModel]  # (name after the prefix, options) -> model

# Each source module registers its loader where it is defined (``@SOURCES.register("timm")`` on its
# ``load``); the registry imports every module of this package on first use, and each module imports
# its optional library only when a model is loaded. A new source is one new module.
SOURCES: Registry[Loader] = Registry("model source", package=__name__, skip=("base",))


def names() -> list[str]:
    """Every source prefix, ``zoo`` first, the others sorted."""
    return [ZOO, *SOURCES.names()]


def is_sourced(spec: str) -> bool:
    """Whether ``spec`` names a model of a library source (a known prefix other than zoo)."""
    prefix, _ = split_spec(spec)
    return prefix in SOURCES


def load(spec: str, options: SourceOptions = SourceOptions()) -> LoadedModel:
    """The model that ``spec`` ('torchvision:resnet18', ...) names, made with ``options``."""
    prefix, name = split_spec(spec)
    if prefix == ZOO:
        raise SourceError(f"{spec!r}: zoo models are resolved by stir.zoo (evaluate.py ref={name})")
    if prefix not in SOURCES:
        raise SourceError(f"unknown model source {prefix!r} in {spec!r}; sources: {names()} "
                          "(written SOURCE:NAME, e.g. torchvision:resnet18)")
    if not name:
        raise SourceError(f"{spec!r} names no model after '{prefix}:'")
    return SOURCES.get(prefix)(name, options)


def from_module(net: nn.Module, mean: Optional[Sequence[float]] = None, std: Optional[Sequence[float]] = None,
                tap: Optional[str] = None, name: str = "module") -> LoadedModel:
    """Any ``nn.Module`` as a model of this library: ``mean``/``std`` normalise its [0, 1] inputs
    (omit them when it normalises itself), ``tap`` says what ``penultimate`` reads (default: the
    input of its final ``nn.Linear``). The module is put in eval mode and used as it is (not copied)."""
    return wrap(net, SourceOptions(tap=tap), mean, std, f"python object {name}", {"source": "module", "class": type(net).__name__})


__all__ = ["from_module", "LoadedModel", "RobustBenchOptions", "SOURCES", "SourceError", "SourceOptions", "SourcedModel", "ZOO",
           "content_identity", "is_sourced", "load", "names", "split_spec"]
