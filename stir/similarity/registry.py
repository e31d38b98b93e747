"""Name -> measure registry, so configs and STIR can name any measure by string.

Every entry carries its property flags (:class:`MeasureInfo`: similarity or
distance, range, symmetry, metric, invariances, family, reference
implementation), which the tests check by property. The flags are declared at
each measure's definition (``@measure(...)`` or ``declare(...)``, see
:mod:`.spec`); this module collects them from every measure module of the package
(a new measure is its module: no list to add it to). ``get`` also accepts the ids
of the similarity-repository convention (Cloos et al., ``similarity.make``),
``measure/<repo>/<name>[-<param>=<value>]...``, for the measures this registry
has, e.g. ``measure/netrep/procrustes-distance=angular``; ``names(kind="id")``
lists them.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType

from torch import Tensor

from .spec import INVARIANCES, MEASURES, MeasureInfo, declared

__all__ = [
    "INVARIANCES",
    "KINDS",
    "SYMMETRIC",
    "MeasureInfo",
    "UnknownMeasureError",
    "get",
    "info",
    "is_distance",
    "is_symmetric",
    "names",
    "resolve",
]

Measure = Callable[[Tensor, Tensor], Tensor]



def _collect() -> list[MeasureInfo]:
    """The declared measures of every measure module of this package (stir.similarity.spec.MEASURES
    imports them all), module by module in name order, each in declaration order."""
    MEASURES.collect()  # importing the modules is what declares the measures
    entries = list(declared())
    package = __package__ + "."
    stray = sorted(e.name for e in entries if not e.fn.__module__.startswith(package))
    if stray:
        raise RuntimeError(f"similarity registry: measures declared outside its modules: {', '.join(stray)}")
    return sorted(entries, key=lambda e: e.fn.__module__)  # stable: declaration order within a module


_ENTRIES = _collect()

_MEASURES: Mapping[str, MeasureInfo] = MappingProxyType({e.name: e for e in _ENTRIES})

#: Read-only mapping name -> whether the measure is symmetric in (x, y).
SYMMETRIC: Mapping[str, bool] = MappingProxyType({k: v.symmetric for k, v in _MEASURES.items()})

# ------------------------------------------------------------------ similarity-repository ids
# (repos, standardized name, our measure, fixed options[, the named repos' own options]). "{p}" in a
# name matches one value of option p ("{topk}" -> k); every id also exists under the repo "stir".
# An id under a package's name returns that package's value: where its convention differs from
# ours, the fifth element holds the options that select it (documented in the measure's docstring,
# with the package's commit and line), and measure/stir/<name> keeps the project's convention.
_OPTION_OF = {"topk": "k", "alpha": "alpha", "lambda": "alpha"}
_RESI_EOS = {"divide_by": "width"}  # ReSi: 1 / max(d1, d2), repsim/measures/eigenspace_overlap.py:24
_SVCCA_PWCCA = {"weights": "svcca"}  # Google svcca pwcca.py as copied in repsim/measures/cca.py:472-495
_NETREP_WHITEN = {"whiten": "netrep"}  # netrep/utils.py whiten:219-243 on zero-padded input
_RESI_RSM = {"norm": "spectral"}  # ReSi: np.linalg.norm(S - Sp, ord=2) of square matrices, rsm_norm_difference.py
_IDS: list[tuple] = [
    (("resi", "platonic", "contrasim"), "cka-kernel=linear-hsic=gretton-score", "linear_cka", {}),
    (("contrasim",), "cka-kernel=linear-hsic=song-score", "linear_cka_debiased", {}),
    (("netrep",), "cka-kernel=linear-hsic=gretton-distance=angular", "cka_angular", {}),
    ((), "cka-kernel=linear-hsic=gretton-distance=euclidean", "cka_euclidean", {}),
    (("contrasim", "svcca"), "cca-score", "cca", {}),
    (("contrasim", "svcca"), "cca-squared_score", "cca_squared", {}),
    (("resi",), "svcca-var=0.99-score", "svcca", {}),
    (("resi", "svcca"), "pwcca-score", "pwcca", {}, _SVCCA_PWCCA),
    (("contrasim",), "pwcca-score", "pwcca", {}),
    ((), "linear_regression-r2", "linear_regression", {}),
    (("nn_similarity_index",), "nbs-score", "procrustes", {}),
    ((), "procrustes-score", "procrustes", {}),
    (("resi",), "orthogonal_procrustes_centered_and_normalized", "procrustes_distance", {}),
    (("netrep",), "procrustes-distance=angular", "procrustes_angular", {}),
    (("resi",), "orthogonal_angular_shape_metric_centered", "procrustes_angular", {}),
    ((), "nbs-distance=angular", "procrustes_angular", {}),
    (("resi",), "procrustes-distance=euclidean", "bures_distance", {}),
    ((), "bures_distance", "bures_distance", {}),
    (("netrep",), "shape_metric-alpha={alpha}-distance=angular", "shape_metric", {"distance": "angular"},
     _NETREP_WHITEN),
    (("netrep",), "shape_metric-alpha={alpha}-distance=euclidean", "shape_metric", {"distance": "euclidean"},
     _NETREP_WHITEN),
    (("netrep",), "cca-distance=angular", "shape_metric", {"alpha": 0.0}, _NETREP_WHITEN),
    (("netrep",), "permutation_metric-distance=angular", "permutation_metric", {}),
    (("netrep",), "permutation_metric-distance=euclidean", "permutation_metric", {"distance": "euclidean"}),
    (("rsatoolbox", "resi"), "rsa-rdm=correlation-compare=spearman", "rsa", {}),
    (("rsatoolbox",), "rsa-rdm=correlation-compare=pearson", "rsa_pearson", {}),
    (("rsatoolbox",), "rsa-rdm=correlation-compare=tau_a", "rsa_kendall", {}),
    (("rsatoolbox",), "rsa-rdm=correlation-compare=cosine", "rsa", {"compare": "cosine"}),
    (("rsatoolbox",), "rsa-rdm=squared_euclidean-compare=spearman", "rsa_euclidean", {}),
    (("resi",), "rsa-rdm=euclidean-compare=spearman", "rsa_euclidean", {}),
    (("rsatoolbox",), "rsa-rdm=squared_euclidean-compare=pearson", "rsa", {"rdm": "euclidean", "compare": "pearson"}),
    (("rsatoolbox",), "rsa-rdm=squared_euclidean-compare=tau_a", "rsa",
     {"rdm": "euclidean", "compare": "kendall_tau_a"}),
    (("rsatoolbox",), "rsa-rdm=squared_euclidean-compare=cosine", "rsa", {"rdm": "euclidean", "compare": "cosine"}),
    (("platonic",), "mutual_knn-topk={topk}", "mutual_knn", {}),
    (("platonic",), "cycle_knn-topk={topk}", "cycle_knn", {}),
    (("platonic",), "cknna-topk={topk}", "cknna", {}),
    (("resi",), "jaccard_similarity", "jaccard_knn", {}),
    (("resi",), "rank_similarity", "rank_similarity", {}),
    (("resi",), "second_order_cosine_similarity", "second_order_cosine", {}),
    (("resi",), "distance_correlation", "distance_correlation", {}),
    (("resi",), "eigenspace_overlap_score", "eigenspace_overlap", {}, _RESI_EOS),
    (("resi",), "gulp", "gulp", {"squared": True}),
    ((), "gulp-lambda={lam}", "gulp", {}),
    ((), "ridge-lambda={alpha}-r2-cv=5folds", "linear_predictivity", {}),
    ((), "ridge-lambda={alpha}-pearsonr-cv=5folds", "linear_predictivity_r", {}),
    (("resi",), "magnitude_difference", "magnitude_difference", {}),
    (("resi",), "concentricity_difference", "concentricity_difference", {}),
    (("resi",), "uniformity_difference", "uniformity_difference", {}),
    # issue 32: the families added after the package conventions. ReSi's standardized names first; then ReSi's
    # functions that its measure list (repsim/measures/__init__.py CLASSES) leaves out, by the function's name.
    (("resi",), "rsm_norm_difference", "rsm_norm_difference", {}, _RESI_RSM),
    (("resi",), "hard_correlation_match", "hard_correlation_match", {}),
    (("resi",), "soft_correlation_match", "soft_correlation_match", {}),
    (("resi",), "aligned_cosine_similarity", "aligned_cosine", {}),
    (("resi",), "permutation_procrustes", "permutation_procrustes", {}),
    (("resi",), "orthogonal_procrustes", "uncentred_procrustes", {}),
    (("resi",), "orthogonal_angular_shape_metric", "uncentred_procrustes_angular", {}),
    (("resi",), "permutation_angular_shape_metric", "permutation_procrustes_angular", {}),
    (("resi",), "joint_rank_jaccard_similarity", "joint_rank_jaccard", {}),
    # platonic-rep's lcs_knn is the mean length in [0, k]: its id names lcs_knn_length, whose flags say so;
    # measure/stir/lcs_knn-topk=... (the first row, tried first) keeps the project's lcs_knn in [0, 1].
    ((), "lcs_knn-topk={topk}", "lcs_knn", {}),
    (("platonic",), "lcs_knn-topk={topk}", "lcs_knn_length", {}),
]
_PARAM = re.compile(r"\{(\w+)\}")
_EXAMPLE = {"alpha": "0.5", "topk": "10", "lam": "0.1"}


def _id_pattern(template: str) -> re.Pattern:
    parts = _PARAM.split(template)  # literal, param, literal, ...
    regex = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>[0-9.eE+-]+?)" for i, p in enumerate(parts))
    return re.compile(regex + "$")


_ID_TABLE = [(e[0], _id_pattern(e[1]), e[1], e[2], e[3], e[4] if len(e) > 4 else {}) for e in _IDS]


def _parse_value(text: str) -> float | int:
    value = float(text)
    return int(value) if value.is_integer() and re.fullmatch(r"[+-]?\d+", text) else value


def _resolve_id(name: str) -> tuple[str, dict] | None:
    """(registered name, options) of a similarity-repository id, or None."""
    parts = name.split("/")
    if len(parts) != 3 or parts[0] != "measure":
        return None
    _, repo, rest = parts
    for repos, pattern, _, target, opts, own in _ID_TABLE:
        if repo != "stir" and repo not in repos:
            continue
        match = pattern.match(rest)
        if match:
            options = {**opts, **own} if repo != "stir" else dict(opts)
            for param, text in match.groupdict().items():
                try:
                    options[_OPTION_OF.get(param, param)] = _parse_value(text)
                except ValueError:
                    return None
            return target, options
    return None


def _ids() -> list[str]:
    """Every accepted id, parameters shown with an example value."""
    out = []
    for repos, _, template, _, _, _ in _ID_TABLE:
        concrete = _PARAM.sub(lambda m: _EXAMPLE.get(m.group(1), "1"), template)
        out.extend(f"measure/{repo}/{concrete}" for repo in (*repos, "stir"))
    return sorted(set(out))


class UnknownMeasureError(ValueError, KeyError):
    """Unknown measure name; both a ValueError and a KeyError."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


