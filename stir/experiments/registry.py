"""Experiment kinds by name: each kind's config dataclass, its runner, its units of work, its checks.

``run(ctx, cfg) -> Report`` measures everything (reading what the store holds) and returns the
report as data; ``units(ctx, cfg) -> [callable]`` lists the experiment's independent measurements
in a fixed order, so that ``shard=I shards=N`` processes can each compute every N-th one into the
shared store; ``check(cfg)`` refuses a bad kind config before any work; ``report_name`` and
``nonfinite`` say how its report is named and whether it can report a model that is not finite. A new kind is one module
in this package that calls ``register`` (every module of the package is imported on first use).
"""
from __future__ import annotations

import importlib
import pkgutil
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


def _named_by_experiment(ctx: Any, cfg: Any) -> str:
    return cfg.name


@dataclass(frozen=True)
class Kind:
    """Everything the application needs to know about one experiment kind, declared by its module."""

    name: str
    config: type  # the kind's dataclass (a subclass of stir.experiments.schema.ExperimentConfig)
    run: Runner
    units: Units
    check: Callable[[Any], None] = _no_check
    # The report folder's name (before its settings hash): the experiment's name unless the kind says
    # otherwise (a pair: pair_<ref>_vs_<target>).
    report_name: Callable[[Any, Any], str] = _named_by_experiment
    # Whether a model that is not finite (allow_nonfinite=true) can be reported: only kinds whose every
    # number goes through stir.measure, which makes them NaN; the others would compute on NaN tensors.
    nonfinite: bool = False


_KINDS: Dict[str, Kind] = {}


def register(kind: Kind) -> None:
    if kind.name in _KINDS and _KINDS[kind.name].run is not kind.run:
        raise ValueError(f"experiment kind {kind.name!r} is registered twice")
    _KINDS[kind.name] = kind


def _load_builtin() -> None:
    """Import every module of this package (on first use, not at package import): a kind's module
    registers it, so a new kind needs no list of modules to be added to."""
    import stir.experiments as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")


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
