"""One registration mechanism for every extension point (timm's way).

An extension point (architectures, model sources, similarity measures, experiment kinds) keeps a
:class:`Registry`; each entry registers itself where it is defined, with a decorator
(``@ARCHS.register("resnet18")``) or a call (``KINDS.add(name, kind)``); one import of the package
that holds the entries (:func:`import_package`: ``pkgutil`` over its modules) collects them, so a
new entry is one new module and never a line in a list; and the registry lists itself
(:meth:`Registry.names`), which is where tests, ``--help`` and the documentation's tables read it.

Nothing here imports torch: the command-line check (``stir.experiments.schema``) uses it too.
"""
from __future__ import annotations

import importlib
import pkgutil
from types import MappingProxyType
from typing import Callable, Dict, Generic, Iterable, Iterator, List, Mapping, Optional, Tuple, TypeVar

T = TypeVar("T")


def import_package(package: str, skip: Iterable[str] = ()) -> List[str]:
    """Import every module directly inside ``package`` (not its subpackages' modules), sorted by name,
    leaving out private ones (``_name``) and the names in ``skip``; returns the module names imported. Registering is what
    importing a module of an extension point does, so this is the one import that collects it."""
    pkg = importlib.import_module(package)
    left_out = set(skip)
    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name not in left_out and not m.name.startswith("_"))
    for name in names:
        importlib.import_module(f"{package}.{name}")
    return names


class Registry(Generic[T]):
    """Name -> entry of one extension point; entries register themselves at their definition.

    ``what`` names an entry in messages ("architecture", "model source"); ``package`` is the package
    whose modules define the entries, imported on first use (never at import of the registry, which
    keeps importing it free of side effects); ``skip`` its modules that define none.
    """

    def __init__(self, what: str, package: Optional[str] = None, skip: Iterable[str] = ()) -> None:
        self.what = what
        self.package = package
        self.skip = tuple(skip)
        self._entries: Dict[str, T] = {}
        self._collected = package is None

    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` under ``name``; the same entry again is a no-op (a module imported twice)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.what} needs a non-empty name, got {name!r}")
        if name in self._entries and self._entries[name] is not entry:
            raise ValueError(f"{self.what} {name!r} is registered twice")
        self._entries[name] = entry
        return entry

    def register(self, name: Optional[str] = None) -> Callable[[T], T]:
        """Decorator form of :meth:`add`: the object's own ``__name__`` unless ``name`` is given."""

        def wrap(entry: T) -> T:
            self.add(name or getattr(entry, "__name__"), entry)
            return entry

        return wrap

    def peek(self, name: str) -> Optional[T]:
        """The entry registered as ``name`` so far, without collecting (for checks made while registering)."""
        return self._entries.get(name)

    def remove(self, name: str) -> None:
        """Forget ``name`` (tests that register a throwaway entry)."""
        self._entries.pop(name, None)

    def collect(self) -> "Registry[T]":
        """Import every module of the registry's package once, so that each has registered its entries."""
        if not self._collected:
            self._collected = True  # first: a module of the package may itself ask the registry
            try:
                import_package(self.package, self.skip)
            except BaseException:
                self._collected = False
                raise
        return self

    def names(self) -> List[str]:
        """Every registered name, sorted."""
        return sorted(self.collect()._entries)

    def items(self) -> Iterator[Tuple[str, T]]:
        """(name, entry) of every registered entry, sorted by name."""
        self.collect()
        return iter(sorted(self._entries.items()))

    def view(self) -> Mapping[str, T]:
        """A read-only live view of name -> entry, in registration order (entries added later appear in it)."""
        return MappingProxyType(self._entries)

    def mapping(self) -> Dict[str, T]:
        """A copy of name -> entry, sorted by name."""
        return dict(self.items())

    def __contains__(self, name: object) -> bool:
        return name in self.collect()._entries

    def get(self, name: str, hint: str = "") -> T:
        """The entry called ``name``; a ValueError naming the choices otherwise (``hint``: what to write)."""
        self.collect()
        if name not in self._entries:
            raise ValueError(f"unknown {self.what} {name!r}; choose one of {self.names()}{hint}")
        return self._entries[name]
