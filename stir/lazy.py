"""Attributes of a package imported on first use (PEP 562), so that importing the package is cheap.

    __getattr__, __dir__ = lazy_attributes(__name__, {"Estimator": "stir.measure.plan", ...}, globals())

The command line is checked, and ``--help`` answered, before torch is imported: the packages whose
public names live in modules that import torch (``stir``, ``stir.measure``, ``stir.inversion``)
resolve those names only when they are first read.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, List, Mapping, Tuple


def lazy_attributes(package: str, table: Mapping[str, str],
                    namespace: Dict[str, Any]) -> Tuple[Callable[[str], Any], Callable[[], List[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``: ``table`` maps each lazy name to
    the module that defines it; ``namespace`` is the package's ``globals()``."""

    def __getattr__(name: str) -> Any:
        if name in table:
            return getattr(importlib.import_module(table[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> List[str]:
        return sorted(list(namespace) + list(table))

    return __getattr__, __dir__
