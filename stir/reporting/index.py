"""Report folders named by their settings, and an index of them.

Two evaluations of the same pair (or preset) with different settings (n, k, iri, measure, the
inversion budget, the zoo recipes ...) used to write the same ``results/pair_a_vs_b/``. Each report
now goes to ``<out_dir>/<name>-<hash>/``, ``hash`` being 8 hex digits of every setting that
changes its numbers (``report_settings``), and:

- ``<out_dir>/<name>`` (default profile, full) or ``<out_dir>/<name>@<profile>``
  (``pair_vanilla_vs_vanilla_s1@laptop``; ``stir.experiments.latest_link``) is a symbolic link to the
  latest report of that name at that zoo profile: a cpu run of a pair never takes the laptop run's
  link (a real folder of that name from an older version is left alone);
- ``<out_dir>/<that link>.<6 hex digits>`` (``stir.experiments.exact_link``) links the latest report
  on exactly those models (their identities): a label another zoo file or run folder gives to other
  models, or two labels that slug alike, move the first link but never this one;
- ``<out_dir>/index.json`` lists every report folder with its name, settings and time, and
  ``<out_dir>/index.md`` shows, per name, only the settings in which its folders differ, each
  folder a relative link to its README.md (and the latest report of the name linked above them).

An index.json that cannot be read (a truncated file) is moved aside (``index.json.corrupt``) and
rebuilt from the report folders' ``record.json`` files (``rebuild_index``), so one damaged file
never blocks the evaluations that follow.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, Optional
from urllib.parse import quote

from filelock import FileLock

from stir import atomic

log = logging.getLogger(__name__)

# Settings that do not change a report's numbers: where it runs, logs and writes, how it is split.
# allow_nonfinite / allow_unfinished only admit models; what the models are is in the record.
_RUNTIME = ("execution", "logger", "device", "out_dir", "shard", "shards", "train_missing", "iri_grid_images",
            "experiment.description", "experiment.compute", "allow_nonfinite", "allow_unfinished")


def _flatten(d: Dict[str, Any], prefix: str = "") -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def report_settings(settings: Dict[str, Any]) -> Dict[str, Any]:
    """Flat ``key -> value`` of the evaluation settings (a nested dict) that change a report."""
    flat = _flatten(settings)
    return {k: v for k, v in sorted(flat.items()) if not any(k == r or k.startswith(r + ".") for r in _RUNTIME)}


def settings_hash(settings: Dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:8]


def report_dir(root: Path, name: str, settings: Dict[str, Any]) -> Path:
    """``root/<name>-<hash of settings>`` (the settings hold the models' identities: ``models_settings``)."""
    return Path(root) / f"{name}-{settings_hash(settings)}"


def models_settings(settings: Dict[str, Any], identities: Dict[str, str]) -> Dict[str, Any]:
    """The settings of a report with what its models are: {label: content identity}. The same
    command in two working directories (``ref=runs/m1`` naming two different run folders) names
    the same settings but other models, and so another report folder."""
    return {**settings, "models": dict(sorted(identities.items()))}


class UnsafeReportFolder(ValueError):
    """A report folder that is, or holds, a way out of ``out_dir`` (a symbolic link)."""


def check_report_dir(root: Path, folder: Path) -> None:
    """Refuse, in one line, to write a report through a symbolic link: ``folder`` must not be one,
    must resolve inside ``root``, and must hold no link that resolves outside it (a ``wandb``
    folder linked elsewhere would receive the run's files). Files are replaced, never written
    through (``stir.atomic``), so a link to a file inside is harmless; one to a folder is not."""
    top = Path(root).resolve()
    folder = Path(folder)
    if folder.is_symlink():
        raise UnsafeReportFolder(f"report folder {folder} is a symbolic link (to {os.readlink(folder)}); no report is "
                                 "written through one: remove it and run again (the results are stored)")
    if not folder.resolve().is_relative_to(top):
        raise UnsafeReportFolder(f"report folder {folder} resolves to {folder.resolve()}, outside out_dir {top}")
    if not folder.is_dir():
        return
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() and path.is_dir() and not path.resolve().is_relative_to(top):
            raise UnsafeReportFolder(f"report folder {folder} holds {path}, a symbolic link to {path.resolve()} outside "
                                     f"out_dir {top}; remove it and run again (the results are stored)")


def record_report(root: Path, name: str, folder: Path, settings: Dict[str, Any], latest: Optional[str] = None,
                  exact: Optional[str] = None) -> None:
    """Add ``folder`` to the index and point ``root/<latest>`` (default ``root/<name>``) and, when given,
    ``root/<exact>`` (the latest on exactly its models) at it (under a lock: reports may finish together)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / ".index.lock")):
        index_file = root / "index.json"
        index = _read_index(root)
        index[folder.name] = {"name": name, "settings": settings, "latest": latest or name,
                              **({"exact": exact} if exact else {}),
                              "updated": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        atomic.write_json(index_file, index)
        _point(root / (latest or name), folder)  # first: index.md links the latest report through it
        if exact:
            _point(root / exact, folder)
        atomic.write_text(root / "index.md", _markdown(index, root))


def _read_index(root: Path) -> Dict[str, Dict[str, Any]]:
    """index.json, or (when it does not parse) the index rebuilt from the report folders."""
    index_file = root / "index.json"
    if not index_file.is_file():
        return {}
    try:
        index = json.loads(index_file.read_text())
        if not isinstance(index, dict) or not all(isinstance(e, dict) and {"name", "settings"} <= set(e)
                                                   for e in index.values()):
            raise ValueError("not an index of report folders")
        return index
    except (ValueError, UnicodeDecodeError) as err:
        aside = atomic.move_aside(index_file)
        index = rebuild_index(root)
        log.warning("%s is unreadable (%s: %s); moved to %s and rebuilt from %d report folder(s)", index_file,
                    type(err).__name__, err, aside.name, len(index))
        return index


def rebuild_index(root: Path) -> Dict[str, Dict[str, Any]]:
    """The index of every report folder under ``root`` (``<name>-<8 hex digits>/record.json``), from its
    record: the name, the settings (``report_settings`` of its config), the record's time."""
    index: Dict[str, Dict[str, Any]] = {}
    for folder in sorted(p for p in Path(root).iterdir() if p.is_dir() and not p.is_symlink()):
        match = re.fullmatch(r"(.+)-[0-9a-f]{8}", folder.name)
        record_file = folder / "record.json"
        if match is None or not record_file.is_file():
            continue
        try:
            config = json.loads(record_file.read_text())["config"]
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
            log.warning("report folder %s has an unreadable record.json (%s); left out of the index", folder, err)
            continue
        settings = report_settings({k: v for k, v in config.items() if k != "models"})
        updated = datetime.fromtimestamp(record_file.stat().st_mtime, timezone.utc).isoformat(timespec="seconds")
        index[folder.name] = {"name": match.group(1), "settings": settings, "updated": updated}
    return index


def _point(link: Path, folder: Path) -> None:
    if link.exists() and not link.is_symlink():
        log.info("%s is a folder of an earlier version; the latest report is %s", link, folder)
        return
    tmp = link.with_name(f".{link.name}.{os.getpid()}.link")
    tmp.unlink(missing_ok=True)
    os.symlink(folder.name, tmp)
    os.replace(tmp, link)  # atomic: the link always names a finished report


def _link(root: Path, folder: str) -> str:
    """``[folder](folder/README.md)``, relative to ``root`` (where index.md lies); the plain name, marked,
    when that folder holds no README.md (removed since it was indexed)."""
    if (root / folder / "README.md").is_file():
        return f"[{folder}]({quote(folder)}/README.md)"
    return f"{folder} (no README.md)"


def _markdown(index: Dict[str, Dict[str, Any]], root: Path) -> str:
    """Per report name, a table of its folders (each a link to its README.md) and the settings in
    which they differ. The same index and folders give the same text."""
    lines = ["# Reports\n", "Each folder holds one report (a link to its README.md); the settings columns are those "
             "that differ between reports of the same name (all settings: index.json).\n"]
    by_name: Dict[str, list] = {}
    for folder, entry in sorted(index.items()):
        by_name.setdefault(entry["name"], []).append((folder, entry))
    for name, entries in sorted(by_name.items()):
        keys = sorted({k for _, e in entries for k in e["settings"]}
                      if len(entries) > 1 else set())
        keys = [k for k in keys if len({json.dumps(e["settings"].get(k), default=str) for _, e in entries}) > 1]
        header = ["folder", "updated", *keys]
        lines.append(f"## {name}\n")
        for link in sorted({e.get("latest", name) for _, e in entries}):  # one latest report per profile
            if (root / link).is_symlink() and (root / link / "README.md").is_file():
                lines.append(f"Latest: [{link}]({quote(link)}/README.md) (now {os.readlink(root / link)})\n")
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for folder, e in entries:
            cells = [_link(root, folder), e["updated"], *(json.dumps(e["settings"].get(k), default=str) for k in keys)]
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
        lines.append("")
    return "\n".join(lines) + "\n"
