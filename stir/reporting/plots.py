"""Report figures: STIR / CKA heatmaps, layer-wise curves, incremental-training curves, IRI grids.

Every function draws one PNG (dpi 150, constrained layout) and returns the written path. Figures
are built as ``matplotlib.figure.Figure`` objects rendered through ``FigureCanvasAgg``: nothing
goes through pyplot, so no global backend is selected, no figure manager keeps a reference (the
figure is freed when the function returns) and the module is safe in headless workers. The PNG
is rendered in memory and written atomically, so a killed run never leaves a truncated image.

Directions follow the paper: STIR(m2|m1) uses the IRIs made for the *reference* m1 and measures
how much of m1's invariance the *target* m2 shares. Matrices therefore put the reference on the
rows (y axis) and the target on the columns (x axis).
"""

from __future__ import annotations

import io
import math
import os
import textwrap
from pathlib import Path
from typing import Any, Mapping, Sequence, Union

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from stir.atomic import write_bytes

__all__ = ["plot_matrix", "plot_matrix_pair", "plot_layerwise", "plot_incremental", "plot_iri_grid",
           "plot_bars"]

PathLike = Union[str, os.PathLike]

DPI = 150
FONT = 10
NAN_COLOUR = "#b0b0b0"
# Marker per series so curves stay distinguishable in greyscale print and for colour-blind readers.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def _new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)  # attaches itself as fig.canvas; no pyplot, no global backend
    return fig


def _save(fig: Figure, path: PathLike) -> Path:
    path = Path(path)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, facecolor="white")
    write_bytes(path, buffer.getvalue())
    fig.clear()  # drop artists now rather than whenever the cycle collector runs
    return path


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        x = x.detach().cpu()
        if hasattr(x, "float"):
            x = x.float()  # bfloat16 / half have no numpy equivalent
        x = x.numpy()
    return np.asarray(x)


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
    ax.set_ylabel(row_axis, fontsize=FONT + 1)
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


def _matrix_size(n_rows: int, n_cols: int) -> tuple[float, float]:
    return max(4.5, 0.75 * n_cols + 3.0), max(3.5, 0.55 * n_rows + 2.2)


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
    fig = _new_figure(*_matrix_size(*arr.shape))
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
    wa, ha = _matrix_size(*a.shape)
    wb, hb = _matrix_size(*b.shape)
    fig = _new_figure(wa + wb, max(ha, hb) + 0.4)
    axes = fig.subplots(1, 2)
    _draw_matrix(fig, axes[0], a, row_labels, col_labels, left_title, row_axis, col_axis,
                 left_value_label, vmin, vmax, annotate, cmap, fmt)
    _draw_matrix(fig, axes[1], b, right_rows, right_cols, right_title, right_row_axis,
                 right_col_axis, right_value_label, vmin, vmax, annotate, cmap, fmt)
    fig.suptitle(_wrap(title, 90), fontsize=FONT + 3)
    return _save(fig, path)


def _series_x(x: Any, name: str, n: int) -> np.ndarray:
    """The x values of one series: a shared sequence or ``x[name]`` from a per-series mapping."""
    xs = np.asarray(x[name] if isinstance(x, Mapping) else x, dtype=np.float64)
    if xs.shape != (n,):
        raise ValueError(f"series {name!r} has {n} values but {xs.shape} x values")
    return xs


def _errors_for(errors: Mapping[str, Sequence[Any]] | None, name: str, n: int) -> np.ndarray | None:
    """errors[name] as (n,) symmetric half-widths or (n, 2) (below, above) distances; None if absent."""
    if not errors or name not in errors or errors[name] is None:
        return None
    err = np.asarray([(np.nan if e is None else e) for e in errors[name]], dtype=np.float64)
    if err.shape not in ((n,), (n, 2)):
        raise ValueError(f"errors for {name!r} have shape {err.shape}, expected ({n},) or ({n}, 2)")
    return err


def _curve(ax: Axes, xs: np.ndarray, ys: np.ndarray, err: np.ndarray | None, **style: Any):
    if err is not None:
        # NaN errors (unknown spread) just draw no bar for that point; (n, 2) errors are asymmetric.
        yerr = np.nan_to_num(err, nan=0.0)
        return ax.errorbar(xs, ys, yerr=yerr.T if yerr.ndim == 2 else yerr, capsize=3, elinewidth=1, **style)
    return ax.plot(xs, ys, **style)[0]


