"""Report figures: real matplotlib (Agg canvas), PNGs read back, nothing leaked through pyplot."""
import ast
import gc
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib import _pylab_helpers
from matplotlib.figure import Figure
from matplotlib.image import imread

from stir.reporting import (plot_bars, plot_convergence, plot_incremental, plot_iri_grid, plot_layerwise,
                            plot_matrix, plot_matrix_pair)
from stir.reporting.heatmaps import _draw_matrix
from stir.reporting.plots import _thousands

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _read_png(path, min_w=300, min_h=200):
    assert path.is_file() and path.read_bytes()[:8] == PNG_SIGNATURE
    img = imread(path)
    h, w, c = img.shape
    assert c in (3, 4) and w >= min_w and h >= min_h
    return img


@pytest.fixture(autouse=True)
def _no_pyplot_figures():
    yield
    assert _pylab_helpers.Gcf.get_num_fig_managers() == 0  # pyplot never saw a figure


def _live_figures() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is Figure)  # type(), not isinstance: no proxies poked


def test_plot_matrix_with_nan_cell(tmp_path):
    values = np.array([[1.0, 0.3, np.nan], [0.2, 1.0, 0.5]])
    path = plot_matrix(values, ["resnet18", "vgg16"], ["resnet18", "vgg16", "resnet18 AT"],
                       tmp_path / "sub" / "stir.png", "STIR(m2|m1)")
    img = _read_png(path)
    # The NaN cell is painted the grey "bad" colour (#b0b0b0), not left blank or coloured.
    grey = np.all(np.abs(img[..., :3] - 0xB0 / 255) < 0.01, axis=-1)
    assert grey.sum() > 1000


def test_matrix_labels_state_the_direction():
    fig = Figure()
    ax = fig.add_subplot()
    _draw_matrix(fig, ax, np.array([[1.0, np.nan]]), ["m1"], ["m1", "m2"], "t",
                 "reference m1 (IRIs made for it)", "target m2", "STIR(m2|m1)", 0.0, 1.0, True,
                 "viridis", ".2f")
    assert ax.get_xlabel() == "target m2" and ax.get_ylabel().replace("\n", " ") == "reference m1 (IRIs made for it)"
    assert fig.axes[1].get_ylabel() == "STIR(m2|m1)"  # colour bar
    assert [t.get_text() for t in ax.texts] == ["1.00", "nan"]
    fig.clear()
    del fig, ax


def test_plot_matrix_edge_cases(tmp_path):
    # All-NaN with automatic limits, a torch input, no annotation: still a valid figure.
    _read_png(plot_matrix(torch.full((2, 2), float("nan")), ["a", "b"], ["a", "b"], tmp_path / "n.png",
                          "all nan", vmin=None, vmax=None, annotate=False), min_w=200)
    with pytest.raises(ValueError):
        plot_matrix(np.zeros((2, 3)), ["a", "b"], ["a", "b"], tmp_path / "bad.png", "bad")


def test_plot_matrix_pair(tmp_path):
    rng = np.random.default_rng(0)
    path = plot_matrix_pair(rng.random((3, 3)), rng.random((3, 3)), list("abc"), list("abc"),
                            tmp_path / "pair.png", "STIR vs CKA")
    img = _read_png(path)
    assert img.shape[1] > 1.8 * img.shape[0]  # two panels side by side


def test_plot_layerwise(tmp_path):
    depths = np.linspace(0, 1, 5)
    path = plot_layerwise(depths, {"vanilla": [0.9, 0.7, 0.5, np.nan, 0.2], "AT": [0.9, 0.85, 0.8, 0.7, 0.6]},
                          tmp_path / "lw.png", "layer-wise STIR", fits={"vanilla": (-0.7, 0.9)},
                          errors={"AT": [0.01, 0.02, None, 0.02, 0.03]})
    _read_png(path)
    # Networks with different numbers of layers: per-series depths.
    _read_png(plot_layerwise({"a": [0, 0.5, 1], "b": [0, 1]}, {"a": [1, 2, 3], "b": [1, 2]},
                             tmp_path / "lw2.png", "t"))
    with pytest.raises(ValueError):
        plot_layerwise([0, 1], {"a": [1, 2, 3]}, tmp_path / "bad.png", "t")


