"""Experiment kinds by name: ``kind -> (run, units)``.

``run(session) -> Report`` measures everything (reading what the store holds) and draws it;
``units(session) -> [callable]`` lists the experiment's independent measurements in a fixed order,
so that ``shard=I shards=N`` processes can each compute every N-th one into the shared store.
A new kind is one module in this package that calls ``register`` and a line in ``_BUILTIN``.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, List

Runner = Callable[[Any], Any]  # Session -> Report
Units = Callable[[Any], List[Callable[[], Any]]]  # Session -> independent measurements


@dataclass(frozen=True)
class Kind:
    name: str
    run: Runner
    units: Units


_KINDS: Dict[str, Kind] = {}
# Modules that register the built-in kinds; imported on first use, not at package import.
_BUILTIN = ("pairs", "matrix", "incremental", "stitching", "layer_matching", "grounding", "invariance")


def register(name: str, run: Runner, units: Units) -> None:
    if name in _KINDS and _KINDS[name].run is not run:
        raise ValueError(f"experiment kind {name!r} is registered twice")
    _KINDS[name] = Kind(name, run, units)


def _load_builtin() -> None:
    for module in _BUILTIN:
        importlib.import_module(f"stir.evaluation.experiments.{module}")


def kinds() -> List[str]:
    """Every registered experiment kind, sorted."""
    _load_builtin()
    return sorted(_KINDS)


def get(name: str) -> Kind:
    _load_builtin()
    if name not in _KINDS:
        raise ValueError(f"experiment.kind={name!r}; choose one of {sorted(_KINDS)}")
    return _KINDS[name]
