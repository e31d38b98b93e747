"""Result tables: aligned terminal text, GitHub markdown, CSV.

Data contract (no dependency on other stir modules):

- a table is ``rows: list[dict[str, scalar]]`` plus an optional ordered ``columns: list[str]``
  (default: the union of the rows' keys in first-seen order); a key missing from a row is a
  missing value;
- scalars are str, bool, int, float (NaN allowed, rendered "nan"), None (missing), or numpy / 0-d
  torch scalars, which are unwrapped with ``.item()``;
- a matrix is ``values`` (n_rows, n_cols) array-like of floats (NaN allowed) with ``row_labels``
  (n_rows) and ``col_labels`` (n_cols); :func:`matrix_rows` turns it into table rows.

Missing values render as "-" for people (terminal, markdown) and as an empty field in CSV, where
"-" would be read back as a string. Files are written atomically (temp file + ``os.replace``) so
a kill mid-write leaves the previous report intact.
"""

from __future__ import annotations

import csv
import io
import math
import numbers
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, Union

import numpy as np

from stir.atomic import write_text

__all__ = ["format_table", "to_markdown", "write_csv", "write_markdown", "mean_std", "matrix_rows"]

PathLike = Union[str, os.PathLike]
Row = Mapping[str, Any]

MISSING = "-"


def _columns(rows: Sequence[Row], columns: Sequence[str] | None) -> list[str]:
    if columns is not None:
        return [str(c) for c in columns]
    seen: dict[str, None] = {}  # dict keeps first-seen order, unlike set
    for row in rows:
        for key in row:
            seen.setdefault(str(key), None)
    return list(seen)


def _unwrap(value: Any) -> Any:
    """numpy scalars and 0-d arrays / tensors -> the Python scalar they hold."""
    if isinstance(value, (str, bytes)) or value is None:
        return value
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return value.item()
    return value


def _is_number(value: Any) -> bool:
    # bool is an Integral, but True rendered as "1" or "1.000" would read as a measurement.
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _cell(value: Any, floatfmt: str, missing: str) -> str:
    value = _unwrap(value)
    if value is None:
        return missing
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        value = float(value)
        if math.isnan(value):
            return "nan"  # format(nan, "+.3f") would give "+nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return format(value, floatfmt)
    # One table row per line: an embedded newline would break both layouts.
    return str(value).replace("\r\n", " ").replace("\n", " ")


def _render(rows: Sequence[Row], columns: Sequence[str] | None, floatfmt: str, missing: str
            ) -> tuple[list[str], list[list[str]], list[bool]]:
    """Header, formatted cells and per-column "is numeric" (right-aligned) flags."""
    cols = _columns(rows, columns)
    cells = [[_cell(row.get(c), floatfmt, missing) for c in cols] for row in rows]
    numeric = []
    for c in cols:
        present = [_unwrap(row.get(c)) for row in rows if _unwrap(row.get(c)) is not None]
        numeric.append(bool(present) and all(_is_number(v) for v in present))
    return cols, cells, numeric


