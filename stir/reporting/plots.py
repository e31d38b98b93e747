"""Report figures: layer-wise curves, incremental-training curves, bars, convergence; and what every
report figure shares (``_new_figure``, ``_save``, sizes, wrapping). The heatmaps are in
``stir.reporting.heatmaps``, the IRI grid in ``stir.reporting.image_grid``.

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

import math
import os
import re
import textwrap
from pathlib import Path
from typing import Any, Mapping, Sequence, Union

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from stir.atomic import write_figure

__all__ = ["plot_layerwise", "plot_incremental", "plot_bars", "plot_convergence", "interval_errors"]

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
    write_figure(path, fig, format="png", dpi=DPI, facecolor="white")
    fig.clear()  # drop artists now rather than whenever the cycle collector runs
    return path


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        x = x.detach().cpu()
        if hasattr(x, "float"):
            x = x.float()  # bfloat16 / half have no numpy equivalent
        x = x.numpy()
    return np.asarray(x)


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


def _finish_axes(ax: Axes, title: str, xlabel: str, ylabel: str, handles: list, legend_title: str | None = None,
                 legend: bool = True, title_chars: int = 60) -> None:
    """Title (on lines of at most ``title_chars``), axis labels, grid; the legend outside the axes on
    the right (it never covers a curve or an axis label), titled with what the error bars are."""
    ax.set_title(_wrap(title, title_chars), fontsize=FONT + 2)
    ax.set_xlabel(xlabel, fontsize=FONT + 1)
    ax.set_ylabel(ylabel, fontsize=FONT + 1)
    ax.grid(True, alpha=0.3)
    if handles and legend:
        # Explicit handles keep drawing order (each fit right after its series); matplotlib's
        # default lists plain lines before error-bar containers.
        ax.figure.legend(handles=handles, loc="outside right upper", fontsize=FONT - 1, frameon=False,
                         title=legend_title, title_fontsize=FONT - 1, alignment="left")


LEGEND_CHARS = 44  # legend labels are wrapped to lines of at most this many characters


def _label(text: str, width: int = LEGEND_CHARS) -> str:
    """A legend label on lines of at most ``width`` characters (long model names or paths break at - / |)."""
    if len(text) <= width:
        return text
    spaced = re.sub(r"([|/:(-])", "\\1\u200b", text)  # break opportunities after these characters
    lines = textwrap.wrap(spaced, width, break_long_words=True, break_on_hyphens=False)
    return "\n".join(line.replace("\u200b", "") for line in lines)


def _legend_width(names: Sequence[str], extra: float = 0.0) -> float:
    """Inches the outside legend needs for these labels (about 0.075 in per character at FONT - 1)."""
    longest = max((len(line) for n in names for line in _label(n).splitlines()), default=0)
    return min(7.0, 0.6 + 0.075 * longest + extra)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.all((np.isnan(a) & np.isnan(b)) | np.isclose(a, b, rtol=1e-9, atol=1e-12)))


def _coincident(series: Mapping[str, np.ndarray], xs: Mapping[str, np.ndarray]) -> dict:
    """{name: the earlier series it lies exactly on}: drawn hollow and larger, so that neither hides the other."""
    out: dict = {}
    names = list(series)
    for k, name in enumerate(names):
        for other in names[:k]:
            if other not in out and _same(series[name], series[other]) and _same(xs[name], xs[other]):
                out[name] = other
                break
    return out


def _hollow(style: dict) -> dict:
    """The style of a series drawn over an identical one: open, larger marker, dashed line."""
    return {**style, "markerfacecolor": "none", "markersize": style.get("markersize", 5) + 4, "linestyle": "--"}


CAPTION_CHARS = 110  # a caption line below a two-panel figure


def _caption(lines: Sequence[str], width: int = CAPTION_CHARS) -> str:
    """Caption lines, each wrapped to ``width`` characters, one under the other."""
    return "\n".join(textwrap.fill(line, width) for line in lines)


def _single_point_note(ax: Axes, xs_all: Sequence[np.ndarray], what: str) -> None:
    """Every series has one point: say so on the axes, and give the x axis room around it."""
    x = _single_step(xs_all)
    if x is not None:
        _room_around(ax, x)
        ax.text(0.5, 0.02, what, transform=ax.transAxes, ha="center", va="bottom", fontsize=FONT - 2, color="0.3",
                wrap=True)


def _single_step(xs_all: Sequence[np.ndarray]) -> float | None:
    """The one x of every series when they all have one point there, else None."""
    xs = np.concatenate([x[np.isfinite(x)] for x in xs_all]) if xs_all else np.array([])
    return float(xs[0]) if xs.size and np.unique(xs).size == 1 else None


def _room_around(ax: Axes, x: float) -> None:
    ax.set_xlim(x - max(1.0, 0.5 * abs(x)), x + max(1.0, 0.5 * abs(x)))


def plot_layerwise(depths: Sequence[float] | Mapping[str, Sequence[float]],
                   series: Mapping[str, Sequence[float]], path: PathLike, title: str, *,
                   fits: Mapping[str, tuple[float, float]] | None = None,
                   errors: Mapping[str, Sequence[float]] | None = None,
                   xlabel: str = "relative depth", ylabel: str = "STIR", error_note: str | None = None) -> Path:
    """Layer-wise curves: one line with markers per series, y against (relative) depth.

    Drawn: each series as a solid line with markers (error bars of +-errors[name] when given, what
    they are in ``error_note``, the legend's title); for each series in ``fits`` a dashed line ``y =
    slope * x + intercept`` in the same colour over that series' depth range, its slope in the legend.
    A series identical to an earlier one is drawn hollow and dashed over it; the legend sits outside
    the axes, the figure as wide as its labels need.

    Shapes: depths (L,) shared by all series, or a mapping name -> (L_name,) when networks have
    different numbers of layers; series[name] (L_name,), NaN allowed (gap); errors[name] like
    series[name]; fits[name] = (slope, intercept).
    """
    labels = [*(f"{n} (= {n})" for n in series), *(f"{n} fit (slope +0.000)" for n in (fits or {}))]
    fig = _new_figure(5.4 + _legend_width(labels), 4.4)
    ax = fig.add_subplot()
    handles = []
    ys_all = {name: np.asarray(values, dtype=np.float64) for name, values in series.items()}
    xs_all = {name: _series_x(depths, name, ys.shape[0]) for name, ys in ys_all.items()}
    over = _coincident(ys_all, xs_all)
    for k, name in enumerate(series):
        ys, xs = ys_all[name], xs_all[name]
        colour = f"C{k % 10}"
        style = dict(color=colour, marker=MARKERS[k % len(MARKERS)], linewidth=1.6, markersize=5,
                     label=_label(name if name not in over else f"{name} (= {over[name]})"))
        handles.append(_curve(ax, xs, ys, _errors_for(errors, name, ys.shape[0]),
                              **(_hollow(style) if name in over else style)))
        if fits and name in fits and fits[name] is not None:
            slope, intercept = (float(v) for v in fits[name])
            finite = xs[np.isfinite(xs)]
            if finite.size and math.isfinite(slope) and math.isfinite(intercept):
                line_x = np.array([finite.min(), finite.max()])
                handles += ax.plot(line_x, slope * line_x + intercept, linestyle="--",
                                   color=colour, linewidth=1.2, alpha=0.8,
                                   label=_label(f"{name} fit (slope {slope:+.3f})"))
    _single_point_note(ax, list(xs_all.values()), "one tap only: no curve over depth")
    _finish_axes(ax, title, xlabel, ylabel, handles, _bars(errors, error_note))
    return _save(fig, path)


def _bars(errors: Any, note: str | None) -> str | None:
    """The legend title that says what the error bars are (None without error bars)."""
    if not errors:
        return None
    return note or "bars: the spread reported with each value"


def _thousands(x: float, _pos: int) -> str:
    return f"{x:,.0f}"


def plot_incremental(sizes: Sequence[float] | Mapping[str, Sequence[float]],
                     series: Mapping[str, Sequence[float]], path: PathLike, title: str, *,
                     errors: Mapping[str, Sequence[float]] | None = None,
                     xlabel: str = "training-set size", ylabel: str = "STIR",
                     logx: bool = False, error_note: str | None = None) -> Path:
    """STIR over incremental training-set sizes: one curve with markers per series.

    Series named ``"<group>: <what>"`` (e.g. "vanilla: STIR(m_t|m_t-1)", "vanilla:
    STIR(m_t-1|m_t)", "AT: ...") share a colour per group and differ in line style / marker within
    it, so training regime and direction read apart. The x axis uses thousands separators
    ("10,000"); ``logx`` puts it on a log scale for geometric size schedules.

    Shapes: sizes (T,) shared, or a mapping name -> (T_name,); series[name] (T_name,), NaN
    allowed; errors[name] like series[name]; ``error_note`` says what the bars are (legend title).
    """
    note = _bars(errors, error_note)
    note = _label(note) if note else note  # the legend's title, wrapped like its labels
    fig = _new_figure(5.4 + _legend_width(list(series) + ([note] if note else [])), 4.4)
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
                              label=_label(name)))
    if logx:
        ax.set_xscale("log")
    every = sorted({float(x) for name, values in series.items()
                    for x in _series_x(sizes, name, len(values)) if math.isfinite(float(x))})
    if 0 < len(every) <= 12 and not logx:  # a schedule of sizes: a tick at each of them, in thousands
        ax.set_xticks(every)
        ax.xaxis.set_major_formatter(FuncFormatter(_kilo if all(x % 1000 == 0 for x in every) else _thousands))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # sizes are image counts: no 1.5 images
        ax.xaxis.set_major_formatter(FuncFormatter(_thousands))
    _finish_axes(ax, title, xlabel, ylabel, handles, note, title_chars=44)
    return _save(fig, path)


def _kilo(x: float, _pos: int) -> str:
    return f"{x / 1000:,.0f}k"


def plot_bars(labels: Sequence[str], values: Sequence[float], errors: Sequence[float | None] | None,
              path: PathLike, title: str, ylabel: str, *, fmt: str = ".3f", error_note: str | None = None) -> Path:
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
    note = _bars(errors, error_note) if err is not None else ""
    longest = max((len(str(label)) for label in labels), default=0)
    fig = _new_figure(max(4.0, 0.8 * len(labels) + 2.0 + 0.05 * longest, 0.09 * len(note) + 1.0), 4.0 + 0.04 * longest)
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
    if note:
        ax.set_xlabel(note, fontsize=FONT - 1)
    ax.grid(True, axis="y", alpha=0.3)
    tops = ys + (np.nan_to_num(err, nan=0.0) if err is not None else 0.0)
    finite = ys[np.isfinite(ys)]
    if finite.size and finite.min() >= 0 and np.nanmax(tops) > 0:
        ax.set_ylim(0.0, 1.15 * float(np.nanmax(tops)))  # bars from 0; room for the value labels
    else:
        ax.margins(y=0.15)
    return _save(fig, path)


_DIRECTION = re.compile(r"\((?P<target>[^|()]+)\|(?P<ref>[^|()]+)\)")


def _reference(name: str) -> str | None:
    """The reference of a direction named like "STIR(m2|m1)" (the model after the bar), if named so."""
    found = _DIRECTION.search(name)
    return found.group("ref").strip() if found else None


def plot_convergence(steps: Mapping[str, Sequence[float]], stir: Mapping[str, Sequence[float]],
                     residual: Mapping[str, Sequence[float]], path: PathLike, title: str, *,
                     errors: Mapping[str, Sequence[float]] | None = None, tolerance: float | None = None,
                     ylabel: str = "STIR", error_note: str | None = None) -> Path:
    """STIR (left) and the median residual (right, log scale) against inversion steps, one line per series.

    Each series is one direction and IRI kind ("STIR(m2|m1)", "STIR_adv(m1|m2)", ...), measured at
    the best iterates so far at each recorded step: a flat right end means the value has settled.
    Both panels share one legend below them; a series's residual is that of its own reference (the
    model after the bar, whose X' they are), said in the legend. A series equal on a panel to an
    earlier one (STIR_adv equal to STIR by construction: adversarial weight 0, X' that never reached
    the bound, a one-step record) is drawn there hollow, larger and dashed over it, so both stay
    visible, and named so in the legend ("(= STIR(m2|m1))", or "(STIR = ...)" when only the STIR
    values are equal) and in the caption. The caption (what the bars are, a single recorded step,
    the coinciding series) is the title of the legend below the axes: the layout gives it room of
    its own, so it never overprints a tick label, a line or an axis label.

    Shapes: steps[name], stir[name], residual[name] (T_name,); errors[name] like stir[name] (what
    they are: ``error_note``); ``tolerance`` draws the IRI tolerance on the residual panel.
    """
    names = list(stir)
    xs_all = {n: np.asarray(steps[n], dtype=np.float64) for n in names}
    ys_all = {n: np.asarray(stir[n], dtype=np.float64) for n in names}
    rs_all = {n: np.asarray(residual[n], dtype=np.float64) for n in names}
    # Each panel on its own: STIR_adv equal to STIR with other residuals still hides a line on the left.
    over_stir, over_residual = _coincident(ys_all, xs_all), _coincident(rs_all, xs_all)
    labels, same = [], []
    for n in names:
        ref = _reference(n)
        label = n + (f": X' made for {ref}" if ref else "")
        if n in over_stir and over_residual.get(n) == over_stir[n]:
            label += f" (= {over_stir[n]})"
            same.append(f"{n} = {over_stir[n]}")
        elif n in over_stir:
            label += f" (STIR = {over_stir[n]})"
            same.append(f"{n} = {over_stir[n]} in STIR")
        elif n in over_residual:
            same.append(f"{n} = {over_residual[n]} in residual")
        labels.append(_label(label, 2 * LEGEND_CHARS))
    said = [f"coinciding series (equal values at every step, both drawn: the later one hollow and dashed): "
            f"{'; '.join(same)}"] if same else []
    single = _single_step(list(xs_all.values()))
    if single is not None:
        said.insert(0, "one recorded step only: inversion.steps is at or below the first of inversion.record_steps")
    # The caption (what the bars are, a single step, coinciding series) is the title of the legend below
    # the axes: constrained layout gives it room of its own, so it never covers a tick, a line or a label.
    caption = _caption([c for c in [_bars(errors, error_note), *said] if c])
    columns = 2 if len(names) > 1 and max(len(line) for lb in labels for line in lb.splitlines()) <= 60 else 1
    lines = sum(lb.count("\n") + 1 for lb in labels) / columns + (caption.count("\n") + 1 if caption else 0)
    fig = _new_figure(10.4, 4.4 + 0.2 * math.ceil(lines))
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    handles = []
    for k, name in enumerate(names):
        xs = xs_all[name]
        # adversarial series dashed: where no X' became an IRI they coincide with the arbitrary ones
        style = dict(color=f"C{k % 10}", marker=MARKERS[k % len(MARKERS)], linewidth=1.6, markersize=5,
                     label=labels[k], linestyle="--" if "_adv" in name else "-")
        handles.append(_curve(left, xs, ys_all[name], _errors_for(errors, name, xs.shape[0]),
                              **(_hollow(style) if name in over_stir else style)))
        _curve(right, xs, rs_all[name], None, **(_hollow(style) if name in over_residual else style))
    tolerance_handle = []
    if tolerance is not None:
        tolerance_handle = [right.axhline(tolerance, color="0.4", linestyle=":", linewidth=1.2,
                                          label=f"IRI tolerance {tolerance:g}")]
    right.set_yscale("log")
    for ax in (left, right):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    if single is not None:
        for ax in (left, right):
            _room_around(ax, single)
    _finish_axes(left, title, "inversion steps", ylabel, handles, legend=False)
    _finish_axes(right, "median relative residual of each series' reference", "inversion steps",
                 "||m(x') - m(x)|| / ||m(x)||, m = the reference", tolerance_handle, legend=False)
    if tolerance_handle:
        right.legend(handles=tolerance_handle, fontsize=FONT - 2, frameon=False, loc="upper right")
    fig.legend(handles=handles, loc="outside lower center", ncols=columns, fontsize=FONT - 1,
               frameon=False, title=caption or None, title_fontsize=FONT - 1)
    return _save(fig, path)
