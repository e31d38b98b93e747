"""Train one recipe into its run folder: resume a killed run, skip a finished one."""
from __future__ import annotations

import dataclasses
import logging
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Dict, Iterator, Sequence

import lightning as L
from lightning.pytorch.loggers import WandbLogger
from torch import nn

from stir import atomic
from stir.config import ConfigError
from stir.config.schema import TrainConfig
from stir.data import Augment, StirDataModule
from stir.models import build, channel_stats
from stir.models.finite import first_nonfinite_tensor
from stir.provenance import library_versions
from stir.training.runs import (
    CORRUPT, FINISHED, ProcessCountError, RecipeMismatchError, RunFolder, _is_global_zero, checkpoint_model, point_epoch, load_state_dict, model_artifact_name, recipe_dir, recipe_group, recipe_of,
    weights_identity,
)
from stir.training.guard import CatastrophicOverfittingGuard
from stir.training.losses import loss_spec
from stir.training.system import RobustClassifier
from stir.training.trainer import build_loggers, build_trainer, process_count

log = logging.getLogger(__name__)


def train(cfg: TrainConfig, callbacks: Sequence[L.Callback] = ()) -> Path:
    """Train ``cfg``'s recipe (or finish it) and return its run folder.

    A folder holding another recipe is refused (RecipeMismatchError naming the keys) before
    anything is skipped; a finished one (``RunFolder.verify``) is reused without writing anything,
    so a read-only runs_dir serves its finished runs. Otherwise the data source is opened and
    decoded (or its cache checked) before any folder, recipe or log is written, so a bad source
    leaves nothing behind; a corrupt folder is set aside and resumed; a second process on the
    same folder waits for the first, then reuses it. A folder trained by another number of processes
    (``process_count``: data.batch_size is the global batch, the count is recorded beside the recipe)
    is refused with the command that continues it as it was, never skipped or resumed.
    ``callbacks``: extra Lightning callbacks for this process (a benchmark's curve recorder); they
    must not change what is trained.
    """
    run = RunFolder(recipe_dir(cfg))
    processes = process_count(cfg.trainer)
    if cfg.data.batch_size % processes:
        raise ConfigError(f"data.batch_size={cfg.data.batch_size} is the global batch and must be a multiple of the "
                          f"{processes} training processes (devices x num_nodes); give a multiple of {processes}")
    if cfg.data.device_resident and processes > 1:  # DeviceBatches has no per-rank share: every rank would see every batch
        raise ConfigError(f"data.device_resident=true trains on one device only; this command trains with {processes} "
                          "processes: drop it (the DataLoader path shards the batches)")
    L.seed_everything(cfg.seed, workers=True)
    network = build(cfg.model, cfg.data.num_classes, *channel_stats(cfg.data.name))
    if cfg.init_from:  # a model update: start from earlier weights, train on this recipe's data
        load_init(network, cfg)  # before any folder or lock is made: a wrong checkpoint leaves nothing behind
    if not cfg.retrain and run.finished:
        run.check(cfg)
        run.check_processes(cfg, processes)
        _restore_recipe(cfg, run, processes)
        log.info("%s is finished; skipping (retrain=true trains it again)", run.path)
        return run.path
    data = StirDataModule(cfg.data, shuffle_seed=cfg.seed)
    data.prepare_data()  # the source read and decoded (or its cache loaded) before anything is written
    with run.lock():
        if not cfg.retrain:
            _check_folder(cfg, run, processes)
            state, why = run.verify()
            if state == FINISHED:  # another process finished it while this one waited
                log.info("%s is finished; skipping (retrain=true trains it again)", run.path)
                return run.path
            if state == CORRUPT:
                run.set_aside_corrupt(why)
        return _train_locked(cfg, run, network, data, callbacks, processes)


