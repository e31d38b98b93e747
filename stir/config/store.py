"""Register the typed schema with Hydra and turn a composed DictConfig into checked dataclasses."""
from __future__ import annotations

import copy
import dataclasses
import difflib
import os
import typing
from pathlib import Path
from typing import List, Sequence, Type, TypeVar

from hydra import compose as hydra_compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.initialize import get_gh_backup, restore_gh_from_backup
from omegaconf import DictConfig, OmegaConf

from stir.config.schema import TrainConfig
from stir.config.validate import ConfigError, validate_train

T = TypeVar("T")


def register_configs() -> None:
    """Make ``train_schema`` available to ``defaults:`` lists. Called by the entry points."""
    ConfigStore.instance().store(name="train_schema", node=TrainConfig)


def unknown_keys(cfg: DictConfig, schema: type, prefix: str = "") -> List[str]:
    """Keys of ``cfg`` that ``schema`` (a dataclass) does not declare, each with a close match if any.

    Hydra's ``+key=value`` appends a key even to a typed node; nothing would read it, so a typo
    such as ``+trainer.max_epoch=1`` would silently train for the default number of epochs.
    """
    fields = {f.name: f for f in dataclasses.fields(schema)}
    problems = []
    for key in cfg.keys():
        full = f"{prefix}{key}"
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            problems.append(f"{full}" + (f" (did you mean {prefix}{close[0]}?)" if close else ""))
            continue
        sub = cfg._get_node(key)
        field_type = typing.get_type_hints(schema).get(str(key))
        if isinstance(sub, DictConfig) and dataclasses.is_dataclass(field_type):
            problems += unknown_keys(sub, field_type, f"{full}.")
    return problems


def to_dataclass(cfg: DictConfig, schema: Type[T], prefix: str = "") -> T:
    """The composed config as an instance of its schema (types already checked by OmegaConf);
    ``prefix`` names where ``cfg`` sits in the whole config (for messages)."""
    unknown = unknown_keys(cfg, schema, prefix)
    if unknown:
        raise ConfigError(f"unknown config key(s): {', '.join(unknown)}; see `--help` or {schema.__name__} for the keys")
    try:
        obj = OmegaConf.to_object(cfg)
    except ConfigError:
        raise
    except ValueError as err:  # a component config's own check (__post_init__), e.g. inversion.batch_size=0
        raise ConfigError(str(err)) from err
    if not isinstance(obj, schema):
        raise TypeError(f"config is a {type(obj).__name__}, expected {schema.__name__}: is the schema first in defaults?")
    return obj


def train_config(cfg: DictConfig) -> TrainConfig:
    """Composed ``train.yaml`` -> a validated ``TrainConfig``; raises ValueError naming the key."""
    out = to_dataclass(cfg, TrainConfig)
    validate_train(out)
    return out


def compose(config_dir: Path, config_name: str, overrides: Sequence[str]) -> DictConfig:
    """``config_name`` under ``config_dir`` composed with ``overrides``, as the entry point would.

    Works inside another Hydra app (evaluate.py resolving zoo recipes): the caller's Hydra state
    is saved and restored around this private composition.
    """
    backup = get_gh_backup()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(Path(config_dir).resolve()), version_base="1.3"):
            return hydra_compose(config_name=config_name, overrides=list(overrides))
    finally:
        restore_gh_from_backup(backup)


# compose_train's results: {(config folder, overrides, the folder's files' (path, mtime, size)): TrainConfig}.
# A Hydra composition costs about 0.3 s; evaluate.py resolves each zoo name many times (a paper report:
# about 2,000 resolutions of a few dozen names, 12 of its 23 minutes in the tests' tiny zoo). Keyed by
# the files' stat, so an edited YAML composes anew; a copy is returned, so no caller shares a config.
_COMPOSED: dict = {}


def _config_files(config_dir: Path) -> tuple:
    """((path, mtime_ns, size), ...) of every file under ``config_dir``, sorted: what a composition reads."""
    out, stack = [], [str(Path(config_dir).resolve())]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir():
                    stack.append(entry.path)
                elif entry.is_file():
                    st = entry.stat()
                    out.append((entry.path, st.st_mtime_ns, st.st_size))
    return tuple(sorted(out))


def compose_train(config_dir: Path, overrides: Sequence[str]) -> TrainConfig:
    """The TrainConfig that ``python train.py *overrides`` would run, composed without running it (a
    fresh copy of the one composed before for the same overrides and unchanged config files)."""
    key = (str(Path(config_dir).resolve()), tuple(overrides), _config_files(config_dir))
    if key not in _COMPOSED:
        register_configs()
        _COMPOSED[key] = train_config(compose(config_dir, "train", overrides))
    return copy.deepcopy(_COMPOSED[key])
