"""Every figure kind, rendered at short and long model labels: size, legends, labels and titles checked on
the drawn figure (nothing outside it, no legend over an axis label or a title, labels present)."""
import math

import numpy as np
import pytest
import torch

import stir.reporting.heatmaps as heatmaps
import stir.reporting.image_grid as image_grid
import stir.reporting.plots as plots
import stir.reporting.scatter as scatter
from stir.reporting import (plot_bars, plot_convergence, plot_incremental, plot_iri_grid, plot_layerwise, plot_matrix,
                            plot_matrix_pair)
from stir.reporting.scatter import plot_scatter_grid

SHORT = ("at", "vanilla")
LONG = ("resnet56-zheng-seed-twin-trained-on-the-jpeg-copy", "cifar10/resnet18-w8/vanilla-n5000/seed1")


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions draw, captured (drawn) just before they are saved and cleared."""
    figures = []

    def capture(save):
        def wrapped(fig, path):
            fig.canvas.draw()
            figures.append(_facts(fig))
            return save(fig, path)
        return wrapped

    for module in (plots, heatmaps, image_grid, scatter):  # each saves through plots._save, imported by name
        monkeypatch.setattr(module, "_save", capture(module._save))
    return figures


def _facts(fig) -> dict:
    """What the checks need, read while the artists exist."""
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    labels, titles = [], []
    for ax in fig.axes:
        for text in (ax.xaxis.label, ax.yaxis.label):
            if text.get_text():
                labels.append((text.get_text(), text.get_window_extent(renderer)))
        if ax.title.get_text():
            titles.append((ax.title.get_text(), ax.title.get_window_extent(renderer)))
    if fig._suptitle is not None:
        titles.append((fig._suptitle.get_text(), fig._suptitle.get_window_extent(renderer)))
    plotted = [ax for ax in fig.axes if (ax.lines or ax.collections or ax.containers) and ax.get_label() != "<colorbar>"]
    return dict(
        size=(box.width, box.height), bbox=box,
        legends=[([t.get_text() for t in lg.get_texts()], lg.get_title().get_text(), lg.get_window_extent(renderer),
                  lg in fig.legends) for lg in legends],
        labels=labels, titles=titles,
        axes_labels=[(ax.get_xlabel(), ax.get_ylabel()) for ax in plotted],
        xticks=[[t.get_text() for t in ax.get_xticklabels() if t.get_text()] for ax in plotted],
        # upright tick labels only: the boxes of rotated ones overlap by construction
        xtick_boxes=[[t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text() and not t.get_rotation()]
                     for ax in fig.axes],
        texts=[t.get_text() for ax in fig.axes for t in ax.texts],
    )


def _inside(inner, outer, slack=2.0) -> bool:
    return (inner.x0 >= outer.x0 - slack and inner.y0 >= outer.y0 - slack and inner.x1 <= outer.x1 + slack
            and inner.y1 <= outer.y1 + slack)


def _check(f: dict, max_px=(4200, 3000)) -> None:
    w, h = f["size"]
    assert 500 <= w <= max_px[0] and 400 <= h <= max_px[1], f["size"]
    for text, box in f["labels"] + f["titles"]:
        assert _inside(box, f["bbox"]), f"cut off: {text!r}"
    for texts, title, box, outside in f["legends"]:
        assert texts and all(texts), texts
        assert _inside(box, f["bbox"]), f"legend cut off: {texts}"
        for text, label_box in f["labels"] + f["titles"]:
            assert not box.overlaps(label_box), f"legend {texts[:2]} covers {text!r}"
    for xlabel, ylabel in f["axes_labels"]:
        assert xlabel and ylabel, (xlabel, ylabel)
    for boxes in f["xtick_boxes"]:  # tick labels do not run into each other
        for a, b in zip(boxes, boxes[1:]):
            assert not a.overlaps(b)


def _flat(text: str) -> str:
    return "".join(text.split())  # a wrapped label without its line breaks


def _legend_texts(f: dict) -> list:
    return [t for texts, _, _, _ in f["legends"] for t in texts]


@pytest.mark.parametrize("names", [SHORT, LONG])
def test_convergence_legend_below_residuals_per_direction_bars_explained(names, tmp_path, drawn):
    a, b = names
    series = {f"STIR({b}|{a})": [0.5, 0.55, 0.6], f"STIR_adv({b}|{a})": [0.5, 0.55, 0.6],  # coincide
              f"STIR({a}|{b})": [0.4, 0.45, 0.47]}
    plot_convergence({n: [25, 50, 100] for n in series}, series, {n: [0.2, 0.1, 0.05] for n in series},
                     tmp_path / "c.png", f"STIR along the inversion budget: {a} vs {b}",
                     errors={n: [0.01, 0.02, 0.01] for n in series}, tolerance=0.02,
                     error_note="bars: ± 1 std over the k=2 seed draws")
    (f,) = drawn
    _check(f)
    texts = [_flat(t) for t in _legend_texts(f)]
    assert _flat(f"STIR({b}|{a}): X' made for {a}") in texts and _flat(f"STIR({a}|{b}): X' made for {b}") in texts
    assert _flat(f"STIR_adv({b}|{a}): X' made for {a} (= STIR({b}|{a}))") in texts  # the hidden series is named
    assert _flat("IRI tolerance 0.02") in texts
    (caption,) = [title for _, title, _, _, in f["legends"] if title.startswith("bars: ± 1 std over the k=2 seed draws\n")]
    assert _flat("coinciding series") in _flat(caption) and _flat(f"STIR_adv({b}|{a}) = STIR({b}|{a})") in _flat(caption)
    assert "residual of m1" not in " ".join(t for t, _ in f["titles"])
    assert all(t.lstrip("−-").isdigit() for ticks in f["xticks"] for t in ticks)  # whole steps


def test_convergence_with_one_recorded_step_says_so(tmp_path, drawn):
    plot_convergence({"STIR(b|a)": [15]}, {"STIR(b|a)": [0.36]}, {"STIR(b|a)": [0.037]}, tmp_path / "c.png", "t",
                     tolerance=0.02)
    (f,) = drawn
    _check(f)
    assert any("one recorded step only" in title for _, title, _, _ in f["legends"])  # the caption, below the axes


@pytest.fixture
def boxes(monkeypatch):
    """Per figure drawn: the caption's box (the figure legend's title), every axes' box and every
    visible tick label's box (both axes, major and minor), from the Agg renderer."""
    found = []

    def capture(save):
        def wrapped(fig, path):
            fig.canvas.draw()
            renderer = fig.canvas.get_renderer()
            (legend,) = fig.legends
            ticks = [t.get_window_extent(renderer) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
                     for t in axis.get_ticklabels(which="both") if t.get_visible() and t.get_text()]
            found.append(dict(caption=legend.get_title().get_text(), caption_box=legend.get_title().get_window_extent(renderer),
                              axes=[ax.get_window_extent(renderer) for ax in fig.axes], ticks=ticks,
                              texts=[t.get_text() for ax in fig.axes for t in ax.texts],
                              labels=[t.get_text() for t in legend.get_texts()]))
            return save(fig, path)
        return wrapped

    monkeypatch.setattr(plots, "_save", capture(plots._save))
    return found


