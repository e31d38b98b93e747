"""Run folders: one deterministic folder per training recipe, holding everything about the run.

    runs/<data>/<arch>[-w<width>]/<loss>[-<recipe>][-<variant>][-b<beta>][-eps<eps>][-it<steps>][-n<train_size>][-from<id>]/seed<seed>/
        config.yaml     resolved config, written before training starts
        recipe.json     the recipe: every key that changes the trained weights (data.source by content)
        last.ckpt       Lightning checkpoint of the last finished epoch (resume point)
        weights.pt      the network's weights and what it takes to rebuild it (after training)
        metrics.json    clean / robust test accuracy + provenance, with the sha256 of weights.pt
        csv/version_k/  CSV log of attempt k (never overwritten by a resumed attempt)
        wandb/          the offline W&B run(s)

Only the settings that differ from the defaults name the folder, and of ``loss.beta`` and
``attack.eps`` / ``attack.steps`` only those the loss reads (its ``LossSpec``: ``beta``, ``attack``).

Every file is written atomically (``stir.atomic``: a temp file in this folder, renamed). A run is
finished only if it checks out (``RunFolder.verify``): metrics.json parses and weights.pt has the
sha256 it records. A folder whose metrics.json or weights.pt fails that check is corrupt: the
rerun moves the failing files aside (``<name>.corrupt``) and resumes. A ``last.ckpt`` that does not
load is moved aside the same way and the run resumes from the previous good checkpoint, or
restarts, saying which; an unreadable ``recipe.json`` is rebuilt from ``config.yaml``.

Re-running the same command resumes from ``last.ckpt`` or skips a finished run; a different recipe
in an existing folder (finished or not) is refused with the keys that differ, before anything is
skipped or trained (a folder in which nothing was trained yet is moved aside instead). One process at a time works on a folder: ``RunFolder.lock`` (a file lock
``<folder>.lock`` beside it) makes a second process wait, then find the run finished and reuse it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

import torch
from filelock import FileLock, Timeout
from omegaconf import OmegaConf
from torch import nn

from stir import atomic
from stir.config.schema import TrainConfig
from stir.provenance import file_sha256
from stir.training.losses import loss_spec
from stir.untrusted import UnsafeFileError, load_plain

log = logging.getLogger(__name__)

# Keys that do not change what is trained: where it runs, how it logs, where data is read from, and
# how it is computed where that changes results by floating-point rounding only (memory formats, the
# attack's folded batch norm).
# data.source is not among them: it enters the recipe as the identity of its content (source_identity).
# trainer.devices / num_nodes / strategy are, because data.batch_size is the global batch (each of W
# processes takes batch_size / W; StirDataModule): the recipe's optimisation (images per step, steps
# per epoch, the lr schedule) is the same on any number of processes. What the process count does
# change (per-process batch-norm statistics unless sync_batchnorm, the random draws of each rank) is
# recorded beside the recipe (recipe.json "processes", ``RunFolder.check_processes``): train.py
# refuses to skip or resume a folder under another count, while evaluate.py's zoo reads its weights.
_RUNTIME_KEYS = {
    "runs_dir", "run_dir", "retrain", "logger", "data.root", "data.download", "data.eval_batch_size",
    "trainer.accelerator", "trainer.devices", "trainer.num_nodes", "trainer.strategy", "trainer.enable_progress_bar",
    "trainer.log_every_n_steps", "trainer.robust_val_every_n_epochs", "trainer.robust_val_size",
    "trainer.channels_last", "trainer.cpu_channels_last", "trainer.compile", "attack.fold_batch_norm", "attack.channels_last", "eval_attack.fold_batch_norm",
    "eval_attack.channels_last",
}
DEFAULT = TrainConfig()
# Keys added after run folders already existed (the fast recipe's levers): they enter a recipe only
# when set to something else than their default, so the recipes of earlier runs, their folder checks,
# recipe groups and W&B artifact names stay what they were (every default is the earlier behaviour;
# tests/training/test_default_recipe_pin.py holds both to it).
_OMITTED_AT_DEFAULT = {
    "recipe_name", "variant", "data.crop_padding", "data.padding_mode", "data.flip", "data.device_resident",
    "loss.label_smoothing", "ema.decay", "ema.every_n_steps", "robust_check.images", "robust_check.steps",
    "robust_check.max_drop", "trainer.test_time_augmentation",
}


def _num(x: float) -> str:
    return f"{x:g}"


def recipe_dir(cfg: TrainConfig) -> Path:
    """The deterministic run folder of a recipe; only settings that differ from the defaults appear."""
    if cfg.run_dir:
        return Path(cfg.run_dir)
    arch = cfg.model.arch + (f"-w{cfg.model.width}" if cfg.model.width != DEFAULT.model.width else "")
    loss = cfg.loss.name + (f"-{cfg.recipe_name}" if cfg.recipe_name != DEFAULT.recipe_name else "")
    if cfg.variant:
        loss += f"-{cfg.variant}"
    uses = loss_spec(cfg.loss.name)  # only the settings the objective reads name its folder
    if uses.beta and cfg.loss.beta != DEFAULT.loss.beta:
        loss += f"-b{_num(cfg.loss.beta)}"
    if "eps" in uses.attack and cfg.attack.eps != DEFAULT.attack.eps:
        loss += f"-eps{_num(cfg.attack.eps)}"
    if "steps" in uses.attack and cfg.attack.steps != DEFAULT.attack.steps:
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
    return {k: v for k, v in flat.items() if not any(k == r or k.startswith(r + ".") for r in _RUNTIME_KEYS)
            and not (k in _OMITTED_AT_DEFAULT and v == _DEFAULT_FLAT[k])}


_DEFAULT_FLAT = _flatten(dataclasses.asdict(DEFAULT))


class RecipeMismatchError(ValueError):
    """A run folder holds another recipe than the one asked for."""


class ProcessCountError(RecipeMismatchError):
    """A run folder was trained by another number of processes than the command would train it with."""


FINISHED, UNFINISHED, CORRUPT = "finished", "unfinished", "corrupt"


def _hydra_value(value: Any) -> str:
    """A config value as a Hydra command-line override value (None -> null, lists as [a,b])."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_hydra_value(v) for v in value) + "]"
    if isinstance(value, str):
        plain = value and all(c.isalnum() or c in "_/.-+" for c in value) and not value[0].isdigit() \
            and value.lower() not in ("true", "false", "null", "none", "yes", "no", "on", "off")
        return value if plain else "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return repr(value)


