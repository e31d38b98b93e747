"""Reading files that someone else may have written: no file ever runs code.

A pickle names the functions that rebuild its objects, and an unrestricted unpickler calls them: one
object whose ``__reduce__`` returns ``(os.system, ("...",))`` runs a command the moment the file is
read. Every file the project reads goes through one of the two readers here:

* ``load_plain(path)``: ``torch.load(..., weights_only=True)`` (tensors, dicts, lists, tuples,
  numbers, strings: what checkpoints, weights files and caches hold). A file that needs anything
  else is refused with one line naming the file and the first thing it asked for
  (``UnsafeFileError``), never loaded without ``weights_only``.
* ``load_cifar_pickle(path)``: the CIFAR python format, a pickle by nature (dicts of bytes, lists of
  ints and one uint8 numpy array), read by ``RestrictedUnpickler``, whose ``find_class`` admits only
  what rebuilds a numpy array and refuses every other name.

A loader added later uses one of these; ``tests/faults/test_fault_untrusted_files.py`` plants a
code-running object in every file kind and checks that nothing runs.
"""
from __future__ import annotations

import io
import pickle
import re
from pathlib import Path
from typing import Any, Callable, Dict, Tuple, Union

import numpy as np
import torch

PathLike = Union[str, Path]


class UnsafeFileError(ValueError):
    """A file asks to run code (a pickle global outside plain data) and is not loaded."""


def _numpy_core(module: str) -> Any:
    """numpy's ``_core`` (numpy >= 2) or ``core`` (numpy 1) submodule ``module``, whichever exists."""
    import importlib

    for base in ("numpy._core", "numpy.core"):
        try:
            return importlib.import_module(f"{base}.{module}")
        except ImportError:
            continue
    raise ImportError(f"numpy has no core.{module}")


def _numpy_names() -> Dict[Tuple[str, str], Callable[[], Any]]:
    """(module, name) -> the object, for what numpy's pickles of plain arrays name (numpy 1 and 2 spellings)."""
    names: Dict[Tuple[str, str], Callable[[], Any]] = {}
    for base in ("numpy.core", "numpy._core"):
        names[(f"{base}.multiarray", "_reconstruct")] = lambda: _numpy_core("multiarray")._reconstruct
        names[(f"{base}.multiarray", "scalar")] = lambda: _numpy_core("multiarray").scalar
        names[(f"{base}.numeric", "_frombuffer")] = lambda: _numpy_core("numeric")._frombuffer
    names[("numpy", "ndarray")] = lambda: np.ndarray
    # Python 3's protocol-2 pickles spell bytes as _codecs.encode(str, "latin1"): a pure function.
    import codecs

    names[("_codecs", "encode")] = lambda: codecs.encode
    names[("numpy", "dtype")] = lambda: np.dtype
    return names


_ADMITTED = _numpy_names()


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that builds plain data and numpy arrays only.

    Dicts, lists, tuples, bytes, str, ints and floats are pickle opcodes and need no global; a numpy
    array names ``numpy.core.multiarray._reconstruct`` (``numpy._core`` in numpy 2), ``numpy.ndarray``
    and ``numpy.dtype`` (``numpy.core.numeric._frombuffer`` at protocol 5). Any other global is refused:
    what it would have called is never looked up, let alone called.
    """

    def find_class(self, module: str, name: str) -> Any:
        found = _ADMITTED.get((module, name))
        if found is None:
            raise UnsafeFileError(f"it asks for {module}.{name}, which is not plain data (only dicts, lists, "
                                  "bytes, numbers and numpy arrays are read)")
        return found()

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafeFileError(f"it holds a persistent id {str(pid)[:40]!r}, which plain data never does")


def load_cifar_pickle(path: PathLike) -> Any:
    """Unpickle a CIFAR python-format file with ``RestrictedUnpickler`` (``encoding="bytes"``: the
    official files were pickled by Python 2, so their str keys come back as bytes).

    ``UnsafeFileError`` (one line naming the file) for a file that asks for any other global; the
    errors of a damaged file (``UnpicklingError``, ``EOFError``, ...) pass through for the caller to name.
    """
    with open(path, "rb") as f:
        data = f.read()
    try:
        return RestrictedUnpickler(io.BytesIO(data), encoding="bytes").load()
    except UnsafeFileError as err:
        raise UnsafeFileError(f"{path} is refused: {err}; a data file never runs code") from None


# What torch's weights-only unpickler says when a file names a global it does not admit, e.g.
# "Trying to load unsupported GLOBAL posix.system whose module posix is blocked." or
# "WeightsUnpickler error: Unsupported global: GLOBAL io.open was not an allowed global by default. ...".
_GLOBAL = re.compile(r"GLOBAL ([\w.]+)")
_UNPICKLER_ERROR = re.compile(r"WeightsUnpickler error: ([^\n]*?)(?:\. |\.?$)", re.M)


def _refusal(err: BaseException) -> str:
    """What a weights-only refusal says the file asked for, in a few words ('' for another error)."""
    text = str(err)
    if "Weights only load failed" not in text:
        return ""
    named = _GLOBAL.search(text)
    if named:
        return f"it asks for {named.group(1)}"
    said = _UNPICKLER_ERROR.search(text)
    return said.group(1).strip() if said else "it holds objects outside tensors and plain values"


def load_plain(path: PathLike, **kwargs: Any) -> Any:
    """``torch.load(path, map_location="cpu", weights_only=True)``: tensors and plain values only.

    A file that asks for anything else (an object whose unpickling would run code) is refused with
    ``UnsafeFileError``, one line naming the file and what it holds; other errors (a truncated zip, a
    missing file) pass through unchanged for the caller to report.
    """
    kwargs.setdefault("map_location", "cpu")
    try:
        return torch.load(path, weights_only=True, **kwargs)
    except Exception as err:
        why = _refusal(err)
        if why:
            raise UnsafeFileError(f"{path} is refused: {why}, which is not a tensor or plain value; a file is "
                                  "never loaded with code it names") from None
        raise


def first_line(err: BaseException) -> str:
    """``Type: first line of the message`` of an error, for one-line reports."""
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0]}" if text else type(err).__name__
