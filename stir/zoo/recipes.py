"""The zoo file: names -> training recipes -> run folders.

``configs/zoo.yaml`` maps a name to the overrides of ``python train.py`` (and optionally a zoo
model to warm-start from). A name resolves to the run folder that command writes, so evaluation
finds exactly what training produced; a missing model is either trained (``train_missing``) or
reported with the command that trains it. An entry may instead name a model of another source
(``{source: robustbench:NAME, ...}``, see ``stir.models.sources``): such entries are listed in
``Recipes.sourced`` and never trained.
"""
from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from omegaconf import OmegaConf

from stir.config.model_names import close_matches  # noqa: F401  (stir.zoo.resolve's too)
from stir.config.schema import TrainConfig
from stir.config.store import compose_train
from stir.training.runs import CORRUPT, FINISHED, RecipeMismatchError, RunFolder, read_run_config, recipe_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recipe:
    train: List[str]  # overrides of train.py
    init_from: Optional[str] = None  # another zoo name


@dataclass(frozen=True)
class Run:
    """A zoo name resolved to its run folder: the recipe and the command that trains it."""

    name: str
    run_dir: Path
    config: TrainConfig
    command: str  # the train.py command that makes it


# Keys of a zoo entry that names a model of another source (stir.models.sources.SourceOptions).
SOURCED_KEYS = frozenset({"source", "weights", "tap", "mean", "std", "normalize", "num_classes", "kwargs", "robustbench",
                          "weights_root"})


@dataclass(frozen=True)
class SourcedEntry:
    """A zoo entry naming a model of another source: the source string and its options."""

    source: str  # e.g. robustbench:Engstrom2019Robustness
    options: Dict[str, Any]  # SourceOptions fields (robustbench: {dataset, threat_model, model_dir})


class UnknownModelError(ValueError):
    pass


class MissingModelError(FileNotFoundError):
    pass


def read_zoo_file(path: Path) -> Dict[str, Any]:
    """The zoo file as plain data; ValueError (one line naming the file, the line and the fix) for one
    that is not YAML or not a mapping of names."""
    import yaml

    try:
        raw = OmegaConf.to_container(OmegaConf.load(path))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ValueError(f"zoo.file {path} is not valid YAML{where} ({problem}); fix that line, or give another "
                         "zoo.file") from None
    if not isinstance(raw, dict):
        raise ValueError(f"zoo.file {path} holds a {type(raw).__name__}, not a mapping of zoo names to recipes")
    return raw


def load_zoo(path: Path) -> Dict[str, Recipe]:
    raw = read_zoo_file(path)
    zoo = {}
    for name, entry in raw.items():
        if isinstance(entry, dict) and "source" in entry:
            continue  # another source's model: load_sourced
        if isinstance(entry, list):
            zoo[name] = Recipe(train=[str(o) for o in entry])
        elif isinstance(entry, dict) and set(entry) <= {"train", "init_from"}:
            zoo[name] = Recipe(train=[str(o) for o in entry.get("train", [])], init_from=entry.get("init_from"))
        else:
            raise ValueError(f"{path}: zoo entry {name!r} must be a list of train.py overrides or {{train: [...], init_from: NAME}}")
    for name, recipe in zoo.items():
        if recipe.init_from is not None and recipe.init_from not in zoo:
            raise ValueError(f"{path}: {name}.init_from={recipe.init_from!r} is not a zoo name")
    return zoo


def load_sourced(path: Path) -> Dict[str, SourcedEntry]:
    """The zoo entries that name models of other sources ({source: PREFIX:NAME, weights: ..., tap: ...})."""
    raw = read_zoo_file(path)
    out = {}
    for name, entry in raw.items():
        if isinstance(entry, dict) and "source" in entry:
            unknown = set(entry) - SOURCED_KEYS
            if unknown:
                raise ValueError(f"{path}: zoo entry {name!r} has unknown keys {sorted(unknown)}; valid: {sorted(SOURCED_KEYS)}")
            out[name] = SourcedEntry(source=str(entry["source"]), options={k: v for k, v in entry.items() if k != "source"})
    return out