def format_table(rows: Sequence[Row], columns: Sequence[str] | None = None, floatfmt: str = ".3f") -> str:
    """Aligned plain-text table for the terminal / log: header, a rule of dashes, one line per row.

    Columns are separated by two spaces; numeric columns are right-aligned, others left-aligned.
    Floats use ``floatfmt``, ints are printed whole, NaN as "nan", None / missing keys as "-".
    Trailing spaces are stripped; no trailing newline.
    """
    cols, cells, numeric = _render(rows, columns, floatfmt, MISSING)
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]

    def line(parts: Iterable[str]) -> str:
        padded = [p.rjust(w) if num else p.ljust(w) for p, w, num in zip(parts, widths, numeric)]
        return "  ".join(padded).rstrip()

    out = [line(cols), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    return "\n".join(out)


def _md_escape(text: str) -> str:
    # A bare "|" would split the cell in a GitHub pipe table.
    return text.replace("|", "\\|")


def to_markdown(rows: Sequence[Row], columns: Sequence[str] | None = None, floatfmt: str = ".3f") -> str:
    """GitHub pipe table; numeric columns are right-aligned (``---:``).

    Cells are padded so the raw text lines up too; "|" inside cells is escaped as ``\\|``.
    Floats use ``floatfmt``, NaN is "nan", None / missing keys are "-". No trailing newline.
    """
    cols, cells, numeric = _render(rows, columns, floatfmt, MISSING)
    cols = [_md_escape(c) for c in cols]
    cells = [[_md_escape(c) for c in r] for r in cells]
    # The rule needs at least three dashes (plus the colon) to be recognised.
    widths = [max([len(c), 4 if num else 3] + [len(r[i]) for r in cells])
              for i, (c, num) in enumerate(zip(cols, numeric))]

    def line(parts: Iterable[str]) -> str:
        padded = [p.rjust(w) if num else p.ljust(w) for p, w, num in zip(parts, widths, numeric)]
        return "| " + " | ".join(padded) + " |"

    rule = "| " + " | ".join(("-" * (w - 1) + ":") if num else "-" * w for w, num in zip(widths, numeric)) + " |"
    return "\n".join([line(cols), rule] + [line(r) for r in cells])


def _csv_value(value: Any) -> Any:
    value = _unwrap(value)
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # full precision, "nan" / "inf" as Python (and pandas) read them back
    return value


def write_csv(rows: Sequence[Row], path: PathLike, columns: Sequence[str] | None = None) -> Path:
    """Write rows as CSV with a header line, atomically; floats at full precision, None as "".

    The whole text is built in memory first, so a value that fails to convert leaves any existing
    file at ``path`` untouched. Returns the path.
    """
    path = Path(path)
    cols = _columns(rows, columns)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(cols)
    for row in rows:
        writer.writerow([_csv_value(row.get(c)) for c in cols])
    write_text(path, buffer.getvalue())
    return path


def write_markdown(rows: Sequence[Row], path: PathLike, columns: Sequence[str] | None = None,
                   title: str | None = None, floatfmt: str = ".3f", footer: str = "") -> Path:
    """Write :func:`to_markdown` to ``path`` atomically, under a ``# title`` heading if given and
    with ``footer`` (e.g. the table's notes) below it."""
    path = Path(path)
    text = to_markdown(rows, columns, floatfmt) + "\n"
    if title:
        text = f"# {title}\n\n{text}"
    if footer:
        text += "\n" + footer + "\n"
    write_text(path, text)
    return path


def mean_std(mean: Any, std: Any = None, fmt: str = ".3f") -> str:
    """``"0.812 ± 0.013"``; just the mean when std is None; "-" when the mean is None."""
    if _unwrap(mean) is None:
        return MISSING
    m = _cell(mean, fmt, MISSING)
    if _unwrap(std) is None:
        return m
    return f"{m} ± {_cell(std, fmt, MISSING)}"


def matrix_rows(values: Any, row_labels: Sequence[str], col_labels: Sequence[str],
                corner: str = "ref \\ target") -> list[dict[str, Any]]:
    """Turn a (n_rows, n_cols) matrix into table rows.

    Each row is ``{corner: row_label, col_labels[0]: float, ...}``, so the first column names the
    reference (row) model and the header names the targets. Values become Python floats (NaN kept).
    """
    arr = np.asarray(_to_numpy(values), dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"matrix must be 2-D, got shape {arr.shape}")
    if arr.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"matrix shape {arr.shape} does not match {len(row_labels)} row labels "
                         f"x {len(col_labels)} column labels")
    keys = [str(corner)] + [str(c) for c in col_labels]
    if len(set(keys)) != len(keys):
        raise ValueError(f"column labels and corner must be distinct to be table keys: {keys}")
    return [{keys[0]: str(r), **{k: float(v) for k, v in zip(keys[1:], arr[i])}}
            for i, r in enumerate(row_labels)]


def _to_numpy(values: Any) -> Any:
    """Tensors (any device, with grad) -> numpy; anything else unchanged."""
    if hasattr(values, "detach") and hasattr(values, "cpu"):
        return values.detach().cpu().numpy()
    return values