#: The values of ``names(kind=...)``.
KINDS = ("all", "similarity", "distance", "metric", "judging", "id")


def names(kind: str = "all", *, family: str | None = None, invariant_to: str | None = None) -> list[str]:
    """Sorted names of the registered measures, optionally filtered.

    ``kind``: "all" (default), "similarity" (higher is more similar), "distance",
    "metric" (distances satisfying the triangle inequality), "judging" (the
    judging experiments' all-measures default) or "id" (the accepted
    similarity-repository ids, parameters shown with an example value).
    ``family`` (e.g. "cka", "rsa", "neighbours") and ``invariant_to`` (one of
    :data:`INVARIANCES`) narrow the registered names further.
    """
    if kind not in KINDS:
        raise ValueError(f"names: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if kind == "id":
        return _ids()
    if invariant_to is not None and invariant_to not in INVARIANCES:
        raise ValueError(f"names: invariant_to must be one of {', '.join(INVARIANCES)}, got {invariant_to!r}")
    keep = {
        "all": lambda e: True,
        "similarity": lambda e: not e.distance,
        "distance": lambda e: e.distance,
        "metric": lambda e: e.metric,
        "judging": lambda e: e.judging_default,
    }[kind]
    return sorted(
        k
        for k, e in _MEASURES.items()
        if keep(e) and (family is None or e.family == family) and (invariant_to is None or invariant_to in e.invariances)
    )


def resolve(name: str) -> tuple[MeasureInfo, dict]:
    """(flags of the registered measure, options the name fixes) for a name or an id; UnknownMeasureError else."""
    entry = _MEASURES.get(name) if isinstance(name, str) else None
    if entry is not None:
        return entry, dict(entry.options)
    found = _resolve_id(name) if isinstance(name, str) else None
    if found is not None:
        target, options = found
        entry = _MEASURES[target]
        return entry, {**entry.options, **options}
    close = difflib.get_close_matches(str(name), [*_MEASURES, *_ids()], n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    raise UnknownMeasureError(
        f"unknown similarity measure {name!r}{hint}; valid names: {', '.join(names())} "
        "(or an id measure/<repo>/<name>, see names(kind='id'))"
    )


def info(name: str) -> MeasureInfo:
    """The property flags of measure ``name`` (a registered name or an id)."""
    return resolve(name)[0]


def get(name: str, **kwargs: object) -> Measure:
    """The measure called ``name``, with keyword options bound if given.

    ``name`` is a registered name or a similarity-repository id
    (``measure/<repo>/<name>[-<param>=<value>]``). ``get("rbf_cka", threshold=0.5)``
    returns a ``functools.partial``, as does a name that fixes options (e.g.
    ``rsa_pearson``, an id); unknown names or options raise ValueError listing
    the valid ones (with the closest names).
    """
    entry, fixed = resolve(name)
    fn = entry.fn
    if not kwargs and not fixed:
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
    return functools.partial(fn, **{**fixed, **kwargs})


def is_symmetric(name: str) -> bool:
    """Whether measure ``name`` satisfies f(x, y) == f(y, x)."""
    return info(name).symmetric


def is_distance(name: str) -> bool:
    """Whether ``name`` is a distance (lower = more similar, 0 for identical) rather than a similarity."""
    return info(name).distance