ONE_STEP = ("STIR(vanilla_s1|vanilla)", "STIR_adv(vanilla_s1|vanilla)", "STIR(vanilla|vanilla_s1)",
            "STIR_adv(vanilla|vanilla_s1)")


def one_step(path, stir, residual):
    """A one-step record of a pair, both directions and IRI kinds, as pairs.convergence_figure draws it."""
    plot_convergence({n: [15] for n in ONE_STEP}, dict(zip(ONE_STEP, stir)), dict(zip(ONE_STEP, residual)), path,
                     "STIR along the inversion budget (fast mode): vanilla vs vanilla_s1",
                     errors={n: [0.01] for n in ONE_STEP}, tolerance=0.02,
                     error_note="bars: ± 1 std over the k=2 seed draws")


def test_the_caption_of_a_one_step_record_never_overlaps_an_axes_or_a_tick_label(tmp_path, boxes):
    """Issue 34: the caption overprinted a tick label and the tolerance line; it now lies below the axes."""
    one_step(tmp_path / "c.png", [[0.36], [0.36], [0.41], [0.41]], [[0.037], [0.05], [0.03], [0.045]])
    (f,) = boxes
    assert "one recorded step only" in f["caption"] and not any("one recorded step" in t for t in f["texts"])
    box = f["caption_box"]
    assert box.width > 0 and box.height > 0
    assert len(f["axes"]) == 2 and len(f["ticks"]) > 8
    for axes in f["axes"]:
        assert not box.overlaps(axes), (box, axes)
        assert box.y1 < axes.y0  # below the axes, not beside them
    for tick in f["ticks"]:
        assert not box.overlaps(tick), (box, tick)