def _restore_recipe(cfg: TrainConfig, run: RunFolder, processes: int) -> None:
    """Write recipe.json back when it was unreadable (moved aside; the check read config.yaml), where
    the folder is writable: the recipe and the process count just checked equal to ``cfg``'s."""
    if run.recipe.is_file() or not run.config.is_file():
        return
    try:
        atomic.write_json(run.recipe, {"recipe": recipe_of(cfg), "processes": processes})
    except OSError as err:
        log.info("recipe.json of %s not restored (%s); config.yaml serves instead", run.path, err)


def _check_folder(cfg: TrainConfig, run: RunFolder, processes: int) -> None:
    """Refuse a folder of another recipe or process count, unless nothing was trained in it yet (then
    it is moved aside)."""
    try:
        run.check(cfg)
        if run.path.exists() and run.trained_processes() != processes:
            run.check_processes(cfg, processes)  # refuses a folder that holds training
            raise ProcessCountError(f"made for {run.trained_processes()} process(es), nothing trained yet")
    except RecipeMismatchError:
        if run.holds_training():
            raise
        log.warning("%s was made for another recipe but holds no training (no checkpoint, no weights); moving it "
                    "aside", run.path)
        run.archive()


def _train_locked(cfg: TrainConfig, run: RunFolder, network: nn.Module, data: StirDataModule,
                  callbacks: Sequence[L.Callback], processes: int) -> Path:
    if cfg.retrain:
        run.archive()
    run.prepare(cfg, processes)
    # One writer of train.log: rank 0 (under DDP the other ranks' records would repeat its lines).
    with _log_to(run.path / "train.log") if _is_global_zero() else nullcontext():
        return _fit(cfg, run, network, data, callbacks, processes)


@contextmanager
def _log_to(path: Path) -> Iterator[None]:
    """Append this process's log records to ``path`` (the run's own log, beside its checkpoints)."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()


def _fit(cfg: TrainConfig, run: RunFolder, network: nn.Module, data: StirDataModule,
         callbacks: Sequence[L.Callback] = (), processes: int = 1) -> Path:
    system = build_system(cfg, network)
    callbacks = list(callbacks)
    guard = None
    if cfg.robust_check.images > 0 and loss_spec(cfg.loss.name).adversarial:
        guard = CatastrophicOverfittingGuard(cfg.robust_check, cfg.eval_attack)
        callbacks.insert(0, guard)
    name = _run_name(run.path, cfg.runs_dir)
    recipe = recipe_of(cfg)
    loggers = build_loggers(cfg.logger, run.path, run_name=name, config=wandb_config(cfg, recipe, run.path),
                            group=f"{name.rsplit('/seed', 1)[0]}:{recipe_group(recipe)[:8]}",
                            tags=[cfg.data.name, cfg.model.arch, cfg.loss.name])
    trainer = build_trainer(cfg.trainer, loggers, run.path, callbacks)
    log.info("%s: %s width %d, %.2fM parameters, %s", run.path, cfg.model.arch, cfg.model.width,
             sum(p.numel() for p in network.parameters()) / 1e6, cfg.loss.name)
    resume = run.resume_point()
    resumed_from = point_epoch(resume) + 1 if resume else None
    trainer.fit(system, datamodule=data, ckpt_path=resume)
    (test_metrics,) = trainer.test(system, datamodule=data)

    if trainer.is_global_zero:
        record = {
            "seed": cfg.seed,
            "epochs": trainer.current_epoch,
            # The epoch a resumed attempt started at (None: trained in one go). Shuffle order and the
            # random streams are restored from the checkpoint, so it matches an uninterrupted run.
            "resumed_from_epoch": resumed_from,
            "train_indices_count": len(data.train_indices),
            "processes": processes,  # data.batch_size (the global batch) / processes per process and step
            "init_from": cfg.init_from,
            "init_from_sha256": weights_identity(cfg.init_from) if cfg.init_from else None,
            **({"robust_check": guard.summary()} if guard is not None else {}),
            "config": dataclasses.asdict(cfg),
            "versions": library_versions(),
        }
        run.finish(system.eval_network, cfg, {k: float(v) for k, v in test_metrics.items()}, record)
        log.info("finished %s: %s", run.path, {k: round(float(v), 4) for k, v in test_metrics.items()})
        if cfg.logger.wandb.log_model:
            _log_model_artifact(loggers, run, recipe, {k: float(v) for k, v in test_metrics.items()})
    for logger in loggers:
        logger.finalize("success")
    _finish_wandb()
    return run.path


def build_system(cfg: TrainConfig, network: nn.Module) -> RobustClassifier:
    """The LightningModule of ``cfg``'s recipe around ``network``, each part from its own config."""
    return RobustClassifier(
        network, cfg.loss, cfg.attack, cfg.eval_attack, cfg.optim,
        # The device-resident loader hands over batches it has already augmented.
        augment=None if cfg.data.device_resident else Augment.of(cfg.data),
        robust_val_every=cfg.trainer.robust_val_every_n_epochs, robust_val_size=cfg.trainer.robust_val_size,
        robust_test_size=cfg.trainer.robust_test_size, channels_last=cfg.trainer.channels_last,
        cpu_channels_last=cfg.trainer.cpu_channels_last, ema=cfg.ema, tta=cfg.trainer.test_time_augmentation,
        compile=cfg.trainer.compile,
    )


