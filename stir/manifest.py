"""The sha256 manifest that pins the shipped data (``zoo/MANIFEST.sha256``): nothing shipped is served
unless its bytes are the committed ones.

The shipped weights are pinned by the sha256 their entry records; the entries themselves
(``zoo/models``), the shipped results (``zoo/store``) and the shipped models' behaviour fingerprints
(``zoo/fingerprints``, ``stir.models.behaviour``) are pinned here: one line per file,
``<sha256>  <path relative to the zoo folder>``, sorted by path, as ``sha256sum`` prints it (so
``cd zoo && sha256sum -c MANIFEST.sha256`` checks it too). A reader verifies one part (``models`` or
``store``) before it serves anything of it: a file whose sha256 is not the pinned one, a file the
manifest does not list, and a listed file that is missing are refused (``ManifestError``, one line
naming the file and the fix). An edited result (a value set outside its own interval) or an edited
accuracy is therefore never served; a result shipped on purpose is pinned by writing the manifest
again (``python -m stir.zoo.manifest --write``; ``stir.zoo.ship`` and ``stir.zoo.ship_results`` do it
themselves).

The manifest itself is pinned: its sha256 is ``SHIPPED_MANIFEST_SHA256`` below, checked
each time the shipped zoo's manifest is read (an edited entry with an edited manifest line is refused);
writing the shipped manifest rewrites that constant too.

Cost: one read and one sha256 of each file of the part, once per process and part (about 28 MB and
1,600 files for ``zoo/store``: ``bench/bench_manifest.py``).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Dict, Iterable, Optional, Union

PathLike = Union[str, os.PathLike]
MANIFEST = "MANIFEST.sha256"
PARTS = ("fingerprints", "models", "store")  # the pinned subfolders of the zoo folder
WRITE_COMMAND = "python -m stir.zoo.manifest --write"
SHIPPED_ZOO = Path(__file__).resolve().parent.parent / "zoo"  # the zoo folder the package ships
PIN_FILE = Path(__file__).resolve()  # this file: the writer rewrites the next line with the manifest
SHIPPED_MANIFEST_SHA256 = "d82bd322119e1691a5311df3eefb5958abc4a873f9bb39398edad1018286e052"  # sha256 of zoo/MANIFEST.sha256


class ManifestError(ValueError):
    """A pinned file differs from the manifest, is not in it, or is missing; or there is no manifest."""


def digests(folder: PathLike, parts: Iterable[str] = PARTS) -> Dict[str, str]:
    """{path relative to ``folder`` (posix): sha256 hex} of every regular file under ``folder/<part>``.
    A symbolically linked folder there is read through when it resolves inside the repository that
    holds ``folder`` (its parent); one that resolves outside is refused (``ManifestError``)."""
    root = Path(folder)
    out: Dict[str, str] = {}
    for part in parts:
        base = root / part
        if not base.is_dir():
            continue
        for path in sorted(_files(base, root)):
            out[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _files(base: Path, root: Path) -> Iterable[Path]:
    """The regular files under ``base`` (named through ``base``), following linked folders inside the
    repository (``root``'s parent) once each."""
    repo = root.resolve().parent
    seen = set()
    stack = [base]
    while stack:
        folder = stack.pop()
        if folder.is_symlink() and not folder.resolve().is_relative_to(repo):
            raise ManifestError(f"{folder} is a symbolic link to {folder.resolve()}, outside the repository {repo}: "
                                f"shipped files are read only from inside it; replace the link by the folder itself "
                                f"(rm {folder} && git checkout -- {folder.relative_to(root.parent)})")
        if folder.resolve() in seen:
            continue
        seen.add(folder.resolve())
        for path in sorted(folder.iterdir()):
            if path.is_dir():
                stack.append(path)
            elif path.is_file():
                yield path


def render(pins: Dict[str, str]) -> str:
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(pins.items()))


def write(folder: PathLike) -> Path:
    """Write ``folder/MANIFEST.sha256`` over every file of ``PARTS`` and of any other folder the manifest
    already pins (atomically: temp file + rename)."""
    pinned = {name.split("/", 1)[0] for name in (read(folder, check_pin=False) or {})}
    return _save(folder, digests(folder, sorted(set(PARTS) | pinned)))