def test_coinciding_stir_and_stir_adv_are_said_to_coincide_and_not_otherwise(tmp_path, boxes):
    equal = [[0.36], [0.36], [0.41], [0.41]]  # STIR_adv = STIR by construction (e.g. adversarial weight 0)
    one_step(tmp_path / "same.png", equal, [[0.037], [0.05], [0.03], [0.045]])
    one_step(tmp_path / "apart.png", [[0.36], [0.30], [0.41], [0.33]], [[0.037], [0.05], [0.03], [0.045]])
    one_step(tmp_path / "all.png", equal, [[0.037], [0.037], [0.03], [0.03]])
    same, apart, both = boxes
    caption = _flat(same["caption"])
    assert _flat("coinciding series") in caption
    assert _flat("STIR_adv(vanilla_s1|vanilla) = STIR(vanilla_s1|vanilla) in STIR") in caption
    assert _flat("STIR_adv(vanilla|vanilla_s1) = STIR(vanilla|vanilla_s1) in STIR") in caption
    labels = [_flat(t) for t in same["labels"]]
    assert _flat("STIR_adv(vanilla_s1|vanilla): X' made for vanilla (STIR = STIR(vanilla_s1|vanilla))") in labels
    assert "coinciding" not in apart["caption"] and not any("=" in t for t in apart["labels"])
    assert _flat("STIR_adv(vanilla|vanilla_s1) = STIR(vanilla|vanilla_s1) in STIR") not in _flat(both["caption"])
    assert _flat("(= STIR(vanilla|vanilla_s1))") in _flat(" ".join(both["labels"]))  # equal on both panels


def test_a_coinciding_series_is_drawn_so_that_both_stay_visible(tmp_path):
    """The later of two equal series is hollow, larger and dashed: the earlier one shows through it."""
    from matplotlib.figure import Figure as MplFigure

    drawn = {}
    original = MplFigure.clear

    def keep(fig, *a, **kw):  # read the lines just before _save clears the figure
        left = fig.axes[0] if fig.axes else None
        if left is not None and not drawn:
            drawn.update({c.get_label(): c.lines[0] for c in left.containers})  # error bars: the data line
        return original(fig, *a, **kw)

    import unittest.mock

    with unittest.mock.patch.object(MplFigure, "clear", keep):
        one_step(tmp_path / "c.png", [[0.36], [0.36], [0.41], [0.30]], [[0.037], [0.05], [0.03], [0.045]])
    first = next(line for label, line in drawn.items() if label.startswith("STIR(vanilla_s1|vanilla)"))
    later = next(line for label, line in drawn.items() if label.startswith("STIR_adv(vanilla_s1|vanilla)"))
    assert first.get_marker() != later.get_marker() and later.get_markerfacecolor() == "none"
    assert later.get_markersize() > first.get_markersize() and later.get_linestyle() == "--"


@pytest.mark.parametrize("names", [SHORT, LONG])
def test_layerwise_with_fits_and_coincident_series(names, tmp_path, drawn):
    a, b = names
    series = {f"STIR({b}|{a})": [0.9, 0.7, 0.5], f"STIR({a}|{b})": [0.9, 0.7, 0.5]}
    plot_layerwise([0.0, 0.5, 1.0], series, tmp_path / "l.png", f"Layer-wise STIR: {a} vs {b}",
                   fits={n: (-0.4, 0.9) for n in series}, errors={n: [(0.05, 0.05)] * 3 for n in series},
                   error_note="bars: 95% interval over images and draws")
    (f,) = drawn
    _check(f)
    texts = [_flat(t) for t in _legend_texts(f)]
    assert _flat(f"STIR({a}|{b}) (= STIR({b}|{a}))") in texts and _flat(f"STIR({b}|{a}) fit (slope -0.400)") in texts


@pytest.mark.parametrize("names", [SHORT, LONG])
def test_incremental(names, tmp_path, drawn):
    a, b = names
    series = {f"{a}: STIR(m_t|m_t-1)": [0.5, 0.6, 0.7], f"{b}: STIR(m_t|m_t-1)": [0.4, 0.5, math.nan]}
    plot_incremental([5000, 10000, 15000], series, tmp_path / "i.png", "Incremental STIR",
                     errors={n: [0.02] * 3 for n in series}, error_note="bars: 95% interval")
    (f,) = drawn
    _check(f)
    assert {_flat(n) for n in series} <= {_flat(t) for t in _legend_texts(f)}


