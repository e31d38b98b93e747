"""The IRI grid of a report: the original images on the first row, then one row per named set of
X' made from them (``plot_iri_grid``). Drawn and saved as every report figure is (``stir.reporting.plots``).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from stir.reporting.plots import FONT, PathLike, _new_figure, _save, _to_numpy, _wrap


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
    from it); each row is labelled on the left with its name (e.g. "X' made for m1: 3 of 8
    are IRIs", "adversarial X': m1 matched, m2 pushed"). At most ``max_images`` columns; a set with fewer images leaves
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