def wandb_config(cfg: TrainConfig, recipe: Dict[str, Any], run_dir: Path) -> Dict[str, Any]:
    """The W&B run config: the recipe's main fields at top level (for filters and grouping), then all of it."""
    uses = loss_spec(cfg.loss.name)  # the settings the objective does not read are None
    return {
        "loss": cfg.loss.name, "arch": cfg.model.arch, "width": cfg.model.width, "data": cfg.data.name,
        "train_size": cfg.data.train_size, "seed": cfg.seed,
        "beta": cfg.loss.beta if uses.beta else None,
        "eps": cfg.attack.eps if "eps" in uses.attack else None,
        "attack_steps": cfg.attack.steps if "steps" in uses.attack else None,
        "lr": cfg.optim.lr, "epochs": cfg.trainer.max_epochs, "init_from": cfg.init_from,
        "recipe_group": recipe_group(recipe), "artifact": model_artifact_name(recipe),
        "run_dir": str(run_dir), "recipe": recipe,
    }


def _log_model_artifact(loggers, run: RunFolder, recipe: Dict[str, Any], metrics: Dict[str, float]) -> None:
    """weights.pt as a W&B model artifact (offline: staged, uploaded by ``wandb sync``)."""
    import wandb

    for logger in loggers:
        if isinstance(logger, WandbLogger):
            artifact = wandb.Artifact(model_artifact_name(recipe), type="model",
                                      metadata={"recipe": recipe, **metrics, "run_dir": str(run.path)})
            artifact.add_file(str(run.weights), name="weights.pt")
            logger.experiment.log_artifact(artifact)


def load_init(network: nn.Module, cfg: TrainConfig) -> None:
    """Load ``cfg.init_from`` into ``network``; a checkpoint of another architecture is named as such."""
    state = load_state_dict(cfg.init_from)
    try:
        network.load_state_dict(state)
    except RuntimeError as err:
        made = checkpoint_model(cfg.init_from)
        have = f"{made['arch']}/{made['width']}" if made else "another architecture"
        raise ValueError(
            f"init_from={cfg.init_from}: checkpoint is {have}, recipe is {cfg.model.arch}/{cfg.model.width}; "
            f"give model=... model.width=... of the checkpoint, or another init_from ({str(err).splitlines()[0]})"
        ) from None
    bad = first_nonfinite_tensor(network)
    if bad is not None:  # training from NaN weights gives NaN weights
        raise ValueError(f"init_from={cfg.init_from}: the weights are not finite ({bad}); warm-start from another run")


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
