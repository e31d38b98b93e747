"""Run folders: one deterministic folder per training recipe, holding everything about the run.

    runs/<data>/<arch>[-w<width>]/<loss>[-b<beta>][-eps<eps>][-it<steps>][-n<train_size>][-from<id>]/seed<seed>/
        config.yaml     resolved config (the recipe), written before training starts
        last.ckpt       Lightning checkpoint of the last finished epoch (resume point)
        weights.pt      the network's weights and what it takes to rebuild it (after training)
        metrics.json    clean / robust test accuracy + provenance; its presence marks the run finished
        csv/version_k/  CSV log of attempt k (never overwritten by a resumed attempt)
        wandb/          the offline W&B run(s)

Re-running the same command resumes from ``last.ckpt`` or skips a finished run; a different recipe
in an existing folder is refused with the keys that differ.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any, Dict, Optional

import torch
from omegaconf import OmegaConf
from torch import nn

from stir import atomic
from stir.config.schema import TrainConfig
from stir.provenance import file_sha256

log = logging.getLogger(__name__)

# Keys that do not change what is trained: where it runs, how it logs, where data is read from.
_RUNTIME_KEYS = {
    "runs_dir", "run_dir", "retrain", "logger", "data.root", "data.source", "data.download", "data.eval_batch_size",
    "trainer.accelerator", "trainer.devices", "trainer.num_nodes", "trainer.strategy", "trainer.enable_progress_bar",
    "trainer.log_every_n_steps", "trainer.robust_val_every_n_epochs", "trainer.robust_val_size",
    "trainer.channels_last",
}
DEFAULT = TrainConfig()


def _num(x: float) -> str:
    return f"{x:g}"


def recipe_dir(cfg: TrainConfig) -> Path:
    """The deterministic run folder of a recipe; only settings that differ from the defaults appear."""
    if cfg.run_dir:
        return Path(cfg.run_dir)
    arch = cfg.model.arch + (f"-w{cfg.model.width}" if cfg.model.width != DEFAULT.model.width else "")
    loss = cfg.loss.name
    if cfg.loss.name in ("trades", "mart") and cfg.loss.beta != DEFAULT.loss.beta:
        loss += f"-b{_num(cfg.loss.beta)}"
    if cfg.loss.name != "vanilla":
        if cfg.attack.eps != DEFAULT.attack.eps:
            loss += f"-eps{_num(cfg.attack.eps)}"
        if cfg.attack.steps != DEFAULT.attack.steps:
            loss += f"-it{cfg.attack.steps}"
    if cfg.data.train_size is not None:
        loss += f"-n{cfg.data.train_size}"
    if cfg.init_from:
        loss += f"-from{weights_identity(cfg.init_from)[:8]}"
    return Path(cfg.runs_dir) / cfg.data.name / arch / loss / f"seed{cfg.seed}"


def _flatten(d: Dict[str, Any], prefix: str = "") -> Dict[str, Any]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _recipe(cfg_dict: Dict[str, Any]) -> Dict[str, Any]:
    flat = _flatten(cfg_dict)
    return {k: v for k, v in flat.items() if not any(k == r or k.startswith(r + ".") for r in _RUNTIME_KEYS)}


class RunFolder:
    """The files of one training run (see the module docstring)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    config = property(lambda self: self.path / "config.yaml")
    last_ckpt = property(lambda self: self.path / "last.ckpt")
    weights = property(lambda self: self.path / "weights.pt")
    metrics = property(lambda self: self.path / "metrics.json")

    @property
    def finished(self) -> bool:
        return self.metrics.is_file() and self.weights.is_file()

    def archive(self) -> Optional[Path]:
        """Move an existing folder aside (retrain=true): nothing written before is lost."""
        if not self.path.exists():
            return None
        target = self.path.with_name(f"{self.path.name}.replaced-{time.strftime('%Y%m%d-%H%M%S')}")
        self.path.rename(target)
        log.info("moved the previous run to %s", target)
        return target

    def prepare(self, cfg: TrainConfig) -> None:
        """Write the resolved config, or check that an existing folder holds the same recipe."""
        current = dataclasses.asdict(cfg)
        if self.config.is_file():
            stored = OmegaConf.to_container(OmegaConf.load(self.config))
            old, new = _recipe(stored), _recipe(current)
            diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            if diff:
                changes = ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in diff)
                raise ValueError(
                    f"run folder {self.path} holds a different recipe ({changes}); pass retrain=true to replace it "
                    f"(the old folder is kept beside it) or run_dir=PATH to train elsewhere"
                )
            return
        self.path.mkdir(parents=True, exist_ok=True)
        atomic.write_text(self.config, OmegaConf.to_yaml(OmegaConf.create(current)))

    def resume_point(self) -> Optional[str]:
        if self.last_ckpt.is_file():
            log.info("resuming from %s", self.last_ckpt)
            return str(self.last_ckpt)
        return None

    def finish(self, network: nn.Module, cfg: TrainConfig, metrics: Dict[str, Any], record: Dict[str, Any]) -> None:
        """Write the weights, then metrics.json (last: its presence marks the run finished)."""
        atomic.torch_save(
            {"state_dict": network.state_dict(), "model": dataclasses.asdict(cfg.model), "data": cfg.data.name,
             "num_classes": cfg.data.num_classes},
            self.weights,
        )
        atomic.write_json(self.metrics, {**metrics, **record, "weights_sha256": file_sha256(self.weights)})


def weights_identity(path: str) -> str:
    """Content hash of the weights a path names: a run folder (its weights.pt) or a file."""
    return file_sha256(resolve_weights_file(path))


def resolve_weights_file(path: str) -> Path:
    p = Path(path)
    if p.is_dir():
        for name in ("weights.pt", "last.ckpt"):
            if (p / name).is_file():
                return p / name
        raise FileNotFoundError(f"{p} is a folder without weights.pt or last.ckpt: is it a finished training run?")
    if not p.is_file():
        raise FileNotFoundError(f"no checkpoint at {p}: give a run folder, its weights.pt or a Lightning .ckpt")
    return p


def load_state_dict(path: str) -> Dict[str, torch.Tensor]:
    """The network's state dict from a run folder, a weights.pt or a Lightning checkpoint."""
    file = resolve_weights_file(path)
    try:
        blob = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as err:  # a corrupt or foreign file: say which and why
        raise ValueError(f"cannot load weights from {file}: {err}") from err
    state = blob.get("state_dict", blob)
    if any(k.startswith("network.") for k in state):  # a LightningModule checkpoint of RobustClassifier
        state = {k[len("network."):]: v for k, v in state.items() if k.startswith("network.")}
    return state