def source_identity(source: str) -> Dict[str, Any]:
    """What a local data source is, independent of where it lies.

    A file (a tar of an image tree): its size and content sha256. A folder: the number of files,
    their total size and a sha256 of the sorted (relative path, size) listing (file contents are not
    read: 60k images would take too long on every check).
    """
    path = Path(source).expanduser()
    if path.is_file():
        from stir.provenance import file_sha256

        return {"kind": "file", "bytes": path.stat().st_size, "sha256": file_sha256(path)}
    if path.is_dir():
        listing = []
        for d, _, files in os.walk(path):
            for f in files:
                full = os.path.join(d, f)
                listing.append((os.path.relpath(full, path).replace(os.sep, "/"), os.stat(full).st_size))
        listing.sort()
        digest = hashlib.sha256(json.dumps(listing).encode()).hexdigest()
        return {"kind": "folder", "files": len(listing), "bytes": sum(s for _, s in listing), "listing_sha256": digest}
    raise FileNotFoundError(f"data.source={source!r}: no such file or folder")


def recipe_of(cfg: TrainConfig) -> Dict[str, Any]:
    """The recipe of a config: flat ``key -> value`` of everything that changes the trained weights."""
    recipe = _recipe(dataclasses.asdict(cfg))
    if cfg.data.source is not None:
        recipe["data.source"] = source_identity(cfg.data.source)
    return recipe


