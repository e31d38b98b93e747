"""This project's trained networks on disk: a run folder, its weights.pt or a Lightning checkpoint.

``network(path, train)`` builds the architecture (from the recipe when known, else from the
weights.pt metadata or the config.yaml beside a checkpoint) and loads the weights, in eval mode.
``data_of(path)`` is the data set the network was trained on, as far as its files tell.
``label_of(path)`` is the recipe part of its path (``vanilla-n5000/seed0``).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from omegaconf import OmegaConf
from torch import nn

from stir.config.schema import DataConfig, ModelConfig, TrainConfig
from stir.models import build, channel_stats
from stir.models.weights import load_state
from stir.training.runs import load_state_dict, read_run_config, read_weights_blob, resolve_weights_file

log = logging.getLogger(__name__)

WEIGHT_FILES = ("weights.pt", "last.ckpt")  # the files train.py writes into a run folder


def run_folder_of(path: Path) -> Path:
    """The run folder a path names: the folder itself, or the folder holding a checkpoint file."""
    return path if path.is_dir() else path.parent


def label_of(path: Path, parts: int = 2) -> str:
    """The recipe part of a run folder's path: its last ``parts`` folder names (``vanilla-n5000/seed0``);
    a checkpoint file adds its stem unless it is one of the files train.py writes."""
    path = Path(path)
    folder = run_folder_of(path)
    label = "/".join(folder.parts[-parts:]) if folder.parts else str(folder)
    if path.is_file() and path.name not in WEIGHT_FILES:
        label += f"/{path.stem}"
    return label


def network(path: Path, train: Optional[TrainConfig] = None) -> nn.Module:
    """The network of a run folder or checkpoint, its weights loaded, in eval mode on the CPU.

    Weights that do not fit the architecture raise ``stir.models.weights.WeightsMismatch``: one line
    naming the file, the architecture and the first mismatching key.
    """
    if train is not None:
        model = train.model
        net = build(train.model, train.data.num_classes, *channel_stats(train.data.name))
    else:
        model, net = _build_from_files(Path(path))
    load_state(net, load_state_dict(str(path)), source=str(resolve_weights_file(str(path))),
               arch=f"{model.arch} (width {model.width})")
    return net.eval()


def _build_from_files(path: Path) -> Tuple[ModelConfig, nn.Module]:
    """A bare weights.pt carries its architecture; a bare Lightning .ckpt needs its run's config.yaml."""
    file = resolve_weights_file(str(path))
    blob = read_weights_blob(file)
    if "model" in blob and "num_classes" in blob:
        model = ModelConfig(**blob["model"])
        return model, build(model, blob["num_classes"], *channel_stats(blob.get("data", "cifar10")))
    cfg = read_run_config(file.parent / "config.yaml")
    if cfg is not None:
        model = ModelConfig(**cfg["model"])
        return model, build(model, cfg["data"]["num_classes"], *channel_stats(cfg["data"]["name"]))
    raise ValueError(f"{file}: cannot tell its architecture (no weights.pt metadata, no config.yaml beside it)")


def data_of(path: Path, local_source: Optional[str], data_overrides: Dict[str, Any]) -> DataConfig:
    """The data set a run folder / checkpoint was trained on: its config.yaml; else, for a bare
    weights file, the data set and class count it records, read from ``local_source`` (the
    evaluation's local copy, ``data.source``) with ``data_overrides`` (``zoo.overrides``' data.*
    keys); else the default data config (logged)."""
    config = read_run_config(run_folder_of(Path(path)) / "config.yaml")
    if config is not None:
        return DataConfig(**config["data"])
    if local_source:
        log.info("%s has no config.yaml: taking images from data.source=%s", path, local_source)
        base = OmegaConf.structured(DataConfig(source=local_source, **_recorded_data(path)))
        return OmegaConf.to_object(OmegaConf.merge(base, OmegaConf.create(data_overrides)))
    log.warning("%s has no config.yaml: taking images from the default data config "
                "(data.source=PATH for a local data set)", path)
    return DataConfig(**_recorded_data(path))


def _recorded_data(path: Path) -> Dict[str, Any]:
    """The data set name and class count a weights.pt records (empty for other checkpoints)."""
    blob = read_weights_blob(resolve_weights_file(str(path)))
    if isinstance(blob, dict) and "num_classes" in blob and "data" in blob:
        return {"name": blob["data"], "num_classes": blob["num_classes"]}
    return {}
