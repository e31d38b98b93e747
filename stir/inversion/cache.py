"""On-disk cache of finished inversions, keyed by a content hash of everything that fixes the result.

An arbitrary IRI depends only on (m1, tap, X, seed, settings), so measuring N target models against
one reference reuses one inversion, and a matrix over N models costs N inversions, not N^2.

Key = sha256 over (JSON of):
    ALGORITHM_VERSION                        bumped whenever the engine's algorithm changes
    for each model that shapes x':           ``stir.models.behaviour.effective_identity``: the
                                             content identity (weights and code), or that of the
                                             behaviour variant its last probe found, and its tap
                                             (m1 for arbitrary IRIs; m1 and m2 for adversarial ones)
    the images                               dtype, shape and bytes
    the settings that fix x'                 ``InversionConfig.key_settings`` (the same description
                                             the results store keys STIR by)

Not in the key: ``ExecutionConfig`` (batch size, memory, compile, channels-last, the cache folder,
progress) and the device: every image is optimised independently, and these change x' at most at
the level of floating-point rounding.

An entry is one file ``<cache_dir>/<key>.pt``, written to a temporary file in the same folder and
renamed into place (``stir.atomic``), so a killed inversion leaves no entry. An entry that fails to
load or to validate (truncated, corrupt, wrong shapes, another key) is logged, deleted and
recomputed, never trusted.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

from torch import Tensor, nn

from stir.atomic import torch_save
from stir.untrusted import load_plain
from stir.models.behaviour import effective_identity
from stir.models.identity import tensor_digest

log = logging.getLogger(__name__)

# Bump when the inversion algorithm (objective, geometry, measurement) changes. 2: faithful mode reads
# its input through the published clamp, FakeReLU, snapshots along the budget in every entry.
ALGORITHM_VERSION = 2

def cache_key(models: Sequence[Tuple[nn.Module, str]], images: Tensor, settings: Dict[str, Any]) -> str:
    """sha256 hex key of (algorithm version, each (model, tap), images, settings)."""
    blob = {
        "version": ALGORITHM_VERSION,
        "models": [[effective_identity(m), tap] for m, tap in models],
        "images": tensor_digest(images),
        "settings": settings,
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=list).encode()).hexdigest()


def entry_path(cache_dir: str, key: str) -> Path:
    return Path(cache_dir) / f"{key}.pt"


# Per-image tensors an entry holds and their expected shapes given n images of shape s.
def _expected_shapes(n: int, image_shape: Tuple[int, ...], steps: int) -> Dict[str, Tuple[int, ...]]:
    return {
        "x_prime": (n, *image_shape),
        "residual": (n,),
        "l2_to_original": (n,),
        "steps": (n,),
        "history": (steps + 1, n),
        "elapsed": (steps + 1,),
    }


def load_entry(path: Path, key: str, n: int, image_shape: Tuple[int, ...], steps: int,
               snapshot_steps: Sequence[int] = ()) -> Optional[Dict[str, Any]]:
    """The entry at ``path`` if it exists and is valid; None otherwise (an invalid one is deleted)."""
    if not path.exists():
        return None
    try:
        entry = load_plain(path)
        if not isinstance(entry, dict) or entry.get("key") != key:
            raise ValueError("not an entry for this key")
        for name, shape in _expected_shapes(n, image_shape, steps).items():
            value = entry.get(name)
            if not isinstance(value, Tensor) or tuple(value.shape) != shape:
                raise ValueError(f"{name}: expected shape {shape}, got {getattr(value, 'shape', type(value))}")
        if not isinstance(entry.get("evaluations"), int):
            raise ValueError("evaluations missing")
        inner = [t for t in snapshot_steps if t != steps]  # the last snapshot is x_prime itself
        snaps, snap_res = entry.get("snapshots"), entry.get("snapshot_residual")
        if not isinstance(snaps, dict) or sorted(snaps) != sorted(inner):
            raise ValueError(f"snapshots: expected steps {inner}")
        if any(tuple(v.shape) != (n, *image_shape) for v in snaps.values()):
            raise ValueError("snapshots have the wrong shape")
        if not isinstance(snap_res, dict) or sorted(snap_res) != sorted(snapshot_steps):
            raise ValueError(f"snapshot_residual: expected steps {list(snapshot_steps)}")
        m2 = entry.get("m2_distance")
        if m2 is not None and (not isinstance(m2, Tensor) or tuple(m2.shape) != (n,)):
            raise ValueError("m2_distance has the wrong shape")
    except Exception as err:  # truncated, corrupt, foreign: recompute
        log.warning("inversion cache entry %s is unusable (%s: %s); deleting it and recomputing",
                    path, type(err).__name__, err)
        path.unlink(missing_ok=True)
        return None
    return entry


def save_entry(path: Path, key: str, entry: Dict[str, Any]) -> None:
    """Write ``entry`` (CPU tensors and ints) atomically under ``path``.

    The cache saves work, it holds no result: a write that fails (a full disk, a read-only folder)
    is logged with the path and the inversion's result used as it is (the next run inverts again).
    """
    def cpu(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: cpu(x) for k, x in v.items()}
        return v.detach().cpu() if isinstance(v, Tensor) else v

    payload = {name: cpu(v) for name, v in entry.items()}
    payload["key"] = key
    try:
        torch_save(payload, path)
    except OSError as err:
        log.warning("could not write inversion cache entry (%s); continuing without it: the next run inverts "
                    "these images again", err)
