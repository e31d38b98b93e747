"""Report heatmaps: a (rows, columns) matrix such as STIR(m2|m1) with the reference m1 on the rows
(y axis) and the target m2 on the columns (x axis), alone (``plot_matrix``) or STIR beside CKA as in
the paper (``plot_matrix_pair``). Drawn and saved as every report figure is (``stir.reporting.plots``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from stir.reporting.plots import FONT, NAN_COLOUR, PathLike, _new_figure, _save, _to_numpy, _wrap


def _matrix(values: Any, row_labels: Sequence[str], col_labels: Sequence[str]) -> np.ndarray:
    arr = _to_numpy(values).astype(np.float64)
    if arr.ndim != 2:
        raise ValueError(f"matrix must be 2-D (n_rows, n_cols), got shape {arr.shape}")
    if arr.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"matrix shape {arr.shape} does not match {len(row_labels)} row labels "
                         f"x {len(col_labels)} column labels")
    return arr


def _limits(arr: np.ndarray, vmin: float | None, vmax: float | None) -> tuple[float, float]:
    finite = arr[np.isfinite(arr)]
    lo = vmin if vmin is not None else (float(finite.min()) if finite.size else 0.0)
    hi = vmax if vmax is not None else (float(finite.max()) if finite.size else 1.0)
    if hi <= lo:  # a constant matrix would give a zero-width colour scale
        hi = lo + 1.0
    return lo, hi


def _draw_matrix(fig: Figure, ax: Axes, arr: np.ndarray, row_labels: Sequence[str],
                 col_labels: Sequence[str], title: str, row_axis: str, col_axis: str,
                 value_label: str, vmin: float | None, vmax: float | None, annotate: bool,
                 cmap: str, fmt: str) -> None:
    lo, hi = _limits(arr, vmin, vmax)
    norm = Normalize(vmin=lo, vmax=hi)
    base = colormaps[cmap] if isinstance(cmap, str) else cmap
    colour_map = base.with_extremes(bad=NAN_COLOUR)
    image = ax.imshow(np.ma.masked_invalid(arr), cmap=colour_map, norm=norm, aspect="auto",
                      interpolation="nearest")
    n_rows, n_cols = arr.shape
    ax.set_xticks(range(n_cols), [str(c) for c in col_labels])
    ax.set_yticks(range(n_rows), [str(r) for r in row_labels])
    if max((len(str(c)) for c in col_labels), default=0) > 6:
        ax.tick_params(axis="x", labelrotation=35)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
            label.set_rotation_mode("anchor")
    ax.set_xlabel(col_axis, fontsize=FONT + 1)
    ax.set_ylabel(_wrap(row_axis, 24), fontsize=FONT + 1)  # a short matrix is less tall than the label
    ax.set_title(_wrap(title), fontsize=FONT + 2)
    colourbar = fig.colorbar(image, ax=ax, fraction=0.05, pad=0.03)
    colourbar.set_label(value_label, fontsize=FONT + 1)
    if annotate:
        size = max(6.0, min(FONT, 90.0 / max(n_rows, n_cols)))
        for i in range(n_rows):
            for j in range(n_cols):
                v = arr[i, j]
                if not np.isfinite(v):
                    text, colour = ("nan" if np.isnan(v) else format(v, fmt)), "black"
                else:
                    r, g, b, _ = colour_map(norm(v))
                    # Dark text on light cells and vice versa (relative luminance, ITU-R BT.709).
                    colour = "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5 else "white"
                    text = format(v, fmt)
                ax.text(j, i, text, ha="center", va="center", color=colour, fontsize=size)


def _matrix_size(n_rows: int, n_cols: int, longest: int = 0) -> tuple[float, float]:
    """Inches for a heatmap; ``longest``: the longest tick label (rotated column labels need room below,
    row labels room on the left)."""
    return max(4.5, 0.75 * n_cols + 3.0 + 0.06 * longest), max(3.5, 0.55 * n_rows + 2.2 + 0.05 * longest)


def _longest(*label_lists: Sequence[str]) -> int:
    return max((len(str(label)) for labels in label_lists for label in labels), default=0)


def plot_matrix(values: Any, row_labels: Sequence[str], col_labels: Sequence[str], path: PathLike,
                title: str, *, row_axis: str = "reference m1 (IRIs made for it)",
                col_axis: str = "target m2", value_label: str = "STIR(m2|m1)",
                vmin: float | None = 0.0, vmax: float | None = 1.0, annotate: bool = True,
                cmap: str = "viridis", fmt: str = ".2f") -> Path:
    """Heatmap of a (n_rows, n_cols) matrix, e.g. STIR(m2|m1) with m1 = row model, m2 = column model.

    Drawn: one cell per entry coloured on [vmin, vmax] (None: the finite data range), each cell
    annotated with its value in ``fmt``; NaN cells are grey and read "nan"; the y axis is labelled
    ``row_axis``, the x axis ``col_axis`` and the colour bar ``value_label``, so the direction of a
    directional measure is stated on the figure itself.

    Shapes: values (len(row_labels), len(col_labels)), numpy / tensor / nested lists.
    """
    arr = _matrix(values, row_labels, col_labels)
    fig = _new_figure(*_matrix_size(*arr.shape, _longest(row_labels, col_labels)))
    _draw_matrix(fig, fig.add_subplot(), arr, row_labels, col_labels, title, row_axis, col_axis,
                 value_label, vmin, vmax, annotate, cmap, fmt)
    return _save(fig, path)


def plot_matrix_pair(left: Any, right: Any, row_labels: Sequence[str], col_labels: Sequence[str],
                     path: PathLike, title: str, *, left_title: str = "STIR(m2|m1)",
                     right_title: str = "CKA", right_row_labels: Sequence[str] | None = None,
                     right_col_labels: Sequence[str] | None = None,
                     row_axis: str = "reference m1 (IRIs made for it)", col_axis: str = "target m2",
                     right_row_axis: str = "model", right_col_axis: str = "model",
                     left_value_label: str = "STIR(m2|m1)", right_value_label: str = "CKA",
                     vmin: float | None = 0.0, vmax: float | None = 1.0, annotate: bool = True,
                     cmap: str = "viridis", fmt: str = ".2f") -> Path:
    """Two heatmaps side by side under one title, as in the paper: STIR (left) beside CKA (right).

    Each panel is drawn as in :func:`plot_matrix` with its own colour bar and axis labels; the
    right panel reuses the left labels unless ``right_row_labels`` / ``right_col_labels`` are given.

    Shapes: left (len(row_labels), len(col_labels)); right (len(right_row_labels),
    len(right_col_labels)).
    """
    right_rows = list(right_row_labels) if right_row_labels is not None else list(row_labels)
    right_cols = list(right_col_labels) if right_col_labels is not None else list(col_labels)
    a = _matrix(left, row_labels, col_labels)
    b = _matrix(right, right_rows, right_cols)
    wa, ha = _matrix_size(*a.shape, _longest(row_labels, col_labels))
    wb, hb = _matrix_size(*b.shape, _longest(right_rows, right_cols))
    fig = _new_figure(wa + wb, max(ha, hb) + 0.4)
    axes = fig.subplots(1, 2)
    _draw_matrix(fig, axes[0], a, row_labels, col_labels, left_title, row_axis, col_axis,
                 left_value_label, vmin, vmax, annotate, cmap, fmt)
    _draw_matrix(fig, axes[1], b, right_rows, right_cols, right_title, right_row_axis,
                 right_col_axis, right_value_label, vmin, vmax, annotate, cmap, fmt)
    fig.suptitle(_wrap(title, 90), fontsize=FONT + 3)
    return _save(fig, path)