def interval_errors(values: Sequence[float], low: Sequence[float], high: Sequence[float]) -> list:
    """(below, above) error-bar distances that draw the interval [low, high] around each value (NaN
    kept). A value outside its interval (a biased bootstrap can put it there) gets a bar from the
    interval's far end to the value, never a negative length."""
    return [(max(v - lo, 0.0), max(hi - v, 0.0)) if math.isfinite(v) else (math.nan, math.nan)
            for v, lo, hi in zip(values, low, high)]


def _wrap(title: str, width: int = 60) -> str:
    """Long titles (experiment descriptions) on several lines instead of cut off at the figure edge."""
    return textwrap.fill(title, width)


def _finish_axes(ax: Axes, title: str, xlabel: str, ylabel: str, handles: list) -> None:
    ax.set_title(_wrap(title), fontsize=FONT + 2)
    ax.set_xlabel(xlabel, fontsize=FONT + 1)
    ax.set_ylabel(ylabel, fontsize=FONT + 1)
    ax.grid(True, alpha=0.3)
    if handles:
        # Explicit handles keep drawing order (each fit right after its series); matplotlib's
        # default lists plain lines before error-bar containers.
        ax.legend(handles=handles, fontsize=FONT - 1, frameon=False)


def plot_layerwise(depths: Sequence[float] | Mapping[str, Sequence[float]],
                   series: Mapping[str, Sequence[float]], path: PathLike, title: str, *,
                   fits: Mapping[str, tuple[float, float]] | None = None,
                   errors: Mapping[str, Sequence[float]] | None = None,
                   xlabel: str = "relative depth", ylabel: str = "STIR") -> Path:
    """Layer-wise curves: one line with markers per series, y against (relative) depth.

    Drawn: each series as a solid line with markers (error bars of +-errors[name] when given);
    for each series in ``fits`` a dashed line ``y = slope * x + intercept`` in the same colour over
    that series' depth range, its slope in the legend.

    Shapes: depths (L,) shared by all series, or a mapping name -> (L_name,) when networks have
    different numbers of layers; series[name] (L_name,), NaN allowed (gap); errors[name] like
    series[name]; fits[name] = (slope, intercept).
    """
    fig = _new_figure(6.4, 4.4)
    ax = fig.add_subplot()
    handles = []
    for k, (name, values) in enumerate(series.items()):
        ys = np.asarray(values, dtype=np.float64)
        xs = _series_x(depths, name, ys.shape[0])
        colour = f"C{k % 10}"
        handles.append(_curve(ax, xs, ys, _errors_for(errors, name, ys.shape[0]), color=colour,
               marker=MARKERS[k % len(MARKERS)], linewidth=1.6, markersize=5, label=name))
        if fits and name in fits and fits[name] is not None:
            slope, intercept = (float(v) for v in fits[name])
            finite = xs[np.isfinite(xs)]
            if finite.size and math.isfinite(slope) and math.isfinite(intercept):
                line_x = np.array([finite.min(), finite.max()])
                handles += ax.plot(line_x, slope * line_x + intercept, linestyle="--",
                                   color=colour, linewidth=1.2, alpha=0.8,
                                   label=f"{name} fit (slope {slope:+.3f})")
    _finish_axes(ax, title, xlabel, ylabel, handles)
    return _save(fig, path)


def _thousands(x: float, _pos: int) -> str:
    return f"{x:,.0f}"


def plot_incremental(sizes: Sequence[float] | Mapping[str, Sequence[float]],
                     series: Mapping[str, Sequence[float]], path: PathLike, title: str, *,
                     errors: Mapping[str, Sequence[float]] | None = None,
                     xlabel: str = "training-set size", ylabel: str = "STIR",
                     logx: bool = False) -> Path:
    """STIR over incremental training-set sizes: one curve with markers per series.

    Series named ``"<group>: <what>"`` (e.g. "vanilla: STIR(m_t|m_t-1)", "vanilla:
    STIR(m_t-1|m_t)", "AT: ...") share a colour per group and differ in line style / marker within
    it, so training regime and direction read apart. The x axis uses thousands separators
    ("10,000"); ``logx`` puts it on a log scale for geometric size schedules.

    Shapes: sizes (T,) shared, or a mapping name -> (T_name,); series[name] (T_name,), NaN
    allowed; errors[name] like series[name].
    """
    fig = _new_figure(6.4, 4.4)
    ax = fig.add_subplot()
    groups: dict[str, int] = {}
    in_group: dict[str, int] = {}
    linestyles = ("-", "--", ":", "-.")
    handles = []
    for k, (name, values) in enumerate(series.items()):
        group = name.split(":", 1)[0].strip() if ":" in name else name
        g = groups.setdefault(group, len(groups))
        m = in_group[group] = in_group.get(group, -1) + 1
        ys = np.asarray(values, dtype=np.float64)
        xs = _series_x(sizes, name, ys.shape[0])
        handles.append(_curve(ax, xs, ys, _errors_for(errors, name, ys.shape[0]),
                              color=f"C{g % 10}", linestyle=linestyles[m % len(linestyles)],
                              marker=MARKERS[m % len(MARKERS)], linewidth=1.6, markersize=5,
                              label=name))
    if logx:
        ax.set_xscale("log")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # sizes are image counts: no 1.5 images
    ax.xaxis.set_major_formatter(FuncFormatter(_thousands))
    _finish_axes(ax, title, xlabel, ylabel, handles)
    return _save(fig, path)