def test_plot_incremental(tmp_path):
    sizes = [1000, 5000, 10000, 50000]
    series = {"vanilla: STIR(m_t|m_t-1)": [0.5, 0.6, 0.7, 0.8], "vanilla: STIR(m_t-1|m_t)": [0.4, 0.5, 0.6, 0.7],
              "AT: STIR(m_t|m_t-1)": [0.7, 0.8, np.nan, 0.9]}
    _read_png(plot_incremental(sizes, series, tmp_path / "inc.png", "incremental",
                               errors={"AT: STIR(m_t|m_t-1)": [0.01, 0.02, 0.0, 0.01]}))
    _read_png(plot_incremental(sizes, series, tmp_path / "inc_log.png", "incremental", logx=True))
    assert _thousands(10000, 0) == "10,000"


def test_plot_convergence_two_panels_both_kinds(tmp_path):
    steps = {"STIR(b|a)": [25, 50, 150], "STIR_adv(b|a)": [25, 50, 150], "STIR(a|b)": [25, 50, 150]}
    stir = {"STIR(b|a)": [0.5, 0.6, 0.65], "STIR_adv(b|a)": [0.5, 0.4, 0.3], "STIR(a|b)": [0.4, np.nan, 0.6]}
    residual = {"STIR(b|a)": [0.2, 0.1, 0.08], "STIR_adv(b|a)": [0.2, 0.1, 0.08], "STIR(a|b)": [0.3, 0.12, 0.09]}
    img = _read_png(plot_convergence(steps, stir, residual, tmp_path / "conv.png", "convergence",
                                     errors={"STIR(b|a)": [0.01, 0.02, 0.0]}, tolerance=0.02), min_w=700)
    assert img.shape[1] > 1.8 * img.shape[0]  # two panels side by side: STIR and the residual


def test_plot_iri_grid(tmp_path):
    originals = torch.rand(10, 3, 16, 16)
    rows = {"IRIs of m1 (arbitrary)": torch.rand(10, 3, 16, 16) * 1.2 - 0.1,  # out of range: clipped
            "adversarial IRIs m1 vs m2": np.random.default_rng(0).random((3, 3, 16, 16))}
    wide = _read_png(plot_iri_grid(originals, rows, tmp_path / "iri.png", "IRIs"))
    narrow = _read_png(plot_iri_grid(originals, rows, tmp_path / "iri3.png", "IRIs", max_images=3),
                       min_w=100)
    assert wide.shape[1] > narrow.shape[1]  # 8 columns vs 3
    _read_png(plot_iri_grid(torch.rand(2, 1, 8, 8), {}, tmp_path / "grey.png", "grey"), min_w=100)
    with pytest.raises(ValueError):
        plot_iri_grid(torch.rand(2, 5, 8, 8), {}, tmp_path / "bad.png", "bad")


def test_plot_bars(tmp_path):
    _read_png(plot_bars(["STIR", "STIR_adv", "CKA", "agreement"], [0.8, 0.4, np.nan, 0.9],
                        [0.01, None, 0.02, 0.0], tmp_path / "bars.png", "summary", "value"))
    _read_png(plot_bars(["a", "b"], [-0.5, 0.5], None, tmp_path / "neg.png", "t", "v"), min_w=200)


def test_figures_are_freed(tmp_path):
    before = _live_figures()
    plot_matrix(np.eye(2), ["a", "b"], ["a", "b"], tmp_path / "m.png", "t")
    plot_layerwise([0, 1], {"a": [0.1, 0.2]}, tmp_path / "l.png", "t", fits={"a": (0.1, 0.1)})
    plot_iri_grid(torch.rand(2, 3, 8, 8), {"x": torch.rand(2, 3, 8, 8)}, tmp_path / "g.png", "t")
    assert _live_figures() == before


def test_no_pyplot_and_no_eager_wandb_import():
    # Module-level imports decide import side effects: pyplot would pick a global backend, and
    # wandb is slow to import, so it must wait for log_report. (Static check: a subprocess that
    # imports torch from scratch would cost most of the suite's time budget.)
    package = Path(__file__).resolve().parents[2] / "stir" / "reporting"
    for source in package.glob("*.py"):
        tree = ast.parse(source.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any("pyplot" in n for n in names), source.name
        top_level = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        assert not any("wandb" == a.name.split(".")[0] for n in top_level if isinstance(n, ast.Import)
                       for a in n.names), source.name
