"""``experiment.stored_only`` for the paper kind: each part cut to what the (read-only) results store
holds, so a report of what is stored measures nothing (moved out of ``stir.experiments.paper``)."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Tuple

from stir.experiments import matrix as matrix_kind
from stir.experiments.context import Context
from stir.experiments.matrix import MatrixConfig
from stir.experiments.pairs import PairsConfig
from stir.store import NotStored


def _stored_pairs(part: PairsConfig, pctx: Context) -> List[List[str]]:
    """The pairs of ``part`` whose every measurement the (read-only) store holds."""
    measure = pctx.layerwise if pctx.layers.taps != "penultimate" else pctx.pair
    kept = []
    for a, b in part.pairs:
        try:
            measure(pctx.model(a), pctx.model(b))
            kept.append([a, b])
        except NotStored:
            pass
    return kept


def _stored_matrix(part: MatrixConfig, pctx: Context) -> Tuple[MatrixConfig, List[str]]:
    """``part`` cut to the models whose every cell the (read-only) store holds, and the models cut.

    A model in a missing cell goes, the one in the most missing cells first (the later listed on a
    tie): a model shipped before it was evaluated misses its whole row and column and goes alone,
    not the models it was to be compared with. A seed twin whose diagonal cell is missing leaves the
    diagonal (its model then stays where its cell against itself is stored)."""
    names = list(part.models)

    def held(cfg: MatrixConfig, i: int, j: int) -> bool:
        try:
            matrix_kind.measure_cell(pctx, cfg, i, j)
            return True
        except NotStored:
            return False

    twins = {a: t for a, t in part.seed_twins.items() if a in names and held(part, names.index(a), names.index(a))}
    bare = dataclasses.replace(part, seed_twins=twins)
    missing = [(a, b) for i, a in enumerate(names) for j, b in enumerate(names)
               if not (i == j and a in twins) and not held(bare, i, j)]
    kept = list(names)
    while True:
        cells = [c for c in missing if c[0] in kept and c[1] in kept]
        if not cells:
            break
        count = {n: sum(n in c for c in cells) for n in kept}
        kept.remove(max(kept, key=lambda n: (count[n], kept.index(n))))
    cut = [n for n in names if n not in kept] + [f"{t} (seed twin of {a})" for a, t in part.seed_twins.items()
                                                 if a in kept and a not in twins]
    return dataclasses.replace(part, models=kept, seed_twins={a: t for a, t in twins.items() if a in kept}), cut


def stored_parts(chosen: Dict[str, Tuple[Any, Context]]
                 ) -> Tuple[Dict[str, Tuple[Any, Context]], Dict[str, str], List[str], Dict[str, List[str]]]:
    """``experiment.stored_only``: each pairs part cut to its stored pairs and each matrix to its models
    whose every cell is stored (``_stored_matrix``); the parts with nothing stored, as {part: why}; a
    note per part cut; {matrix part: the models cut}. (Chain parts are run as they are: a missing
    link raises ``NotStored`` in ``run``, which leaves the part out.)"""
    kept, left_out, notes, cut_models = {}, {}, [], {}
    for name, (part, pctx) in chosen.items():
        if isinstance(part, PairsConfig):
            pairs = _stored_pairs(part, pctx)
            if not pairs:
                left_out[name] = f"none of its {len(part.pairs)} pairs is in the results store yet"
                continue
            if len(pairs) < len(part.pairs):
                missing = [f"{a} / {b}" for a, b in part.pairs if [a, b] not in pairs]
                notes.append(f"{name}: {len(pairs)} of its {len(part.pairs)} pairs are in the results store; not yet "
                             f"measured (experiment.stored_only=true): {', '.join(missing)}")
                part = dataclasses.replace(part, pairs=pairs)
        elif isinstance(part, MatrixConfig):
            part, cut = _stored_matrix(part, pctx)
            if len(part.models) < 2:
                left_out[name] = "not all of its measurements are in the results store yet"
                continue
            if cut:
                cut_models[name] = cut
                notes.append(f"{name}: left out of its matrix, not yet measured (experiment.stored_only=true): "
                             f"{', '.join(cut)}")
        kept[name] = (part, pctx)
    return kept, left_out, notes, cut_models