def _images(x: Any, name: str) -> np.ndarray:
    """(n, c, h, w) or (n, h, w) floats in [0, 1] -> (n, h, w, 3) or (n, h, w) for imshow."""
    arr = _to_numpy(x).astype(np.float32)
    if arr.ndim == 4:
        if arr.shape[1] not in (1, 3):
            raise ValueError(f"{name}: expected (n, 3, h, w) or (n, 1, h, w), got {arr.shape}")
        arr = arr.transpose(0, 2, 3, 1)
        if arr.shape[-1] == 1:
            arr = arr[..., 0]
    elif arr.ndim != 3:
        raise ValueError(f"{name}: expected (n, 3, h, w) images, got shape {arr.shape}")
    # IRIs come out of an optimiser and may overshoot [0, 1] slightly; NaN pixels show black.
    return np.clip(np.nan_to_num(arr, nan=0.0), 0.0, 1.0)


def plot_iri_grid(originals: Any, rows: Mapping[str, Any], path: PathLike, title: str, *,
                  max_images: int = 8, original_label: str = "originals",
                  captions: Mapping[str, Sequence[str]] | None = None) -> Path:
    """Image grid: originals on the first row, then one row per named set of IRIs.

    Drawn: column j shows image j of every set (so a column is one seed image and the IRIs made
    from it); each row is labelled on the left with its name (e.g. "IRIs of m1 (arbitrary)",
    "adversarial IRIs m1 vs m2"). At most ``max_images`` columns; a set with fewer images leaves
    its remaining cells blank.

    ``captions[name][j]`` is written under image j of row ``name`` (e.g. its residual).

    Shapes: originals and each rows[name] (n, 3, h, w) (or (n, 1, h, w) / (n, h, w) greyscale)
    floats in [0, 1], torch tensors or numpy arrays; all with the same h, w.
    """
    if max_images < 1:
        raise ValueError("max_images must be >= 1")
    sets = [(original_label, _images(originals, original_label))]
    sets += [(name, _images(x, name)) for name, x in rows.items()]
    n_cols = min(max_images, max(len(imgs) for _, imgs in sets))
    if n_cols == 0:
        raise ValueError("no images to draw")
    n_rows = len(sets)
    cell = 1.25 if not captions else 1.45
    fig = _new_figure(cell * n_cols + 1.8, cell * n_rows + 0.6)
    axes = np.atleast_2d(fig.subplots(n_rows, n_cols, squeeze=False))
    for i, (name, imgs) in enumerate(sets):
        for j in range(n_cols):
            ax = axes[i, j]
            ax.set_xticks([])
            ax.set_yticks([])
            for spine in ax.spines.values():
                spine.set_visible(False)
            if j < len(imgs):
                img = imgs[j]
                ax.imshow(img, cmap="gray" if img.ndim == 2 else None, vmin=0.0, vmax=1.0,
                          interpolation="nearest")
                caption = (captions or {}).get(name)
                if caption is not None and j < len(caption):
                    ax.set_xlabel(caption[j], fontsize=FONT - 3, labelpad=1)
        # Wrapped so long set names do not squeeze the images.
        axes[i, 0].set_ylabel("\n".join(textwrap.wrap(name, 18)) or name, rotation=0,
                              ha="right", va="center", fontsize=FONT - 1, labelpad=8)
    fig.suptitle(_wrap(title, 90), fontsize=FONT + 2)
    return _save(fig, path)


