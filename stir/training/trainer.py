"""Build the Lightning Trainer and its loggers (CSV always, W&B offline by default) for a run folder."""
from __future__ import annotations

import hashlib
import logging
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import lightning as L
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger, Logger, WandbLogger

from stir.config.schema import LoggerConfig, TrainerConfig


def build_loggers(cfg: LoggerConfig, run_dir: Path, run_name: str, config: Optional[Dict[str, Any]] = None,
                  group: Optional[str] = None, tags: Sequence[str] = ()) -> List[Logger]:
    """CSV (the ground truth, one version folder per attempt) and W&B unless disabled.

    The W&B run id is derived from the run folder, so a resumed attempt continues the same run
    once synced (``wandb sync <run_dir>/wandb/offline-run-*``). ``config`` becomes the run config,
    ``group`` groups the seeds of one recipe, ``job_type`` is "train".
    """
    loggers: List[Logger] = []
    if cfg.csv:
        loggers.append(CSVLogger(save_dir=str(run_dir), name="csv"))
    if cfg.wandb.mode != "disabled":
        run_id = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:16]
        wandb_logger = WandbLogger(
            name=run_name, save_dir=str(run_dir), project=cfg.wandb.project, entity=cfg.wandb.entity,
            offline=cfg.wandb.mode == "offline", id=run_id, resume="allow",
            config=dict(config or {}), group=group, job_type="train", tags=list(tags),
            settings=_quiet_wandb_settings(),
        )
        # Lightning always passes anonymous=None, for which wandb 0.31 prints a deprecation warning.
        getattr(wandb_logger, "_wandb_init", {}).pop("anonymous", None)
        loggers.append(wandb_logger)
    return loggers


def _quiet_wandb_settings():
    """No banners, no captured console output in the training log (CSV and train.log carry it)."""
    import wandb

    return wandb.Settings(silent=True, console="off")


# Console lines a user of train.py cannot act on (the run folder is ours to fill; the rest is
# Lightning advertising or describing hardware it does not use). Everything else stays.
_QUIET_INFO = ("Tip:", "TPU available", "HPU available", "to estimate number of stepping batches")
_QUIET_WARNINGS = (r"Checkpoint directory .* exists and is not empty", r".*isinstance\(treespec, LeafSpec\)",
                   r"The '\w+_dataloader' does not have many workers", r"The number of training batches")


class _DropMessages(logging.Filter):
    def __init__(self, fragments):
        super().__init__()
        self.fragments = fragments

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(f in message for f in self.fragments)


def quiet_lightning() -> None:
    """Silence Lightning's console noise that says nothing about this run (idempotent)."""
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    if not any(isinstance(f, _DropMessages) for f in rank_zero.filters):
        rank_zero.addFilter(_DropMessages(_QUIET_INFO))
    for pattern in _QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)


def build_trainer(cfg: TrainerConfig, loggers: List[Logger], run_dir: Path,
                  callbacks: Sequence[L.Callback] = ()) -> L.Trainer:
    """A Trainer that checkpoints every epoch to ``run_dir/last.ckpt`` (written atomically by Lightning).

    ``inference_mode=False``: robust validation and testing run attacks, which need gradients.
    ``callbacks`` run before the checkpoint callback (Lightning keeps ModelCheckpoint last).
    """
    # monitor=None + save_top_k=1 keeps exactly one checkpoint, the latest, under a fixed name.
    # (save_last with save_top_k=0 writes last.ckpt only when training ends: nothing to resume from.)
    checkpoint = ModelCheckpoint(
        dirpath=str(run_dir), filename="last", monitor=None, save_top_k=1, every_n_epochs=1,
        enable_version_counter=False,
    )
    quiet_lightning()
    callbacks = [*callbacks, checkpoint]
    if loggers:
        callbacks.append(LearningRateMonitor(logging_interval="epoch"))
    return L.Trainer(
        max_epochs=cfg.max_epochs,
        accelerator=cfg.accelerator,
        devices=cfg.devices,
        num_nodes=cfg.num_nodes,
        strategy=cfg.strategy,
        precision=cfg.precision,
        sync_batchnorm=cfg.sync_batchnorm,
        deterministic=cfg.deterministic,
        limit_train_batches=cfg.limit_train_batches,
        log_every_n_steps=cfg.log_every_n_steps,
        enable_progress_bar=cfg.enable_progress_bar,
        logger=loggers or False,
        callbacks=callbacks,
        default_root_dir=str(run_dir),
        inference_mode=False,
        num_sanity_val_steps=0,
        enable_model_summary=False,  # the pipeline logs the parameter count in one line
    )
