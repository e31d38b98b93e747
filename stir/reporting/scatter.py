"""Scatter panels: one measure's dissimilarity against a functional difference per panel (grounding)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence, Tuple

import numpy as np

from stir.reporting.plots import FONT, _new_figure, _save, _wrap


def plot_scatter_grid(panels: Mapping[str, Tuple[Sequence[float], Sequence[float], str]], path, title: str, *,
                      xlabel: str, ylabel: str, columns: int = 4) -> Path:
    """A grid of scatter plots: panels[name] = (x values, y values, subtitle), NaN points left out.

    Drawn: one panel per name in order, points as dots, the panel titled ``name`` and its subtitle
    (e.g. the rank correlation); panels without a finite point read "undefined".
    """
    names = list(panels)
    cols = max(1, min(columns, len(names)))
    rows = max(1, math.ceil(len(names) / cols))
    fig = _new_figure(3.2 * cols, 2.7 * rows + 0.6)
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    for ax, name in zip(axes, names):
        xs, ys, subtitle = panels[name]
        x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
        keep = np.isfinite(x) & np.isfinite(y)
        if keep.any():
            ax.scatter(x[keep], y[keep], s=12, alpha=0.75)
        else:
            ax.text(0.5, 0.5, "undefined", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(_wrap(f"{name}\n{subtitle}", 40), fontsize=FONT - 1)
        ax.set_xlabel(xlabel, fontsize=FONT - 2)
        ax.set_ylabel(ylabel, fontsize=FONT - 2)
        ax.tick_params(labelsize=FONT - 3)
        ax.grid(True, alpha=0.3)
    for ax in axes[len(names):]:
        ax.set_visible(False)
    fig.suptitle(_wrap(title, 100), fontsize=FONT + 2)
    return _save(fig, Path(path))