def plot_bars(labels: Sequence[str], values: Sequence[float], errors: Sequence[float | None] | None,
              path: PathLike, title: str, ylabel: str, *, fmt: str = ".3f") -> Path:
    """Bar chart for a small table: one bar per label, +-errors as error bars, value above each bar.

    Shapes: labels (k,), values (k,) (NaN: no bar, "nan" written), errors (k,) or None; a None /
    NaN error draws no error bar.
    """
    ys = np.asarray(values, dtype=np.float64)
    if ys.shape != (len(labels),):
        raise ValueError(f"{len(labels)} labels but values of shape {ys.shape}")
    err = None
    if errors is not None:
        err = np.asarray([np.nan if e is None else e for e in errors], dtype=np.float64)
        if err.shape != ys.shape:
            raise ValueError(f"errors of shape {err.shape}, expected {ys.shape}")
        err = np.where(np.isnan(ys), np.nan, err)  # no error bar floating where there is no bar
    fig = _new_figure(max(4.0, 0.8 * len(labels) + 2.0), 4.0)
    ax = fig.add_subplot()
    xs = np.arange(len(labels))
    heights = np.nan_to_num(ys, nan=0.0)
    ax.bar(xs, heights, color=[f"C{k % 10}" for k in range(len(labels))], alpha=0.85,
           yerr=None if err is None else np.nan_to_num(err, nan=0.0), capsize=4)
    for x, y, e in zip(xs, ys, err if err is not None else np.zeros_like(ys)):
        top = (0.0 if np.isnan(y) else y) + (0.0 if np.isnan(e) else e)
        ax.annotate("nan" if np.isnan(y) else format(y, fmt), (x, top), xytext=(0, 3),
                    textcoords="offset points", ha="center", va="bottom", fontsize=FONT - 1)
    ax.set_xticks(xs, [str(label) for label in labels])
    if max((len(str(label)) for label in labels), default=0) > 8:
        ax.tick_params(axis="x", labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
            label.set_rotation_mode("anchor")
    ax.set_title(_wrap(title), fontsize=FONT + 2)
    ax.set_ylabel(ylabel, fontsize=FONT + 1)
    ax.grid(True, axis="y", alpha=0.3)
    tops = ys + (np.nan_to_num(err, nan=0.0) if err is not None else 0.0)
    finite = ys[np.isfinite(ys)]
    if finite.size and finite.min() >= 0 and np.nanmax(tops) > 0:
        ax.set_ylim(0.0, 1.15 * float(np.nanmax(tops)))  # bars from 0; room for the value labels
    else:
        ax.margins(y=0.15)
    return _save(fig, path)


def plot_convergence(steps: Mapping[str, Sequence[float]], stir: Mapping[str, Sequence[float]],
                     residual: Mapping[str, Sequence[float]], path: PathLike, title: str, *,
                     errors: Mapping[str, Sequence[float]] | None = None, tolerance: float | None = None,
                     ylabel: str = "STIR") -> Path:
    """STIR (left) and the median residual (right, log scale) against inversion steps, one line per series.

    Each series is one direction and IRI kind ("STIR(m2|m1)", "STIR_adv(m1|m2)", ...), measured at
    the best iterates so far at each recorded step: a flat right end means the value has settled.
    Shapes: steps[name], stir[name], residual[name] (T_name,); errors[name] like stir[name];
    ``tolerance`` draws the IRI tolerance on the residual panel.
    """
    fig = _new_figure(10.4, 4.2)
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    handles, res_handles = [], []
    for k, name in enumerate(stir):
        xs = np.asarray(steps[name], dtype=np.float64)
        # adversarial series dashed: where no X' became an IRI they coincide with the arbitrary ones
        style = dict(color=f"C{k % 10}", marker=MARKERS[k % len(MARKERS)], linewidth=1.6, markersize=5, label=name,
                     linestyle="--" if "_adv" in name else "-")
        handles.append(_curve(left, xs, np.asarray(stir[name], dtype=np.float64),
                              _errors_for(errors, name, xs.shape[0]), **style))
        res_handles.append(_curve(right, xs, np.asarray(residual[name], dtype=np.float64), None, **style))
    if tolerance is not None:
        res_handles.append(right.axhline(tolerance, color="0.4", linestyle=":", linewidth=1.2,
                                         label=f"tolerance {tolerance:g}"))
    right.set_yscale("log")
    _finish_axes(left, title, "inversion steps", ylabel, handles)
    _finish_axes(right, "median relative residual of m1", "inversion steps", "||m1(x') - m1(x)|| / ||m1(x)||",
                 res_handles)
    return _save(fig, path)