def test_incremental_with_figure_1_s_nine_sizes_and_the_report_s_bar_note(tmp_path, drawn):
    """The paper preset's chains: 5k, ..., 45k (8 links from 10k), two families and directions, and
    the evaluation's bar note as legend title: nothing cut off, no tick label on another."""
    sizes = [10000 * k // 2 for k in range(2, 10)]  # 10,000 ... 45,000
    series = {f"{family}: STIR({d})": [0.4 + 0.02 * k for k in range(8)]
              for family in ("vanilla", "AT") for d in ("m_t|m_t-1", "m_t-1|m_t")}
    plot_incremental(sizes, series, tmp_path / "i.png", "Figure 1: consecutive models of growing training sets",
                     errors={n: [0.05] * 8 for n in series},
                     error_note="bars: 95% interval over images and draws (half_sampling)")
    (f,) = drawn
    _check(f)
    assert len(f["xtick_boxes"][0]) >= 8  # a tick at every size


@pytest.mark.parametrize("names", [SHORT, LONG])
def test_matrices(names, tmp_path, drawn):
    models = [names[0], names[1], names[0] + "_s1"]
    values = np.array([[1.0, 0.3, 0.5], [0.2, 1.0, np.nan], [0.4, 0.6, 1.0]])
    plot_matrix(values, models, models, tmp_path / "m.png", "STIR(column | row)")
    plot_matrix_pair(values, values, models, models, tmp_path / "p.png", "STIR beside CKA")
    assert len(drawn) == 2  # both heatmaps were captured and checked
    for f in drawn:
        _check(f)


@pytest.mark.parametrize("names", [SHORT, LONG])
def test_iri_grid_and_bars_and_scatter(names, tmp_path, drawn):
    a, b = names
    rows = {f"X' made for {a}: 1 of 4 are IRIs": torch.rand(4, 3, 8, 8),
            f"adversarial X': {a} matched, {b} pushed": torch.rand(4, 3, 8, 8)}
    captions = {name: ["r 0.012 IRI", "r 0.044", "r 0.051", "r 0.038"] for name in rows}
    plot_iri_grid(torch.rand(4, 3, 8, 8), rows, tmp_path / "g.png", "X and X'", captions=captions)
    plot_bars([a, b], [0.5, 0.7], [0.05, 0.02], tmp_path / "b.png", "accuracy", "test accuracy",
              error_note="bars: ± 1 std over seeds")
    plot_scatter_grid({a: ([0.1, 0.2, 0.3], [0.3, 0.2, 0.5], "rho 0.5"), b: ([0.1], [0.2], "rho -")},
                      tmp_path / "s.png", "grounding", xlabel="1 - similarity", ylabel="functional difference")
    grid, bars, scatter_fig = drawn
    for f in drawn:
        _check(f)
    assert bars["axes_labels"][0][0] == "bars: ± 1 std over seeds"


def test_dashboard_training_panels_have_y_labels_and_whole_epochs(tmp_path, monkeypatch):
    from stir.reporting import dashboard

    log = tmp_path / "runs/cifar10/resnet18-w8/vanilla-n5000/seed0/csv/version_0/metrics.csv"
    log.parent.mkdir(parents=True)
    log.write_text("epoch,step,train/epoch_loss,val/acc,val/robust_acc\n0,10,2.1,0.2,0.1\n1,20,1.9,0.3,0.15\n"
                   "2,30,1.7,0.35,0.2\n")
    seen = []

    class Canvas(dashboard.FigureCanvasAgg):
        def print_png(self, *args, **kwargs):
            self.draw()
            seen.append(_facts(self.figure))
            return super().print_png(*args, **kwargs)

    monkeypatch.setattr(dashboard, "FigureCanvasAgg", Canvas)
    (tmp_path / "results").mkdir()
    dashboard.draw_local(tmp_path / "runs", tmp_path / "results", tmp_path / "d.png")
    (f,) = seen
    training = [(x, y) for x, y in f["axes_labels"] if x == "epoch"]
    assert len(training) == 3 and all(y for _, y in training)
    ticks = [t for ticks in f["xticks"][:3] for t in ticks]
    assert ticks and all(t.lstrip("−-").isdigit() for t in ticks)


def test_dashboard_says_why_a_panel_is_empty_and_tells_profiles_apart(tmp_path, monkeypatch):
    """Issue 55: empty panels were drawn blank, and a cpu and a laptop report of one pair shared a label."""
    import json

    from stir.reporting import dashboard

    said, labels = [], []
    monkeypatch.setattr(dashboard, "_empty", lambda ax, why: said.append(why))
    for profile in ("cpu", "laptop"):
        folder = tmp_path / "results" / f"pair_a_vs_b-{profile[:2]}345678"
        folder.mkdir(parents=True)
        (folder / "record.json").write_text(json.dumps({"config": {"zoo": {"profile": profile}},
                                                        "summary": {"linear_cka": 0.9, "stir_m2_given_m1": 0.5}}))
    real_annotate = dashboard.Figure.subplots

    def subplots(self, *args, **kwargs):
        axes = real_annotate(self, *args, **kwargs)
        original = axes[1, 1].annotate
        axes[1, 1].annotate = lambda text, *a, **k: labels.append(text) or original(text, *a, **k)
        return axes

    monkeypatch.setattr(dashboard.Figure, "subplots", subplots)
    dashboard.draw_local(tmp_path / "runs", tmp_path / "results", tmp_path / "d.png")
    assert sum("no training CSV logs" in w for w in said) == 3 and any("no matrix report" in w for w in said)
    assert any("no incremental report" in w for w in said) and not any("STIR and CKA" in w for w in said)
    assert sorted(labels) == ["a_vs_b (cpu)", "a_vs_b (laptop)"]
