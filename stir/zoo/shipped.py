"""Shipped models: trained zoo models whose weights live in the repository (``zoo/``), so that an
evaluation on a fresh clone needs no training.

    zoo/
        weights/<name>-<profile>-<sha256[:12]>.pt   a plain state dict (torch.save(state_dict)), float32, or
                                                    float16 or int8 (stir.zoo.quantize) with the stored
                                                    model's accuracy measured again
        models/<name>-<profile>-<sha256[:12]>.json  its entry: zoo name, profile, recipe and its identity,
                                                    architecture, accuracy, robust accuracy, training
                                                    time and curve, versions, the sha256 of the weights

Every file is written once and never rewritten: the sha256 is in the name, and shipping refuses a
file that exists. A retrained model is a new pair of files beside the old one; the old entry stops
resolving as soon as its recipe is no longer the zoo name's (and, for the same recipe, the newest
entry wins).

A zoo name resolves to a shipped model when no finished run folder of its recipe exists (a local run
of the same recipe wins) and an entry of the same name and profile has exactly the recipe identity
the name resolves to now (``recipe_identity(recipe_of(config))``: every key that changes the trained
weights, the data by content). The weights' sha256 is checked when they are loaded; the entries are pinned by the zoo folder's
manifest (``stir.manifest``, ``zoo/MANIFEST.sha256``), checked before the first entry is read.
"""
from __future__ import annotations

import bisect

import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

import torch
from torch import Tensor, nn

from stir import manifest
from stir.provenance import file_sha256
from stir.zoo.quantize import dequantize, quantize_state

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DIR = REPO / "zoo"
WEIGHTS, ENTRIES = "weights", "models"
# The epoch-level columns of a run's metrics.csv that make the training curve.
_CURVE_PREFIXES = ("train/epoch_", "val/")
_LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]")
_SETUP_S = 60.0  # a process's setup lines come at most this long before its network line (training_wall_s)
_ATTEMPT_START = re.compile(r"\[stir\.training\.pipeline\]\[INFO\] - .*: \S+ width \d+, [\d.]+M parameters")


class ShippedModelError(ValueError):
    """A shipped model's file is missing or is not the file its entry names (sha256), or an entry is unreadable."""


