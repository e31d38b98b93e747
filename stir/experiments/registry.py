"""Experiment kinds by name: each kind's config dataclass, its runner, its units of work, its checks.

``run(ctx, cfg) -> Report`` measures everything (reading what the store holds) and returns the
report as data; ``units(ctx, cfg) -> [callable]`` lists the experiment's independent measurements
in a fixed order, so that ``shard=I shards=N`` processes can each compute every N-th one into the
shared store; ``check(cfg)`` refuses a bad kind config before any work. A new kind is one module
in this package that calls ``register`` and a line in ``_BUILTIN``.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, List

Runner = Callable[[Any, Any], Any]  # (Context, kind config) -> Report


@dataclass(frozen=True)
class Unit:
    """One independent measurement of an experiment: what it measures (for progress and logs) and the
    call that measures it into the store."""

    what: str
    call: Callable[[], Any]

    def __call__(self) -> Any:
        return self.call()


Units = Callable[[Any, Any], List[Unit]]  # (Context, kind config) -> independent measurements


def _no_check(cfg: Any) -> None:
    return None


@dataclass(frozen=True)
class Kind:
    name: str
    config: type  # the kind's dataclass (a subclass of stir.experiments.config.ExperimentConfig)
    run: Runner
    units: Units
    check: Callable[[Any], None] = _no_check


_KINDS: Dict[str, Kind] = {}
# Modules that register the built-in kinds; imported on first use, not at package import.
_BUILTIN = ("pairs", "matrix", "incremental", "stitching", "layer_matching", "grounding", "invariance", "suite", "paper")


def register(kind: Kind) -> None:
    if kind.name in _KINDS and _KINDS[kind.name].run is not kind.run:
        raise ValueError(f"experiment kind {kind.name!r} is registered twice")
    _KINDS[kind.name] = kind


def _load_builtin() -> None:
    for module in _BUILTIN:
        importlib.import_module(f"stir.experiments.{module}")


def kinds() -> List[str]:
    """Every registered experiment kind, sorted."""
    _load_builtin()
    return sorted(_KINDS)


def get(name: str) -> Kind:
    from stir.config.validate import ConfigError

    _load_builtin()
    if name not in _KINDS:
        raise ConfigError(f"experiment.kind={name!r} is not a valid choice; choose one of {sorted(_KINDS)}")
    return _KINDS[name]
