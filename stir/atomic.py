"""Atomic file writes: a temp file in the same folder, fsynced, then os.replace.

A kill at any moment leaves either the old file or the new one, never a truncated file that would
block or corrupt the next run. The file gets the permissions a plain ``open(path, "w")`` would give
(0666 minus the umask), not ``mkstemp``'s private 0600, so a group sharing ``runs/`` or ``results/``
can read what another member wrote. The temp file's name carries the writer's host and pid
(``.<name>.<host>-<pid>.<random>.tmp``); a temp file left by a killed writer on this host is removed
by the next write to the same folder (one of another host is removed once it is a day old).
"""
from __future__ import annotations

import io
import json
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Any, Union

PathLike = Union[str, os.PathLike]
STALE_AFTER_S = 24 * 3600  # a temp file of another host this old is abandoned (no write takes a day)


def current_umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux /proc)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: the classic read-and-restore (not thread-safe, brief)
    os.umask(mask)
    return mask


def _host() -> str:
    return socket.gethostname().replace(".", "_").replace("-", "_") or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def remove_stale_tmp(folder: PathLike) -> int:
    """Remove temp files of this module left in ``folder`` by writers that no longer run; the count."""
    folder = Path(folder)
    removed = 0
    if not folder.is_dir():
        return 0
    host = _host()
    for tmp in folder.glob(".*.tmp"):
        parts = tmp.name.rsplit(".", 3)  # ['.<name>', '<host>-<pid>', '<random>', 'tmp']
        if len(parts) != 4 or "-" not in parts[1]:
            continue
        owner_host, _, pid = parts[1].rpartition("-")
        try:
            stale = (not _alive(int(pid))) if owner_host == host else time.time() - tmp.stat().st_mtime > STALE_AFTER_S
            if stale:
                tmp.unlink()
                removed += 1
        except (ValueError, FileNotFoundError):
            continue
    return removed


CHUNK = 1 << 24  # bytes per os.write call (16 MiB)


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (os.write may write fewer than asked)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view[:CHUNK])
        view = view[written:]


def _naming(err: OSError, path: Path) -> OSError:
    """``err`` as the same kind of OSError naming ``path`` (a failed write(2) names no file; a failed
    temp file names its random name): ``[Errno 28] No space left on device: '<path>'``."""
    if err.errno is None:
        return err
    return type(err)(err.errno, err.strerror, str(path))


def write_bytes(path: PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in the same folder (fsync, then os.replace).

    Any failure (a full disk, a read-only folder, a kill) leaves the previous file as it was; an
    OSError is re-raised naming ``path``.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_tmp(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{_host()}-{os.getpid()}.", suffix=".tmp")
    except OSError as err:
        raise _naming(err, path) from err
    try:
        try:
            os.fchmod(fd, 0o666 & ~current_umask())  # what open(path, "w") would give
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise _naming(err, path) from err
        raise


def write_text(path: PathLike, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def torch_save(obj: Any, path: PathLike) -> None:
    import torch  # here, not at the top: writing a text file needs no torch (bench scripts, docs tools)

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    write_bytes(path, buffer.getvalue())


def write_figure(path: PathLike, fig: Any, **savefig_kwargs: Any) -> None:
    """``fig.savefig(path, **savefig_kwargs)`` rendered in memory, then written like ``write_bytes``.

    The format is the one ``savefig`` would infer from the suffix of ``path`` unless ``format`` is
    given; a path without a suffix needs ``format`` (``savefig`` would add one to the name).
    """
    path = Path(path)
    fmt = savefig_kwargs.pop("format", None) or path.suffix[1:].lower()
    if not fmt:
        raise ValueError(f"{path}: no suffix to tell the figure's format; pass format=")
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, **savefig_kwargs)
    write_bytes(path, buffer.getvalue())


def move_aside(path: PathLike) -> Path:
    """Rename a file that cannot be trusted to ``<name>.corrupt`` (``.corrupt-2``, ... when taken) beside it.

    Nothing is deleted: the file stays for a post-mortem, and the name it blocked is free again.
    """
    path = Path(path)
    aside = path.with_name(f"{path.name}.corrupt")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.corrupt-{n}")
    os.replace(path, aside)
    return aside