def recipe_group(recipe: Dict[str, Any]) -> str:
    """A short stable name of a recipe without its seed: the runs that differ only by seed share it."""
    rest = {k: v for k, v in recipe.items() if k != "seed"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True, default=str).encode()).hexdigest()[:12]


def model_artifact_name(recipe: Dict[str, Any]) -> str:
    """The W&B model artifact of a recipe: ``model-<recipe group>-seed<seed>`` (evaluate.py refers to it)."""
    return f"model-{recipe_group(recipe)}-seed{recipe.get('seed')}"


def recipe_differences(old: Dict[str, Any], new: Dict[str, Any]) -> str:
    """``key: old -> new, ...`` for the keys whose values differ (empty when none do)."""
    diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in diff)


def _is_global_zero() -> bool:
    """Rank 0 of a distributed launch (or no launch at all), read from the launcher's environment."""
    return all(os.environ.get(var, "0") == "0" for var in ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID"))


def read_run_config(path: Path) -> Optional[Dict[str, Any]]:
    """The one reader of a run's ``config.yaml`` (the resolved train config train.py wrote): a plain
    dict, or None when there is no such file. A file that is not a mapping raises ValueError."""
    path = Path(path)
    if not path.is_file():
        return None
    raw = OmegaConf.to_container(OmegaConf.load(path))
    if not isinstance(raw, dict):
        raise ValueError(f"{path} holds a {type(raw).__name__}, not a mapping")
    return raw


class RunFolder:
    """The files of one training run (see the module docstring)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    config = property(lambda self: self.path / "config.yaml")
    recipe = property(lambda self: self.path / "recipe.json")
    last_ckpt = property(lambda self: self.path / "last.ckpt")
    weights = property(lambda self: self.path / "weights.pt")
    metrics = property(lambda self: self.path / "metrics.json")

    @property
    def finished(self) -> bool:
        """metrics.json parses and weights.pt has the sha256 it records (``verify``)."""
        return self.verify()[0] == FINISHED

    def verify(self) -> Tuple[str, str]:
        """(state, why) of the folder's end products, reading nothing but its files:

        ``finished``: metrics.json is a JSON object and weights.pt has the ``weights_sha256`` it
        records (a metrics.json without that field: weights.pt loads); ``unfinished``: no
        metrics.json (a run to resume, or none yet); ``corrupt``: metrics.json or weights.pt is
        there but fails a check (``why`` says which and how).
        """
        if not self.metrics.is_file():
            return UNFINISHED, f"{self.path} has no metrics.json"
        try:
            metrics = json.loads(self.metrics.read_text())
            if not isinstance(metrics, dict):
                raise ValueError(f"holds a {type(metrics).__name__}, not an object")
        except (ValueError, UnicodeDecodeError) as err:
            return CORRUPT, f"{self.metrics} is unreadable ({type(err).__name__}: {err})"
        if not self.weights.is_file():
            return CORRUPT, f"{self.metrics} has no weights.pt beside it"
        recorded = metrics.get("weights_sha256")
        if recorded is not None:
            actual = file_sha256(self.weights)
            if actual != recorded:
                return CORRUPT, (f"{self.weights} ({self.weights.stat().st_size} bytes) has sha256 {actual[:12]}..., "
                                 f"not the {str(recorded)[:12]}... that metrics.json records")
        else:  # written before the sha256 was recorded: it must at least load
            try:
                load_plain(self.weights)
            except UnsafeFileError:
                raise
            except Exception as err:  # noqa: BLE001 - any failure to load means corrupt
                return CORRUPT, f"{self.weights} does not load ({type(err).__name__}: {err})"
        return FINISHED, f"{self.path} is finished"

    def set_aside_corrupt(self, why: str) -> None:
        """Move a corrupt folder's metrics.json and weights.pt aside (``<name>.corrupt``): it becomes
        unfinished, and the run resumes from its last checkpoint."""
        moved = [f"{f.name} -> {atomic.move_aside(f).name}" for f in (self.metrics, self.weights) if f.is_file()]
        log.warning("run folder %s is corrupt: %s; moved %s aside and resuming the run", self.path, why,
                    ", ".join(moved))

    def finish_command(self) -> str:
        """The train.py command that finishes (resumes) this folder: ``run_dir=`` and every key of its
        config.yaml that differs from train.py's defaults."""
        import shlex

        overrides = [f"run_dir={_hydra_value(str(self.path))}"]
        if self.config.is_file():
            given = _flatten(read_run_config(self.config))
            default = _flatten(dataclasses.asdict(DEFAULT))
            overrides += [f"{k}={_hydra_value(v)}" for k, v in given.items()
                          if k not in ("run_dir", "runs_dir", "retrain") and default.get(k, object()) != v]
        return "python train.py " + " ".join(shlex.quote(o) for o in overrides)

    def progress(self) -> str:
        """'last.ckpt at epoch 3 of 10' (what an unfinished folder holds), or 'no checkpoint yet'."""
        point = self.resume_point(quiet=True)
        if point is None:
            return "no checkpoint yet"
        epochs = None
        if self.config.is_file():
            epochs = (read_run_config(self.config).get("trainer") or {}).get("max_epochs")
        return f"{Path(point).name} at epoch {point_epoch(point) + 1}" + (f" of {epochs}" if epochs else "")

    def holds_training(self) -> bool:
        """Anything training made: a checkpoint, weights or metrics (a folder without them lost nothing)."""
        return bool(self._checkpoints()) or self.weights.is_file() or self.metrics.is_file()

    def archive(self) -> Optional[Path]:
        """Move an existing folder aside (retrain=true): nothing written before is lost."""
        if not self.path.exists():
            return None
        target = self.path.with_name(f"{self.path.name}.replaced-{time.strftime('%Y%m%d-%H%M%S')}")
        self.path.rename(target)
        log.info("moved the previous run to %s", target)
        return target

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold ``<folder>.lock`` (beside the folder, so that retrain's rename does not move it).

        A second process asking for the same folder waits here until the first one is done. Only
        rank 0 of a distributed launch locks: the other ranks are part of the same run.
        """
        if not _is_global_zero():
            yield
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.path.with_name(self.path.name + ".lock")))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            log.info("another process is training %s; waiting for it to finish", self.path)
            lock.acquire()
        try:
            yield
        finally:
            lock.release()

    def stored_recipe(self) -> Optional[Dict[str, Any]]:
        """The recipe this folder was made for (None for a folder without a config).

        An unreadable recipe.json (a truncated file) is moved aside and the recipe rebuilt from
        config.yaml; with neither readable the folder cannot be checked and is refused.
        """
        if self.recipe.is_file():
            try:
                return json.loads(self.recipe.read_text())["recipe"]
            except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
                aside = _set_aside(self.recipe) if _is_global_zero() else "(left in place: not rank 0)"
                log.warning("run folder %s: recipe.json is unreadable (%s: %s); moved to %s, taking the recipe "
                            "from config.yaml", self.path, type(err).__name__, err, aside)
        if not self.config.is_file():
            return None
        # A folder written before recipe.json existed: its config.yaml, data.source by content if still there.
        try:
            stored = read_run_config(self.config)
        except Exception as err:  # noqa: BLE001 - yaml, omegaconf and decoding errors alike
            raise RecipeMismatchError(
                f"run folder {self.path}: cannot tell its recipe (recipe.json missing or unreadable, config.yaml "
                f"unreadable: {type(err).__name__}: {err}); pass retrain=true to replace it (the old folder is kept "
                "beside it) or run_dir=PATH to train elsewhere") from None
        recipe = _recipe(stored)
        source = stored.get("data", {}).get("source")
        if source is not None:
            recipe["data.source"] = source_identity(source) if Path(source).exists() else source
        return recipe

    def check(self, cfg: TrainConfig, recipe: Optional[Dict[str, Any]] = None) -> None:
        """Raise RecipeMismatchError naming the keys that differ if this folder holds another recipe."""
        old = self.stored_recipe()
        if old is None:
            return
        changes = recipe_differences(old, recipe if recipe is not None else recipe_of(cfg))
        if changes:
            state = "a finished run of a different recipe" if self.finished else "a different recipe"
            raise RecipeMismatchError(
                f"run folder {self.path} holds {state} ({changes}); pass retrain=true to replace it "
                f"(the old folder is kept beside it) or run_dir=PATH to train elsewhere"
            )

    def trained_processes(self) -> int:
        """The number of processes that trained this folder: recipe.json's "processes", else (recipe.json
        unreadable or missing) metrics.json's, else 1 (a folder written before the count was recorded:
        every run until then trained on one process)."""
        for file in (self.recipe, self.metrics):
            try:
                recorded = json.loads(file.read_text()).get("processes")
            except (OSError, ValueError, AttributeError, UnicodeDecodeError):
                continue
            if recorded is not None:
                return int(recorded)
        return 1

    def check_processes(self, cfg: TrainConfig, processes: int) -> None:
        """Raise ProcessCountError (with the command that continues the run as it was) when this folder
        holds training by another number of processes than ``processes``.

        The global batch is the same either way (``data.batch_size``), but batch norm normalises each
        process's share (unless trainer.sync_batchnorm) and every rank draws its own augmentation and
        attack starts: resuming or reusing the run under another count would mix two realisations.
        """
        old = self.trained_processes()
        if old == processes or not self.holds_training():
            return
        batch = cfg.data.batch_size
        state = "a finished run" if self.finished else "an unfinished run"
        raise ProcessCountError(
            f"run folder {self.path} holds {state} trained by {old} process(es) (global batch {batch}, "
            f"{batch // old} per process); this command trains with {processes} ({batch // processes} per process). "
            f"Continue it as it was: `{self.finish_command()}`; or pass retrain=true to train it again with "
            f"{processes} (the old folder is kept beside it) or run_dir=PATH to train elsewhere")

    def prepare(self, cfg: TrainConfig, processes: int = 1) -> None:
        """Write the resolved config and the recipe (with the process count), or check that an existing
        folder holds the same recipe."""
        recipe = recipe_of(cfg)
        if self.config.is_file():
            self.check(cfg, recipe)
            if not self.recipe.is_file():
                atomic.write_json(self.recipe, {"recipe": recipe, "processes": processes})
            return
        self.path.mkdir(parents=True, exist_ok=True)
        atomic.remove_stale_tmp(self.path)
        atomic.write_json(self.recipe, {"recipe": recipe, "processes": processes})
        atomic.write_text(self.config, OmegaConf.to_yaml(OmegaConf.create(dataclasses.asdict(cfg))))

    def _checkpoints(self) -> list:
        """last.ckpt (every epoch) and hpc_ckpt_*.ckpt (Lightning's SLURM requeue, mid-epoch), newest first."""
        found = [p for p in (self.last_ckpt, *self.path.glob("hpc_ckpt_*.ckpt")) if p.is_file()]
        return sorted(found, key=lambda p: p.stat().st_mtime_ns, reverse=True)

    def resume_point(self, quiet: bool = False) -> Optional[str]:
        """The newest checkpoint that loads (``_checkpoints``), or None: train from the start.

        A checkpoint that does not load (truncated by a full disk or a kill before writes were
        atomic) is moved aside (``<name>.corrupt``), saying whether the run resumes from an older
        checkpoint or restarts. ``quiet``: look only (no log line, nothing moved).
        """
        rejected = []
        for point in self._checkpoints():
            try:
                point_epoch(point)
            except UnsafeFileError:  # not damage but a file that asks to run code: refused, left as it is
                raise
            except Exception as err:  # noqa: BLE001 - torch's zip errors, pickle errors, a missing key
                if quiet:
                    continue
                aside = atomic.move_aside(point)
                rejected.append(point.name)
                log.warning("checkpoint %s does not load (%s: %s); moved to %s", point, type(err).__name__,
                            str(err).splitlines()[0] if str(err) else "", aside.name)
                continue
            if not quiet:
                if rejected:
                    log.warning("resuming from the previous good checkpoint %s (instead of %s)", point,
                                ", ".join(rejected))
                log.info("resuming from %s", point)
            return str(point)
        if rejected:
            log.warning("no earlier checkpoint in %s: training restarts from epoch 0", self.path)
        return None

    def finish(self, network: nn.Module, cfg: TrainConfig, metrics: Dict[str, Any], record: Dict[str, Any]) -> None:
        """Write the weights, then metrics.json (last: its presence marks the run finished)."""
        atomic.torch_save(
            {"state_dict": network.state_dict(), "model": dataclasses.asdict(cfg.model), "data": cfg.data.name,
             "num_classes": cfg.data.num_classes},
            self.weights,
        )
        atomic.write_json(self.metrics, {**metrics, **record, "weights_sha256": file_sha256(self.weights)})


def _set_aside(path: Path) -> str:
    """``atomic.move_aside`` where the folder allows it: the new name, or why the file stayed."""
    try:
        return atomic.move_aside(path).name
    except OSError as err:
        return f"(left in place: {err})"


def point_epoch(path) -> int:
    """The epoch a Lightning checkpoint was written at (loading it whole, as resuming does).

    Weights only (``stir.untrusted.load_plain``): a Lightning checkpoint of this project holds
    tensors, dicts, lists and numbers (the RNG states too, ``stir.training.system.rng_states``); one
    that holds anything else is refused (``UnsafeFileError``) rather than loaded, since loading it
    would run the code it names.
    """
    return int(load_plain(path)["epoch"])


def weights_identity(path: str) -> str:
    """Content hash of the weights a path names: a run folder (its weights.pt) or a file.

    The file's sha256, not ``stir.models.identity.content_identity``: it names the weights a training
    run starts from (``init_from``), and the code that runs them is the recipe's own architecture
    (``model.*``, in the recipe beside it). Models are keyed for measurement by ``content_identity``.
    """
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


def read_weights_blob(file: Path) -> Any:
    """``load_plain(file)`` (weights only); a file that does not load is a ValueError naming it."""
    try:
        return load_plain(file)
    except UnsafeFileError:
        raise
    except Exception as err:  # a truncated zip, a foreign pickle: say which file and why, in one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise ValueError(f"cannot load weights from {file} ({file.stat().st_size} bytes): {type(err).__name__}: "
                         f"{first}") from err


def checkpoint_model(path: str) -> Optional[Dict[str, Any]]:
    """The ModelConfig fields (arch, width) a checkpoint was made with, when it says (weights.pt or config.yaml)."""
    file = resolve_weights_file(path)
    if file.name != "last.ckpt" and file.suffix != ".ckpt":
        blob = read_weights_blob(file)
        if isinstance(blob, dict) and isinstance(blob.get("model"), dict):
            return blob["model"]
    config = read_run_config(file.parent / "config.yaml")
    return None if config is None else config.get("model")


def load_state_dict(path: str) -> Dict[str, torch.Tensor]:
    """The network's state dict from a run folder, a weights.pt or a Lightning checkpoint."""
    file = resolve_weights_file(path)
    blob = read_weights_blob(file)
    state = blob.get("state_dict", blob)
    if any(k.startswith("network.") for k in state):  # a LightningModule checkpoint of RobustClassifier
        state = {k[len("network."):]: v for k, v in state.items() if k.startswith("network.")}
    return state
