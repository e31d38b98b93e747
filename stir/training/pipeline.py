"""Train one recipe into its run folder: resume a killed run, skip a finished one."""
from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import lightning as L

from stir.config.schema import TrainConfig
from stir.data import StirDataModule
from stir.models import build, channel_stats
from stir.provenance import library_versions
from stir.training.runs import RunFolder, load_state_dict, recipe_dir, weights_identity
from stir.training.system import RobustClassifier
from stir.training.trainer import build_loggers, build_trainer

log = logging.getLogger(__name__)


def train(cfg: TrainConfig) -> Path:
    """Train ``cfg``'s recipe (or finish it) and return its run folder."""
    run = RunFolder(recipe_dir(cfg))
    if run.finished and not cfg.retrain:
        log.info("%s is finished; skipping (retrain=true trains it again)", run.path)
        return run.path
    if cfg.retrain:
        run.archive()
    run.prepare(cfg)

    L.seed_everything(cfg.seed, workers=True)
    data = StirDataModule(cfg.data, shuffle_seed=cfg.seed)
    network = build(cfg.model, cfg.data.num_classes, *channel_stats(cfg.data.name))
    if cfg.init_from:  # a model update: start from earlier weights, train on this recipe's data
        network.load_state_dict(load_state_dict(cfg.init_from))
    system = RobustClassifier(
        network, cfg.loss, cfg.attack, cfg.eval_attack, cfg.optim, augment=cfg.data.augment,
        robust_val_every=cfg.trainer.robust_val_every_n_epochs, robust_val_size=cfg.trainer.robust_val_size,
        robust_test_size=cfg.trainer.robust_test_size, channels_last=cfg.trainer.channels_last,
    )
    loggers = build_loggers(cfg.logger, run.path, run_name=_run_name(run.path, cfg.runs_dir))
    trainer = build_trainer(cfg.trainer, loggers, run.path)
    trainer.fit(system, datamodule=data, ckpt_path=run.resume_point())
    (test_metrics,) = trainer.test(system, datamodule=data)

    if trainer.is_global_zero:
        record = {
            "seed": cfg.seed,
            "epochs": trainer.current_epoch,
            "train_indices_count": len(data.train_indices),
            "init_from": cfg.init_from,
            "init_from_sha256": weights_identity(cfg.init_from) if cfg.init_from else None,
            "config": dataclasses.asdict(cfg),
            "versions": library_versions(),
        }
        run.finish(network, cfg, {k: float(v) for k, v in test_metrics.items()}, record)
        log.info("finished %s: %s", run.path, {k: round(float(v), 4) for k, v in test_metrics.items()})
    for logger in loggers:
        logger.finalize("success")
    _finish_wandb()
    return run.path


def _run_name(path: Path, runs_dir: str) -> str:
    """``cifar10/resnet18/at/seed0`` for a folder under runs_dir, else the folder's own name."""
    try:
        return str(path.resolve().relative_to(Path(runs_dir).resolve()))
    except ValueError:
        return path.name


def _finish_wandb() -> None:
    """Close the W&B run so its offline files are complete before anything syncs them."""
    import wandb

    if wandb.run is not None:
        wandb.finish()
