"""Each measure's property flags, declared where the measure is defined.

A measure module states its facts beside the function, with named fields::

    @measure(family="cka", symmetric=True, distance=False, range=(0, 1), identity=1.0,
             invariances=RIGID, reference=KORNBLITH)
    def linear_cka(x, y, *, form="auto"): ...

and a name that is one function with fixed options is declared right after it::

    declare("rsa_pearson", rsa, options={"compare": "pearson"}, family="rsa", ...)

Both record a :class:`MeasureInfo` in :data:`MEASURES` (the one registration mechanism,
``stir.registry``); :mod:`.registry` collects every module of the package and builds its name
table from them (:func:`declared`). A measure joins the judging experiments' default sets only
where it says ``judging_default=True``. This module imports nothing from the
measures, so every measure module can import it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from torch import Tensor

from stir.registry import Registry

__all__ = [
    "ALL",
    "G_RELU",
    "INF",
    "INVARIANCES",
    "NO_SCALE",
    "RIGID",
    "ROWS",
    "MeasureInfo",
    "declare",
    "declared",
    "measure",
]

Measure = Callable[[Tensor, Tensor], Tensor]

#: Transformations of one side (x -> x T, or x + c) a measure may be invariant to.
#: "permutation" permutes the neurons (columns); "invertible_linear" is any invertible T.
INVARIANCES = ("orthogonal", "isotropic_scaling", "translation", "permutation", "invertible_linear")
ALL = frozenset(INVARIANCES)
RIGID = frozenset({"orthogonal", "isotropic_scaling", "translation", "permutation"})  # CKA-like
NO_SCALE = frozenset({"orthogonal", "translation", "permutation"})
ROWS = frozenset({"orthogonal", "isotropic_scaling", "permutation"})  # cosine of rows: no centring
G_RELU = frozenset({"permutation", "isotropic_scaling", "translation"})
INF = math.inf

# The public implementations the values are checked against (tests/similarity/fixtures), with version.
RESI = "ReSi (mklabunde/resi @ 24ab9e5)"
NETREP = "netrep (ahwillia/netrep @ 0186b8a)"
PLATONIC = "platonic-rep (minyoungg/platonic-rep @ dcd76ba)"
RSATOOLBOX = "rsatoolbox 0.3.2"
KORNBLITH = "Kornblith et al.'s CKA notebook"


@dataclass(frozen=True)
class MeasureInfo:
    """Property flags of one registered measure (with its registered options).

    Invariances are per side: f(x T, y) == f(x, y) == f(x, y T) for every T of the
    kind (translations: x + 1 c^T). ``identity`` is the value on identical inputs
    (None where it is not fixed, e.g. a cross-validated fit). ``metric``: a
    (pseudo-)metric, i.e. symmetric, zero on identical inputs, triangle inequality.
    ``judging_default``: included in the judging experiments' all-measures default (the default sets
    of the ``layer_matching`` and ``grounding`` reports). A measure opts in at its definition
    (``judging_default=True``); a new measure is left out of those reports until it says so.
    ``assignment``: solves an O(d^3) linear assignment over the neurons on the CPU
    (callers skip it at large widths, as layer matching does for the G_ReLU Procrustes).
    """

    name: str
    fn: Measure
    family: str
    symmetric: bool
    distance: bool  # lower is more similar instead of higher
    range: tuple[float, float]
    identity: float | None
    invariances: frozenset[str]
    reference: str  # the public implementation the values are checked against, with version
    metric: bool = False
    min_n: int = 2
    options: Mapping[str, object] = field(default_factory=dict)
    judging_default: bool = False
    assignment: bool = False

    @property
    def kind(self) -> str:
        """"distance" or "similarity"."""
        return "distance" if self.distance else "similarity"


# Every measure module of this package declares its measures at their definitions; the registry
# imports them all on first use (stir.registry.import_package: the modules whose names do not start
# with "_", less these three, which declare none), so a new measure module needs no list.
MEASURES: Registry[MeasureInfo] = Registry("similarity measure", package=__package__,
                                           skip=("registry", "spec", "pairwise"))
_DECLARED: list[MeasureInfo] = []  # declaration order (MEASURES lists by name)


def declare(
    name: str,
    fn: Measure,
    *,
    family: str,
    symmetric: bool,
    distance: bool,
    range: tuple[float, float],  # noqa: A002 - the field's name
    identity: float | None,
    invariances: Iterable[str],
    reference: str,
    metric: bool = False,
    min_n: int = 2,
    options: Mapping[str, object] | None = None,
    judging_default: bool = False,
    assignment: bool = False,
) -> MeasureInfo:
    """Record measure ``name`` (``fn`` with ``options`` fixed) and its flags; returns the record.

    Called in the measure's own module, right after the function (or through :func:`measure`).
    """
    invariances = frozenset(invariances)
    unknown = sorted(invariances - ALL)
    if unknown:
        raise ValueError(
            f"declare({name!r}): unknown invariance(s) {', '.join(unknown)}; valid: {', '.join(INVARIANCES)}"
        )
    if MEASURES.peek(name) is not None:  # checked before anything is recorded (a failed declaration leaves no trace)
        raise ValueError(f"declare({name!r}): a measure of that name is already declared")
    lo, hi = range
    entry = MeasureInfo(
        name, fn, family, symmetric, distance, (lo, hi), identity, invariances, reference,
        metric=metric, min_n=min_n, options=dict(options) if options else {},
        judging_default=judging_default, assignment=assignment,
    )
    MEASURES.add(name, entry)
    _DECLARED.append(entry)
    return entry


def measure(*, name: str | None = None, **flags: object) -> Callable[[Measure], Measure]:
    """Decorator form of :func:`declare`: the function's own name unless ``name`` is given; returns it unchanged."""

    def record(fn: Measure) -> Measure:
        declare(name or fn.__name__, fn, **flags)
        return fn

    return record


def declared() -> tuple[MeasureInfo, ...]:
    """Every declared measure, in declaration order."""
    return tuple(_DECLARED)
