"""Build the Lightning Trainer and its loggers (CSV always, W&B offline by default) for a run folder."""
from __future__ import annotations

import csv
import hashlib
import io
import logging
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import lightning as L
from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.fabric.plugins import TorchCheckpointIO
from lightning.pytorch.callbacks import Callback, LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger, Logger, WandbLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

from stir import atomic
from stir.config.schema import LoggerConfig, TrainerConfig
from stir.progress import on_terminal

log = logging.getLogger(__name__)


class AtomicCheckpointIO(TorchCheckpointIO):
    """Checkpoints written to a temp file in the checkpoint's own folder, fsynced, then renamed over the old one.

    Lightning's own save stages the file in the system temp folder and moves it into place, which is
    a copy whenever the run folder is on another filesystem (the usual case on clusters): a full disk
    or a kill during that copy truncates ``last.ckpt``, the only resume point. Here any failure leaves
    the previous checkpoint as it was (``stir.atomic.write_bytes``) and names the file.
    """

    def save_checkpoint(self, checkpoint: Dict[str, Any], path, storage_options: Optional[Any] = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options, got {storage_options!r}")
        atomic.torch_save(checkpoint, path)


class _AtomicExperimentWriter(ExperimentWriter):
    """Lightning's CSV writer, each save rewriting ``metrics.csv`` whole through ``stir.atomic``.

    Lightning appends to the file in place and rewrites it in place when a new column appears: a
    kill or a full disk then truncates the log of every epoch so far. Here the file is always the
    previous complete one or the new complete one (``hparams.yaml`` too).
    """

    def save(self) -> None:
        if not self.metrics:
            return
        self._record_new_keys()
        path = Path(self.metrics_file_path)
        rows = list(csv.DictReader(io.StringIO(path.read_bytes().decode("utf-8"), newline=""))) if path.is_file() else []
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, fieldnames=self.metrics_keys)
        writer.writeheader()
        writer.writerows(rows + self.metrics)
        atomic.write_text(path, text.getvalue())
        self.metrics = []

    def log_hparams(self, params: Dict[str, Any]) -> None:
        from lightning.pytorch.core.saving import save_hparams_to_yaml

        self.hparams.update(params)
        staged = Path(self.log_dir) / f".{self.NAME_HPARAMS_FILE}.staged"
        save_hparams_to_yaml(str(staged), self.hparams)  # Lightning's YAML, then renamed into place
        atomic.write_bytes(Path(self.log_dir) / self.NAME_HPARAMS_FILE, staged.read_bytes())
        staged.unlink()


class AtomicCSVLogger(CSVLogger):
    """``CSVLogger`` whose files are written atomically (``_AtomicExperimentWriter``)."""

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _AtomicExperimentWriter(log_dir=self.log_dir)
        return self._experiment


def build_loggers(cfg: LoggerConfig, run_dir: Path, run_name: str, config: Optional[Dict[str, Any]] = None,
                  group: Optional[str] = None, tags: Sequence[str] = ()) -> List[Logger]:
    """CSV (the ground truth, one version folder per attempt) and W&B unless disabled.

    The W&B run id is derived from the run folder, so a resumed attempt continues the same run
    once synced (``wandb sync <run_dir>/wandb/offline-run-*``). ``config`` becomes the run config,
    ``group`` groups the seeds of one recipe, ``job_type`` is "train".
    """
    loggers: List[Logger] = []
    if cfg.csv:
        loggers.append(AtomicCSVLogger(save_dir=str(run_dir), name="csv"))
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


class EpochLines(Callback):
    """One log line per finished epoch (where Lightning's bar would only fill a log file with redraws)."""

    def __init__(self) -> None:
        self.started = 0.0

    def on_train_epoch_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self.started = time.monotonic()

    def on_train_epoch_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        keys = ("train/epoch_loss", "train/epoch_acc", "train/epoch_adv_acc", "val/acc", "val/robust_acc")
        shown = ", ".join(f"{k} {float(trainer.callback_metrics[k]):.4g}" for k in keys if k in trainer.callback_metrics)
        log.info("epoch %d of %d: %s (%.0f s)", trainer.current_epoch + 1, trainer.max_epochs, shown or "-",
                 time.monotonic() - self.started)


