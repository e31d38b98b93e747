"""Reporting layer: result tables (terminal / markdown / CSV), report figures, W&B logging.

Generic over plain data (rows of dicts, matrices with labels, series of floats) so it has no
dependency on the rest of stir beyond atomic file writes. ``report`` holds what experiments hand
over (``Report``: tables, figures as data, summary keys, notes), ``publish`` writes it, ``index``
names report folders by their settings and lists them. Importing it has no side effects:
figures use the Agg canvas directly (no pyplot, no global backend) and wandb is imported only
when :func:`log_report` runs.
"""

from .heatmaps import plot_matrix, plot_matrix_pair
from .image_grid import plot_iri_grid
from .plots import plot_bars, plot_convergence, plot_incremental, plot_layerwise
from .tables import format_table, matrix_rows, mean_std, to_markdown, write_csv, write_markdown
from .report import Figure, Report, Table, slug
from .wandb_log import WANDB_MODES, log_report

__all__ = [
    "format_table", "to_markdown", "write_csv", "write_markdown", "mean_std", "matrix_rows",
    "plot_matrix", "plot_matrix_pair", "plot_layerwise", "plot_incremental", "plot_iri_grid",
    "plot_bars", "plot_convergence",
    "log_report", "WANDB_MODES", "Figure", "Report", "Table", "slug",
]