class Recipes:
    """Resolve zoo names to run folders under one profile and set of common overrides."""

    def __init__(self, zoo_file: Path, config_dir: Path, profile: str = "full", overrides: Sequence[str] = (),
                 runs_dir: Optional[str] = None, sources: Optional[Mapping[str, str]] = None,
                 main_data: Optional[str] = None):
        """``sources``: {data-set name: local copy}; a recipe gets ``data.source=`` of its own data set
        only (a CIFAR-100 recipe is never pointed at the CIFAR-10 copy), none where it is not given.
        ``main_data``: the data set whose copy evaluate.py's ``data.source`` names (the others':
        ``zoo.sources.NAME``); None: train.py's default."""
        self.recipes = load_zoo(Path(zoo_file))
        self.sourced = load_sourced(Path(zoo_file))  # entries naming models of other sources
        self.zoo_file = Path(zoo_file)
        self.config_dir = Path(config_dir)
        self.profile = profile
        self.sources = dict(sources or {})
        self.head = [f"profile={profile}", *overrides]
        self.tail = [f"runs_dir={runs_dir}"] if runs_dir else []
        self._default_data: Optional[str] = None
        self.main_data = main_data

    def overrides(self, name: str) -> List[str]:
        """The full train.py overrides of a zoo name (init_from resolved to its parent's run folder)."""
        recipe = self._recipe(name)
        extra = []
        if recipe.init_from is not None:
            extra = [f"init_from={self.resolve(recipe.init_from, must_exist=True).run_dir}"]
        return [*self.head, *self._source(name), *self.tail, *recipe.train, *extra]

    def data_name(self, name: str) -> str:
        """The data set a zoo name trains on: its recipe's last ``data=`` choice, else train.py's default."""
        chosen = [o.split("=", 1)[1] for o in [*self.head, *self._recipe(name).train] if o.startswith("data=")]
        return chosen[-1] if chosen else self.default_data

    @property
    def default_data(self) -> str:
        if self._default_data is None:
            self._default_data = compose_train(self.config_dir, self.head).data.name
        return self._default_data

    def _source(self, name: str) -> List[str]:
        """``data.source=`` of the copy of the zoo name's own data set, where one is named."""
        data = self.data_name(name) if self.sources else None  # no copies: no compose for the default
        return [f"data.source={self.sources[data]}"] if data in self.sources else []

    def train_config(self, name: str) -> TrainConfig:
        return compose_train(self.config_dir, self.overrides(name))

    def resolve(self, name: str, must_exist: bool = False, allow_unfinished: bool = False) -> Run:
        """The run folder of a zoo name; ``must_exist``: it must hold a finished run (``RunFolder.verify``),
        or, with ``allow_unfinished``, at least a checkpoint."""
        recipe = self._recipe(name)
        if recipe.init_from is not None:
            parent = self.resolve(recipe.init_from)
            if not RunFolder(parent.run_dir).finished:
                raise MissingModelError(
                    f"zoo model {name!r} is warm-started from {recipe.init_from!r}, which is not trained yet: "
                    f"run `{parent.command}` first, or pass train_missing=true"
                )
        cfg = self.train_config(name)
        run_dir = recipe_dir(cfg)
        command = "python train.py " + " ".join(shlex.quote(o) for o in self.overrides(name))
        model = Run(name=name, run_dir=run_dir, config=cfg, command=command)
        folder = RunFolder(run_dir)
        state, why = folder.verify() if must_exist else (FINISHED, "")
        if state == CORRUPT:
            raise MissingModelError(f"zoo model {name!r}: its run folder is corrupt: {why}; set the bad files aside "
                                    f"and finish it with `{command}`")
        if state != FINISHED and not (allow_unfinished and folder.resume_point(quiet=True)):
            partly = (f" (it holds an unfinished run: {folder.progress()}; allow_unfinished=true evaluates that "
                      "checkpoint)") if folder.resume_point(quiet=True) else ""
            raise MissingModelError(
                f"zoo model {name!r} is not trained: no finished run in {run_dir}{partly}. Train it with\n    {command}\n"
                f"or pass train_missing=true to train missing models first"
            )
        try:  # the folder must hold this recipe, or evaluation would measure another model
            folder.check(cfg)
        except RecipeMismatchError as err:
            main = cfg.data.name == (self.main_data or self.default_data)
            key = "data.source" if main else f"zoo.sources.{cfg.data.name}"
            raise RecipeMismatchError(mismatch_message(name, command, folder, cfg, err, key)) from None
        return model

    def ensure(self, name: str, train_missing: bool, allow_unfinished: bool = False) -> Run:
        """Resolve a name to a finished run, training it (and its warm-start parents) if allowed
        (``allow_unfinished``: an unfinished one with a checkpoint will do)."""
        if train_missing:
            recipe = self._recipe(name)
            if recipe.init_from is not None:
                self.ensure(recipe.init_from, train_missing=True)
            model = self.resolve(name)
            if not RunFolder(model.run_dir).finished:
                from stir.training.pipeline import train

                log.info("training missing zoo model %s: %s", name, model.command)
                train(model.config)
            return model
        return self.resolve(name, must_exist=True, allow_unfinished=allow_unfinished)

    def _recipe(self, name: str) -> Recipe:
        if name not in self.recipes:
            raise UnknownModelError(f"unknown zoo name {name!r}{close_matches(name, self.recipes)}")
        return self.recipes[name]


def mismatch_message(name: str, command: str, folder: RunFolder, cfg: TrainConfig, err: Exception,
                     source_key: str = "data.source") -> str:
    """Why a zoo model's run folder holds another recipe, and the evaluate.py key that fixes it.

    train.py's own advice (retrain=true, run_dir=PATH) is no evaluate.py key. The usual cause is the
    data: the folder was trained on a local copy (train.py data.source=PATH) and the evaluation does
    not name it (``source_key``=PATH: data.source, or zoo.sources.cifar100 for a CIFAR-100 recipe), or
    names another.
    """
    from stir.training.runs import recipe_of

    old, new = folder.stored_recipe() or {}, recipe_of(cfg)
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    head = f"zoo model {name!r} (`{command}`): its run folder {folder.path} was trained with another recipe"
    fixes = []
    if "data.source" in keys:
        trained_on = _trained_source(folder)
        if cfg.data.source is None:
            fixes.append(f"it was trained on data.source={trained_on or 'a local copy'}: evaluate it with "
                         f"{source_key}={trained_on or 'PATH'}")
        else:
            fixes.append(f"data.source: it was trained on {trained_on or old.get('data.source')!r}, this evaluation "
                         f"gives {cfg.data.source!r} (other content): give the same data with {source_key}=PATH")
    others = [k for k in keys if k != "data.source"]
    if others:
        changes = ", ".join(f"{k}: {old.get(k)!r} here, {new.get(k)!r} asked" for k in others)
        fixes.append(f"{changes}: add the folder's values with zoo.overrides=[\"key=value\"], or use another "
                     f"zoo.runs_dir to train this recipe there (train_missing=true)")
    return f"{head}; " + "; ".join(fixes) if fixes else f"{head} ({err})"


def _trained_source(folder: RunFolder) -> Optional[str]:
    """The data.source path in the folder's config.yaml (where it was trained from), if any."""
    config = read_run_config(folder.config)
    if config is None:
        return None
    source = (config.get("data") or {}).get("source")
    return None if source is None else str(source)
