"""Read weight files of trained networks and load them strictly, with one readable error.

Two formats are read (``torch.load(..., weights_only=True)``: tensors and plain values only):

* a plain state dict ``{name: tensor}``;
* a training checkpoint ``{"state_dict": {...}, ...}``, e.g. the original public release of He et
  al.'s CIFAR ResNets (akamaster/pytorch_resnet_cifar10, ``{"state_dict": ..., "best_prec1": ...}``);
  its other plain entries (``best_prec1``) are kept as metadata.

DataParallel's ``module.`` prefix is removed when every key carries it. A registered network holds
its input normalisation as buffers (``normalize.mean``, ``normalize.std``); weight files of other
projects do not, so those buffers are compared and loaded only when the file has them. Batch-norm
step counters (``num_batches_tracked``), which files saved by PyTorch < 0.4.1 lack (the original
CIFAR ResNet release), keep the network's values when absent, as ``torch`` itself does.

A file that does not fit the network raises ``WeightsMismatch``: one line naming the file, the
architecture and the first mismatching key (missing, unexpected or of another shape), with the
counts of each kind, instead of torch's list of every size mismatch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Tuple, Union

from torch import Tensor, nn

from stir.provenance import file_sha256
from stir.untrusted import UnsafeFileError, first_line, load_plain

PathLike = Union[str, Path]
NORMALIZE_PREFIX = "normalize."  # the Normalize buffers of registered networks
_COUNTER = "num_batches_tracked"  # batch norm's step counter, absent from files of PyTorch < 0.4.1


class WeightsError(ValueError):
    """A weights file cannot be read (absent, not a state dict)."""


class WeightsMismatch(WeightsError):
    """A weights file does not fit the architecture; the message names the first mismatching key."""


@dataclass(frozen=True)
class WeightsFile:
    """What was read: the file, its format, its sha256 and the checkpoint's other entries."""

    path: Path
    format: str  # "state_dict" (plain) | "checkpoint" ({"state_dict": ...})
    sha256: str
    prefix_removed: str = ""  # "module." when DataParallel's prefix was stripped
    metadata: Mapping[str, Any] = field(default_factory=dict)  # e.g. {"best_prec1": 91.73}


def read_weights(path: PathLike) -> Tuple[Dict[str, Tensor], WeightsFile]:
    """(state dict with any ``module.`` prefix removed, what was read) of a plain or checkpoint file."""
    file = Path(path)
    if not file.is_file():
        raise WeightsError(f"no weights file at {file}")
    try:
        blob = load_plain(file)
    except UnsafeFileError as err:  # a file that asks to run code: one line, never loaded
        raise WeightsError(str(err)) from None
    except Exception as err:  # a corrupt or foreign file: say which and why
        raise WeightsError(f"cannot read weights from {file}: {first_line(err)}") from err
    fmt, metadata = "state_dict", {}
    if isinstance(blob, Mapping) and isinstance(blob.get("state_dict"), Mapping):
        fmt = "checkpoint"
        metadata = {k: v for k, v in blob.items() if k != "state_dict" and isinstance(v, (int, float, str, bool))}
        blob = blob["state_dict"]
    if not isinstance(blob, Mapping) or not all(isinstance(v, Tensor) for v in blob.values()):
        kinds = sorted({type(v).__name__ for v in blob.values()}) if isinstance(blob, Mapping) else [type(blob).__name__]
        raise WeightsError(f"{file} holds no state dict of tensors (found {', '.join(kinds)}); expected "
                           "{name: tensor} or {'state_dict': {name: tensor}, ...}")
    state, prefix = dict(blob), ""
    if state and all(k.startswith("module.") for k in state):
        state, prefix = {k[len("module."):]: v for k, v in state.items()}, "module."
    return state, WeightsFile(file, fmt, file_sha256(file), prefix, metadata)


def load_state(net: nn.Module, state: Mapping[str, Tensor], *, source: str, arch: str) -> None:
    """Load ``state`` into ``net`` strictly (every key, every shape); ``WeightsMismatch`` otherwise.

    ``source`` (the file) and ``arch`` (e.g. "cifar_resnet20 (width 16)") go into the message.
    ``normalize.*`` buffers the state lacks keep the network's values.
    """
    own = net.state_dict()
    merged = dict(state)
    if not any(k.startswith(NORMALIZE_PREFIX) for k in state):  # other projects' files: normalisation is ours
        merged.update({k: v for k, v in own.items() if k.startswith(NORMALIZE_PREFIX)})
    # Files saved by PyTorch < 0.4.1 (the original CIFAR ResNet release) have no batch-norm step
    # counters; torch fills them in too. They only matter in training with momentum=None.
    merged.update({k: v for k, v in own.items() if k.endswith("." + _COUNTER) and k not in merged
                   and isinstance(net.get_submodule(k[: -len(_COUNTER) - 1]), nn.modules.batchnorm._BatchNorm)})
    problem = first_mismatch(own, merged)
    if problem is not None:
        raise WeightsMismatch(f"the weights in {source} do not fit {arch}: {problem}")
    net.load_state_dict(merged, strict=True)


def first_mismatch(expected: Mapping[str, Tensor], given: Mapping[str, Tensor]) -> Union[str, None]:
    """None when ``given`` has exactly ``expected``'s keys and shapes; else one sentence: the first
    mismatch in the network's order (then the file's), and how many of each kind there are."""
    missing = [k for k in expected if k not in given]
    unexpected = [k for k in given if k not in expected]
    shapes = [k for k in expected if k in given and tuple(given[k].shape) != tuple(expected[k].shape)]
    if not (missing or unexpected or shapes):
        return None
    bad = set(missing) | set(shapes)
    first = next((k for k in expected if k in bad), None)
    if first is None:
        first_text = f"key {unexpected[0]!r} is in the file but not in the network"
    elif first not in given:
        first_text = f"key {first!r} is missing from the file"
    else:
        first_text = (f"key {first!r} has shape {tuple(given[first].shape)} in the file but "
                      f"{tuple(expected[first].shape)} in the network")
    counts = ", ".join(f"{n} {what}" for n, what in ((len(missing), "missing"), (len(unexpected), "unexpected"),
                                                    (len(shapes), "of another shape")) if n)
    return f"first mismatch: {first_text} ({counts} in all; the file has {len(given)} keys, the network {len(expected)})"


def load_weights(net: nn.Module, path: PathLike, *, arch: str) -> WeightsFile:
    """Read ``path`` (plain state dict or checkpoint) and load it strictly into ``net``; what was read."""
    state, info = read_weights(path)
    load_state(net, state, source=str(info.path), arch=arch)
    return info
