"""The example figure of a report: a few images X beside the X' the measurement made of them.

The X' come from the inversion cache (``stir.inversion.cached``): they are the very IRIs the STIR
values were measured on (draw 0), never a new inversion. A set the cache does not hold (no
cache folder, or the entry was removed) is left out and a note says so. Each X' is captioned with
its residual r1 = ||m1(x') - m1(x)|| / ||m1(x)||, marked "IRI" only when within the tolerance; a
row is named "X' made for <model>", with how many of them are IRIs (not "IRIs of ...": most X' of
the published procedure are not within the tolerance).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from torch import Tensor

from stir.experiments.context import Context
from stir.inversion import InversionResult, cached
from stir.measure import DEFAULT_TAP
from stir.reporting import Figure, plot_iri_grid
from stir.zoo import Model


def iri_examples(ctx: Context, m1: Model, m2: Model, images: Tensor) -> Tuple[Optional[Figure], List[str]]:
    """(the figure, notes): X, arbitrary IRIs of m1 and of m2, adversarial IRIs of (m1, m2) when
    the estimator made them; the first ``iri_grid_images`` images of each."""
    count = ctx.iri_grid_images
    cfg, run, tol = ctx.estimator.inversion, ctx.run, ctx.estimator.inversion.tolerance
    wanted = {f"X' made for {m1.label}": lambda: cached(m1.module, images, DEFAULT_TAP, cfg, run),
              f"X' made for {m2.label}": lambda: cached(m2.module, images, DEFAULT_TAP, cfg, run)}
    if ctx.estimator.adversarial and m1.identity != m2.identity:
        wanted[f"adversarial X': {m1.label} matched, {m2.label} pushed"] = lambda: cached(
            m1.module, images, DEFAULT_TAP, cfg, run, m2=m2.module, tap2=DEFAULT_TAP, adversarial=True)
    rows: Dict[str, Tensor] = {}
    captions: Dict[str, List[str]] = {}
    notes, seen = [], set()
    for name, lookup in wanted.items():
        if name in seen:  # m1 and m2 are one model
            continue
        seen.add(name)
        result: Optional[InversionResult] = lookup()
        if result is None:
            notes.append(f"example IRIs: {name!r} not shown: the inversion cache holds no such X' "
                         f"(they are shown from the cache only, never inverted again)")
            continue
        residuals = result.residual[:count].tolist()
        # Only an X' within the tolerance is an IRI: the row says how many are, each image its residual.
        label = f"{name}: {sum(r <= tol for r in residuals)} of {len(residuals)} are IRIs"
        rows[label] = result.x_prime[:count].cpu()
        captions[label] = [f"r {r:.3f}" + (" IRI" if r <= tol else "") for r in residuals]
    if not rows:
        return None, notes
    title = (f"X and the X' their STIR was measured on (draw 0, penultimate); under each X' its residual "
             f"r = ||m(x') - m(x)|| / ||m(x)|| for the model it was made for, \"IRI\" when r <= {tol:g}")
    return Figure(plot_iri_grid, dict(originals=images[:count].cpu(), rows=rows, title=title, max_images=count,
                                      captions=captions)), notes