def pin(folder: PathLike, files: Iterable[PathLike]) -> Path:
    """Add (or update) the pins of ``files`` (under ``folder``) to its manifest, the other pins unchanged:
    what a ship command does for the files it wrote; without a manifest, every file is pinned."""
    pins = read(folder)
    if pins is None:
        pins = digests(folder)
    root = Path(folder).resolve()
    for f in files:
        pins[Path(f).resolve().relative_to(root).as_posix()] = hashlib.sha256(Path(f).read_bytes()).hexdigest()
    return _save(folder, pins)


def _save(folder: PathLike, pins: Dict[str, str]) -> Path:
    from stir.atomic import write_text

    path = Path(folder) / MANIFEST
    text = render(pins)
    write_text(path, text)  # a temp file beside it, renamed: a reader never sees half a manifest
    if _shipped(folder):  # the trust root moves with it: the package's pinned hash
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        source = PIN_FILE.read_text(encoding="utf-8")
        start = source.index('SHIPPED_MANIFEST_SHA256 = "') + len('SHIPPED_MANIFEST_SHA256 = "')
        write_text(PIN_FILE, source[:start] + digest + source[start + 64:])
    return path


def _shipped(folder: PathLike) -> bool:
    return Path(folder).resolve() == SHIPPED_ZOO


def pinned_sha256() -> str:
    """The manifest hash in this file as it says now (a rewrite in this process included)."""
    source = PIN_FILE.read_text(encoding="utf-8")
    start = source.index('SHIPPED_MANIFEST_SHA256 = "') + len('SHIPPED_MANIFEST_SHA256 = "')
    return source[start:start + 64]


def read(folder: PathLike, check_pin: bool = True) -> Optional[Dict[str, str]]:
    """{path: sha256} of ``folder/MANIFEST.sha256``; None when there is no manifest. The shipped zoo's
    manifest must hash to the package's pin (``check_pin``: only ``write`` reads it unchecked)."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    data = path.read_bytes()
    if check_pin and _shipped(folder):
        digest = hashlib.sha256(data).hexdigest()
        if digest not in (SHIPPED_MANIFEST_SHA256, pinned_sha256()):
            raise ManifestError(f"{path} has sha256 {digest[:12]}..., not the {SHIPPED_MANIFEST_SHA256[:12]}... that "
                                f"stir/manifest.py pins: the manifest was edited and nothing shipped is served; "
                                f"restore it (git checkout -- zoo/{MANIFEST}) or, as a maintainer shipping on purpose, "
                                f"{WRITE_COMMAND} (rewrites the manifest and the pin)")
    pins: Dict[str, str] = {}
    for number, line in enumerate(data.decode("utf-8").splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            raise ManifestError(f"{path} line {number} is not '<sha256>  <path>'; write it again: "
                                f"{WRITE_COMMAND} (after git checkout -- {Path(folder).name}/ if it was not you)")
        pins[name] = digest
    return pins


def verify(folder: PathLike, part: str) -> None:
    """Raise ``ManifestError`` unless every file under ``folder/part`` is exactly the one the manifest
    pins, and every file it pins there exists. Names the first offending file and both fixes."""
    folder = Path(folder)
    if not (folder / part).is_dir():
        return  # nothing shipped there: nothing to serve
    pins = read(folder)
    fix = (f"restore it (git checkout -- {folder.name}/{part}) or, if you shipped it on purpose, pin it: "
           f"{WRITE_COMMAND}" + ("" if folder.name == "zoo" else f" {folder}"))
    if pins is None:
        raise ManifestError(f"{folder / MANIFEST} is missing: the shipped {folder / part} is not pinned and is not "
                            f"served; {fix}")
    found = digests(folder, (part,))
    for name, digest in sorted(found.items()):
        pinned = pins.get(name)
        if pinned is None:
            raise ManifestError(f"{folder / name} is not in {folder / MANIFEST}: an unpinned shipped file is not "
                                f"served; {fix}")
        if pinned != digest:
            raise ManifestError(f"{folder / name} has sha256 {digest[:12]}..., not the {pinned[:12]}... that "
                                f"{folder / MANIFEST} pins: it was edited; {fix}")
    missing = sorted(n for n in pins if n.startswith(f"{part}/") and n not in found)
    if missing:
        raise ManifestError(f"{folder / missing[0]} is pinned by {folder / MANIFEST} but missing"
                            f"{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''}; {fix}")
