"""Experiment kinds by name: each kind's config dataclass, its runner, its units of work, its checks.

``run(ctx, cfg) -> Report`` measures everything (reading what the store holds) and returns the
report as data; ``units(ctx, cfg) -> [callable]`` lists the experiment's independent measurements
in a fixed order, so that ``shard=I shards=N`` processes can each compute every N-th one into the
shared store; ``check(cfg)`` refuses a bad kind config before any work; ``report_name`` and
``nonfinite`` say how its report is named and whether it can report a model that is not finite; ``models(cfg)``
lists the models an experiment names (its config's ``model_names``).

A new kind is four new files and no edit of an existing one: its module (or package) in
stir/experiments that calls ``register`` (every module of the package is imported on first use);
beside it, ``stir/experiments/<module>_config.py`` with its config dataclass declared
``@kind_config(name)`` (torch-free: the command line is checked against ``schema.KIND_CONFIGS``, which
imports those modules only, before the application is imported); a YAML preset whose ``compute``
follows ``schema.COMPUTE_CONVENTION``; and its test (docs/architecture.md#adding-things).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List

from stir.registry import Registry

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
    config: type  # the kind's dataclass (a subclass of stir.experiments.schema.ExperimentConfig, in <module>_config.py)
    run: Runner
    units: Units
    check: Callable[[Any], None] = _no_check
    # The report folder's name (before its settings hash): the experiment's name unless the kind says
    # otherwise (a pair: pair_<ref>_vs_<target>).
    report_name: Callable[[Any, Any], str] = _named_by_experiment
    # Whether a model that is not finite (allow_nonfinite=true) can be reported: only kinds whose every
    # number goes through stir.measure, which makes them NaN; the others would compute on NaN tensors.
    nonfinite: bool = False

    def models(self, cfg: Any, common: Any = None) -> List[str]:
        """The model names the experiment ``cfg`` of this kind measures, in order, once each (its config's
        ``model_names``; ``common``: the common settings, whose ``ref`` and ``target`` a pair reads)."""
        if not isinstance(cfg, self.config):
            raise TypeError(f"experiment kind {self.name!r} reads a {self.config.__name__}, got {type(cfg).__name__}")
        return cfg.model_names(common)


# A kind's module registers it (``register(Kind(...))``); the registry imports every module of
# stir.experiments on first use, so a new kind needs no list of modules to be added to.
KINDS: Registry[Kind] = Registry("experiment kind", package="stir.experiments")


def register(kind: Kind) -> None:
    """Register ``kind``; its config must be the dataclass declared for its name (``@kind_config(name)``
    in the kind's ``<module>_config.py``, what the command line is checked against)."""
    declared = getattr(kind.config, "kind_name", None)
    if declared != kind.name:
        raise ValueError(f"experiment kind {kind.name!r}: its config {kind.config.__name__} is declared for "
                         f"{declared!r}; declare it with @kind_config({kind.name!r}) in the torch-free module beside the "
                         f"kind's code, stir/experiments/<module>_config.py")
    known = KINDS.peek(kind.name)
    if known is not None and known.run is not kind.run:
        raise ValueError(f"experiment kind {kind.name!r} is registered twice")
    KINDS.remove(kind.name)
    KINDS.add(kind.name, kind)


def kinds() -> List[str]:
    """Every registered experiment kind, sorted."""
    return KINDS.names()


def get(name: str) -> Kind:
    from stir.config.validate import ConfigError

    if name not in KINDS:
        raise ConfigError(f"experiment.kind={name!r} is not a valid choice; choose one of {kinds()}")
    return KINDS.get(name)