def process_count(cfg: TrainerConfig) -> int:
    """How many processes a Trainer of ``cfg`` trains with (devices x nodes), as Lightning resolves it.

    Read from a Trainer built with the same accelerator, devices, num_nodes and strategy (and the
    launcher's environment: torchrun, SLURM), so "auto" means here what it will mean for the real
    one (every GPU of the machine with DDP). Building one starts no process.
    """
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    level = rank_zero.level
    rank_zero.setLevel(logging.WARNING)  # its "GPU available ..." lines come again with the real Trainer
    try:
        probe = L.Trainer(accelerator=cfg.accelerator, devices=cfg.devices, num_nodes=cfg.num_nodes,
                          strategy=cfg.strategy, logger=False, enable_checkpointing=False,
                          enable_progress_bar=False, enable_model_summary=False)
    finally:
        rank_zero.setLevel(level)
    return int(probe.world_size)


def emulated_bf16(precision: str, accelerator: str, native: Optional[bool] = None) -> Optional[str]:
    """The warning for bf16 autocast on a CPU without native bf16 (no AVX512-BF16 / AMX: oneDNN falls
    back to emulation), else None. There it is slower than float32, not faster: 7x for a conv block on
    an AVX2-only AMD EPYC (2 GHz), where a fast-recipe TRADES step took about 70 s instead of about
    1.5 s on a host with native bf16. The recipe is not changed: the precision is part of it."""
    import torch

    on_cpu = accelerator == "cpu" or (accelerator == "auto" and not torch.cuda.is_available())
    if not (str(precision).startswith("bf16") and on_cpu):
        return None
    if native is None:
        native = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    if native:
        return None
    return (f"trainer.precision={precision} on a CPU without native bf16 ({torch.backends.cpu.get_cpu_capability()}): "
            "bf16 is emulated here and a step is several times slower than in float32; the recipe keeps its "
            "precision (it is part of the model's identity): train on a host with AVX512-BF16 / AMX or a GPU, or "
            "train another recipe with trainer.precision=32-true variant=fp32")


def build_trainer(cfg: TrainerConfig, loggers: List[Logger], run_dir: Path,
                  callbacks: Sequence[L.Callback] = ()) -> L.Trainer:
    """A Trainer that checkpoints every epoch to ``run_dir/last.ckpt``, written atomically in ``run_dir``
    (``AtomicCheckpointIO``; Lightning's SLURM requeue checkpoints too).

    ``inference_mode=False``: robust validation and testing run attacks, which need gradients.
    Progress: Lightning's bar on a terminal (``trainer.enable_progress_bar``); elsewhere a log line per
    epoch instead of the bar's redraws. ``callbacks`` run before the checkpoint callback (Lightning
    keeps ModelCheckpoint last).
    """
    # monitor=None + save_top_k=1 keeps exactly one checkpoint, the latest, under a fixed name.
    # (save_last with save_top_k=0 writes last.ckpt only when training ends: nothing to resume from.)
    checkpoint = ModelCheckpoint(
        dirpath=str(run_dir), filename="last", monitor=None, save_top_k=1, every_n_epochs=1,
        enable_version_counter=False,
    )
    quiet_lightning()
    slow = emulated_bf16(str(cfg.precision), cfg.accelerator)
    if slow:
        log.warning(slow)
    bar = cfg.enable_progress_bar and on_terminal()
    callbacks = [*callbacks, checkpoint] + ([] if bar or not cfg.enable_progress_bar else [EpochLines()])
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
        enable_progress_bar=bar,
        logger=loggers or False,
        callbacks=callbacks,
        plugins=[AtomicCheckpointIO()],
        default_root_dir=str(run_dir),
        inference_mode=False,
        num_sanity_val_steps=0,
        enable_model_summary=False,  # the pipeline logs the parameter count in one line
    )
