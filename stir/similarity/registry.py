"""Name -> measure registry, so configs and STIR can name any measure by string."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import NamedTuple

from torch import Tensor

from .cca import cca, cca_squared, pwcca, svcca
from .cka import linear_cka, linear_cka_debiased, rbf_cka
from .procrustes import procrustes, procrustes_distance
from .regression import linear_regression
from .relu import relu_cka, relu_procrustes, relu_procrustes_distance

__all__ = ["SYMMETRIC", "UnknownMeasureError", "get", "is_distance", "is_symmetric", "names"]

Measure = Callable[[Tensor, Tensor], Tensor]


class _Entry(NamedTuple):
    fn: Measure
    symmetric: bool  # f(x, y) == f(y, x)
    distance: bool  # lower is more similar (0 for identical) instead of higher


_MEASURES: Mapping[str, _Entry] = MappingProxyType(
    {
        "linear_cka": _Entry(linear_cka, True, False),
        "linear_cka_debiased": _Entry(linear_cka_debiased, True, False),
        "rbf_cka": _Entry(rbf_cka, True, False),
        "cca": _Entry(cca, True, False),
        "cca_squared": _Entry(cca_squared, True, False),
        "svcca": _Entry(svcca, True, False),
        "pwcca": _Entry(pwcca, False, False),
        "linear_regression": _Entry(linear_regression, False, False),
        "procrustes": _Entry(procrustes, True, False),
        "procrustes_distance": _Entry(procrustes_distance, True, True),
        "relu_cka": _Entry(relu_cka, True, False),
        "relu_procrustes": _Entry(relu_procrustes, True, False),
        "relu_procrustes_distance": _Entry(relu_procrustes_distance, True, True),
    }
)

#: Read-only mapping name -> whether the measure is symmetric in (x, y).
SYMMETRIC: Mapping[str, bool] = MappingProxyType({k: v.symmetric for k, v in _MEASURES.items()})


class UnknownMeasureError(ValueError, KeyError):
    """Unknown measure name; both a ValueError and a KeyError."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


def names() -> list[str]:
    """Sorted names of all registered measures."""
    return sorted(_MEASURES)


def _entry(name: str) -> _Entry:
    try:
        return _MEASURES[name]
    except (KeyError, TypeError):
        raise UnknownMeasureError(
            f"unknown similarity measure {name!r}; valid names: {', '.join(names())}"
        ) from None


def get(name: str, **kwargs: object) -> Measure:
    """The measure called ``name``, with keyword options bound if given.

    ``get("rbf_cka", threshold=0.5)`` returns a ``functools.partial``; unknown
    names or options raise ValueError listing the valid ones.
    """
    fn = _entry(name).fn
    if not kwargs:
        return fn
    options = [
        p.name for p in inspect.signature(fn).parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    unknown = sorted(set(kwargs) - set(options))
    if unknown:
        raise ValueError(
            f"{name} does not take option(s) {', '.join(unknown)}; "
            f"valid options: {', '.join(options) if options else '(none)'}"
        )
    return functools.partial(fn, **kwargs)


def is_symmetric(name: str) -> bool:
    """Whether measure ``name`` satisfies f(x, y) == f(y, x)."""
    return _entry(name).symmetric


def is_distance(name: str) -> bool:
    """Whether ``name`` is a distance (lower = more similar, 0 for identical) rather than a similarity."""
    return _entry(name).distance