def recipe_identity(recipe: Mapping[str, Any]) -> str:
    """sha256 of a recipe (``stir.training.runs.recipe_of``, seed included): two runs with the same
    identity were trained by the same command on the same data."""
    return hashlib.sha256(json.dumps(dict(recipe), sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class ShippedModel:
    """One entry of the shipped zoo (``zoo/models/*.json``), with its weights file resolved."""

    entry: Path  # the entry's JSON file
    weights: Path  # the weights file
    name: str
    profile: str
    sha256: str  # of the weights file
    arch: str
    width: int
    data: str  # data set name (cifar10 | cifar100)
    num_classes: int
    recipe: Dict[str, Any]
    recipe_sha256: str
    metrics: Dict[str, float]  # test/acc, test/robust_acc, ...
    shipped_at: str
    record: Dict[str, Any]  # the whole entry as written

    @classmethod
    def read(cls, entry: Path) -> "ShippedModel":
        try:
            raw = json.loads(Path(entry).read_text())
            return cls(entry=Path(entry), weights=Path(entry).parent.parent / raw["file"], name=raw["name"],
                       profile=raw["profile"], sha256=raw["sha256"], arch=raw["model"]["arch"],
                       width=int(raw["model"]["width"]), data=raw["data"]["name"],
                       num_classes=int(raw["data"]["num_classes"]), recipe=raw["recipe"],
                       recipe_sha256=raw["recipe_sha256"], metrics={k: float(v) for k, v in raw["test"].items()},
                       shipped_at=raw["shipped_at"], record=raw)
        except (ValueError, KeyError, TypeError) as err:
            raise ShippedModelError(f"shipped zoo entry {entry} is unreadable ({type(err).__name__}: {err})") from None

    def state_dict(self) -> Dict[str, Tensor]:
        """The weights a network loads, after checking the file's sha256 against the entry: the stored
        tensors, an int8 file's dequantized to float32 (``stir.zoo.quantize``)."""
        return dequantize(self.stored_tensors())

    def stored_tensors(self) -> Dict[str, Tensor]:
        """The file's tensors as stored (``weights_only=True``), after checking its sha256 against the entry."""
        if not self.weights.is_file():
            raise ShippedModelError(f"shipped model {self.name} ({self.entry.name}): its weights file {self.weights} "
                                    "is missing (git lfs or a partial clone?)")
        data = self.weights.read_bytes()
        actual = hashlib.sha256(data).hexdigest()
        if actual != self.sha256:
            raise ShippedModelError(f"shipped model {self.name}: {self.weights} ({len(data)} bytes) has sha256 "
                                    f"{actual[:12]}..., not the {self.sha256[:12]}... its entry {self.entry.name} "
                                    "records; restore the file from git (git checkout -- zoo/)")
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


class ShippedZoo:
    """The shipped models under one folder (``zoo.shipped_dir``)."""

    def __init__(self, folder: Path = DEFAULT_DIR):
        self.folder = Path(folder)
        self._pinned = False

    def entries(self) -> List[ShippedModel]:
        """Every entry, oldest shipped first, after checking that every entry file is the one the
        manifest pins (``stir.manifest``, once: an edited accuracy or recipe is refused, not served)."""
        if not self._pinned:
            try:
                manifest.verify(self.folder, ENTRIES)
            except manifest.ManifestError as err:
                raise ShippedModelError(str(err)) from None
            self._pinned = True
        found = [ShippedModel.read(p) for p in sorted((self.folder / ENTRIES).glob("*.json"))]
        return sorted(found, key=lambda e: (e.shipped_at, e.entry.name))

    def named(self, name: str, profile: str) -> List[ShippedModel]:
        return [e for e in self.entries() if e.name == name and e.profile == profile]

    def find(self, name: str, profile: str, recipe: Mapping[str, Any]) -> Optional[ShippedModel]:
        """The newest entry of ``name`` at ``profile`` with exactly this recipe (None when there is none)."""
        identity = recipe_identity(recipe)
        matching = [e for e in self.named(name, profile) if e.recipe_sha256 == identity]
        return matching[-1] if matching else None

    def why_none(self, name: str, profile: str, recipe: Mapping[str, Any]) -> str:
        """Why no entry serves ``name`` (empty when none is shipped under that name): the keys in which
        the newest entry's recipe differs from the one asked for."""
        from stir.training.runs import recipe_differences

        named = self.named(name, profile)
        if not named:
            return ""
        newest = named[-1]
        why = (f"{self.folder / ENTRIES / newest.entry.name} ships {name!r} at profile={profile} for another recipe "
               f"({recipe_differences(newest.recipe, dict(recipe))})")
        if newest.recipe.get("data.source") != recipe.get("data.source"):
            trained_on = newest.record.get("trained_on") or "a local copy"
            why += f"; it was trained on {trained_on}: give the same data with data.source=PATH"
        return why


# The types a weights file may be stored in (``python -m stir.zoo.ship --dtype``): float32 keeps the
# trained weights exactly; float16 halves the file; int8 quarters it (weight-only, per output channel:
# stir.zoo.quantize; the other tensors stay float32). Below float32 the stored model's accuracy is
# measured again: the shipped model is what it computes, not what the run computed.
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int8": torch.int8}


def export_state(state: Mapping[str, Tensor], dtype: str = "float32") -> bytes:
    """A state dict as a shipped weights file: floating tensors in ``dtype`` (DTYPES; int8: the weights
    quantized, ``stir.zoo.quantize``), contiguous CPU copies, saved into a buffer (so the bytes, and the
    sha256, do not depend on the file's name). A network loads a float16 file into its float32
    parameters (``load_state_dict`` casts), an int8 file after ``dequantize``."""
    if dtype == "int8":
        plain = quantize_state(state)
    else:
        plain = {k: (v.detach().to("cpu", DTYPES[dtype]) if v.is_floating_point() else v.detach().cpu()).contiguous().clone()
                 for k, v in state.items()}
    buffer = io.BytesIO()
    torch.save(plain, buffer)
    return buffer.getvalue()


def same_logits(a: nn.Module, b: nn.Module, images: Tensor) -> Optional[str]:
    """None when the two networks give identical logits on ``images``, else how far apart they are."""
    with torch.no_grad():
        la, lb = a.eval()(images), b.eval()(images)
    if la.shape == lb.shape and torch.equal(la, lb):
        return None
    if la.shape != lb.shape:
        return f"logits of shape {tuple(lb.shape)}, not {tuple(la.shape)}"
    return f"logits differ by up to {(la - lb).abs().max().item():.3g}"


def training_curve(run_dir: Path) -> List[Dict[str, Any]]:
    """Per epoch, the epoch-level metrics of a run's CSV logs (``csv/version_*/metrics.csv``; a later
    attempt's value of an epoch replaces an earlier one's): ``[{"epoch": 0, "train/epoch_loss": ..., "val/acc": ...}]``."""
    epochs: Dict[int, Dict[str, Any]] = {}
    versions = sorted(Path(run_dir).glob("csv/version_*/metrics.csv"), key=lambda p: int(p.parent.name.split("_")[-1]))
    for path in versions:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if not row.get("epoch"):
                    continue
                values = {k: float(v) for k, v in row.items() if v and k.startswith(_CURVE_PREFIXES)}
                if values:
                    epochs.setdefault(int(float(row["epoch"])), {}).update(values)
    return [{"epoch": e, **epochs[e]} for e in sorted(epochs)]


def training_wall_s(run_dir: Path) -> Optional[float]:
    """Seconds of training, from the run's train.log: per attempt (a line naming the network starts
    one), its last time stamp minus its first, summed (None without a log). Includes the final test.

    A process logs its setup (Lightning's device lines) just before the network line: stamped lines
    up to ``_SETUP_S`` before an attempt's start line are that attempt's, so the idle time between a
    stopped attempt and its resumption is never counted."""
    log = Path(run_dir) / "train.log"
    if not log.is_file():
        return None
    stamps: List[float] = []  # every stamped line's time, in order
    begins: List[float] = []  # where each attempt after the first begins: its start line less _SETUP_S
    for line in log.read_text(errors="replace").splitlines():
        stamp = _LOG_TIME.match(line)
        if not stamp:
            continue
        t = datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S").timestamp() + int(stamp.group(2)) / 1000
        if _ATTEMPT_START.search(line) and stamps and stamps[0] < t - _SETUP_S:  # not the first attempt
            begins.append(t - _SETUP_S)
        stamps.append(t)
    spans: List[List[float]] = [[] for _ in range(len(begins) + 1)]  # the stamps of each attempt
    for t in stamps:
        spans[bisect.bisect_right(begins, t)].append(t)
    total = sum(max(a) - min(a) for a in spans if a)
    return round(total, 1)


def entry_stem(name: str, profile: str, sha256: str) -> str:
    return f"{name}-{profile}-{sha256[:12]}"


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def relative(path: Path, root: Sequence[Path] = (REPO,)) -> str:
    """``path`` relative to the repository when inside it (records name files portably), else absolute."""
    for r in root:
        try:
            return str(Path(path).resolve().relative_to(r))
        except ValueError:
            continue
    return str(Path(path).resolve())
