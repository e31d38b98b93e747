"""The configuration Hydra is about to run, composed first and refused if it names code (issue 67).

Hydra calls what a configuration names: ``_target_`` (its callbacks, launcher and sweeper), and the
``()`` factory and ``class`` of a logging handler, filter or formatter, which ``logging.config``
imports and calls (``(): numpy.load`` with ``allow_pickle: true`` ran a pickle). It also writes
where the configuration says (a ``logging.FileHandler`` opened in mode ``w`` truncates its file;
``hydra.output_subdir`` writes ``config.yaml``). Scanning files misses YAML escapes, symlinked
folders, ``hydra.searchpath`` and overrides, so ``check_composed`` composes the whole tree, the
``hydra`` node included, exactly as ``hydra.main`` will (same search path, ``--config-dir``,
``--config-name``, overrides; each job of a sweep) and walks it before Hydra runs anything. Nothing
is written. Anything callable that is not on the project's short allow-list (``ALLOWED_TARGETS``,
``ALLOWED_LOG_CLASSES``) raises ``ConfigError`` naming the key, its value and the file or override it
came from. Cost: one composition (about 0.3 s on a laptop CPU; no torch), one more per swept choice.
"""
from __future__ import annotations

import itertools
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, List, Optional, Sequence, Tuple

from stir.config.validate import ConfigError

# The plugins the project ships presets for (configs/hydra/launcher, configs/evaluate/hydra/launcher)
# and Hydra's defaults: the only ``_target_`` values a composed ``hydra`` node may name.
ALLOWED_TARGETS = {
    "launcher": {"hydra._internal.core_plugins.basic_launcher.BasicLauncher",
                 "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher",
                 "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher"},
    "sweeper": {"hydra._internal.core_plugins.basic_sweeper.BasicSweeper"},
}
# The classes of Hydra's own job_logging / hydra_logging presets; a FileHandler only for a *.log
# file inside the run folder.
ALLOWED_LOG_CLASSES = {"logging.StreamHandler", "logging.FileHandler", "logging.NullHandler", "logging.Formatter"}
ALLOWED_STREAMS = {"ext://sys.stdout", "ext://sys.stderr"}
# Environment variables a job may set (hydra.job.env_set): threads, devices, wandb. Others (LD_PRELOAD,
# PYTHONPATH, GIT_*, PATH ...) make a later subprocess or import run other code.
ALLOWED_ENV_PREFIXES = ("CUDA_", "OMP_", "MKL_", "NCCL_", "WANDB_", "TOKENIZERS_", "HYDRA_FULL_ERROR")
MAX_SWEEP_JOBS = 16  # more combinations of swept group choices: each choice composed once (0.3 s each)
_FIX = "a configuration names no code to run: remove it (a model of your own code is ref=python:your_module:make_net)"


def check_composed(line: Any, config_dir: Path, config_name: str) -> None:
    """Compose ``line`` (``stir.config.argv.CommandLine``) as ``hydra.main(config_path=config_dir,
    config_name=config_name)`` will and raise ``ConfigError`` for code it would run or a file it would
    write outside the run folder; a composition error (a wrong type, a missing preset) as one line."""
    from hydra.types import RunMode

    overrides = [o.raw for o in line.overrides]
    with _hydra(line, config_dir, config_name) as (app, name):
        multirun = line.multirun
        try:
            master = app.compose_config(name, list(overrides), run_mode=RunMode.MULTIRUN if multirun else RunMode.RUN,
                                        with_log_configuration=False, validate_sweep_overrides=not multirun)
        except Exception as err:  # Hydra's and OmegaConf's composition errors, whatever their class
            if multirun or app.get_mode(config_name=name, overrides=list(overrides)) != RunMode.MULTIRUN:
                raise composition_error(err) from err
            multirun = True  # hydra.mode=MULTIRUN in a config: a sweep without -m
            master = app.compose_config(name, list(overrides), run_mode=RunMode.MULTIRUN,
                                        with_log_configuration=False, validate_sweep_overrides=False)
        multirun = multirun or master.hydra.mode == RunMode.MULTIRUN
        _check_tree(master, multirun, app, name, overrides)
        if multirun:
            for job in sweep_jobs(master, app, name):
                try:
                    cfg = app.config_loader.load_sweep_config(master, job)
                except Exception as err:
                    raise composition_error(err) from err
                _check_tree(cfg, True, app, name, list(master.hydra.overrides.hydra) + job)


def composition_error(err: BaseException) -> ConfigError:
    """Hydra's chain of exceptions as one line: the first line of each, joined (an override its lexer
    refuses for a character outside ASCII: ``unquoted``)."""
    messages, e = [], err
    while e is not None:
        said = unquoted(str(e))
        if said is not None:
            return ConfigError(said)
        text = str(e).strip()
        first = text.splitlines()[0].strip() if text else ""
        if first and first not in messages:
            messages.append(first)
        e = e.__cause__ or (e.__context__ if not e.__suppress_context__ else None)
    return ConfigError(": ".join(messages) or type(err).__name__)


def unquoted(message: str) -> Optional[str]:
    """For Hydra's lexer refusing an override with characters outside ASCII (``out_dir=/tmp/résultats``:
    "LexerNoViableAltException: out_dir=/tmp/résultats"), the one line that says to quote the value; else None."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    prefix = "LexerNoViableAltException: "
    if not first.startswith(prefix):
        return None
    override = first[len(prefix):]
    odd = "".join(sorted({c for c in override if ord(c) > 127}))
    if not odd:
        return None
    key, _, value = override.partition("=")
    return (f"override {override} has characters outside ASCII ({odd}) that Hydra's override parser takes only "
            f"in a quoted value: quote it, as '{key}=\"{value}\"' (the single quotes keep the shell from "
            "removing the double ones)")


def sweep_jobs(master: Any, app: Any, name: str) -> List[List[str]]:
    """The task overrides of the jobs to compose for a sweep: a job's ``hydra`` node differs from the
    master's only through the files it chooses, so a plain value sweep (``seed=0,1,2``) is composed at its
    first value, and group choices (``loss=vanilla,at``) in every combination, or each choice once
    beyond ``MAX_SWEEP_JOBS`` combinations. (A plain value never names code: ``refuse_code`` refuses a
    ``_target_`` in any value.)"""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(master.hydra.overrides.task))
    _, repo = app.config_loader._parse_overrides_and_create_caching_repo(name, list(master.hydra.overrides.hydra))
    lists = []
    for o in parsed:
        key = o.get_key_element()
        values = [f"{key}={v}" for v in o.sweep_string_iterator()] if o.is_sweep_override() else \
            [f"{key}={o.get_value_element_as_str()}"]
        lists.append(values if repo.group_exists(o.key_or_group) else values[:1])
    total = 1
    for values in lists:
        total *= len(values)
    if total <= MAX_SWEEP_JOBS:
        return [list(job) for job in itertools.product(*lists)]
    firsts = [values[0] for values in lists]
    return [firsts[:i] + [v] + firsts[i + 1:] for i, values in enumerate(lists) for v in values]


@contextmanager
def _hydra(line: Any, config_dir: Path, config_name: str) -> Iterator[Tuple[Any, str]]:
    """Hydra's app object with ``hydra.main``'s search path (``_run_hydra``), the caller's Hydra state
    saved and restored around it."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_automatic_config_search_path
    from hydra.core.config_search_path import SearchPathQuery
    from hydra.core.global_hydra import GlobalHydra
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    from stir.config.argv import flag_values

    calling_file = _project_root() / f"{config_name}.py"  # the entry point: evaluate.py, train.py
    path = (flag_values(line, ("--config-path", "-cp")) or [str(Path(config_dir).resolve())])[-1]
    if not os.path.isabs(path):
        path = str(_project_root() / path)  # hydra.main: relative to the entry point (the project root)
    name = (flag_values(line, ("--config-name", "-cn")) or [config_name])[-1]
    search_path = create_automatic_config_search_path(str(calling_file), None, path)
    for extra in flag_values(line, ("--config-dir", "-cd")):
        folder = os.path.abspath(os.path.expanduser(extra))
        if not os.path.isdir(folder):
            raise ConfigError(f"--config-dir {extra}: no such folder; give an existing folder of YAML files")
        search_path.prepend(provider="command-line", path=f"file://{folder}", anchor=SearchPathQuery(provider="schema"))
    backup = get_gh_backup()
    GlobalHydra.instance().clear()
    try:
        yield Hydra.create_main_hydra2(task_name=config_name, config_search_path=search_path), name
    finally:
        GlobalHydra.instance().clear()
        restore_gh_from_backup(backup)


def _project_root() -> Path:
    import stir

    return Path(stir.__file__).resolve().parent.parent


# ------------------------------------------------------------------ the walk
def _check_tree(cfg: Any, multirun: bool, app: Any, name: str, overrides: Sequence[str]) -> None:
    from omegaconf import OmegaConf, open_dict

    cfg = cfg.copy()
    run_folder = _run_folder(cfg, multirun)
    with open_dict(cfg):  # what run_job sets before it configures logging: the interpolations' values
        cfg.hydra.runtime.output_dir = str(run_folder)
        if multirun:
            cfg.hydra.job.num = 0
    refuse = _Refuser(cfg, app, name, overrides)
    main = {k: _container(cfg._get_node(k), refuse, (str(k),)) for k in cfg.keys() if k != "hydra"}
    for path, key, value in _items(main, ()):
        if key in ("_target_", "()"):
            refuse(path, value, "names code to call")
    hydra = cfg.hydra
    for i, (entry, value) in enumerate((_container(hydra.callbacks, refuse, ("hydra", "callbacks")) or {}).items()):
        refuse(("hydra", "callbacks", entry), value, "is a Hydra callback, which Hydra calls at the run's start")
    for part in ("launcher", "sweeper"):
        node = _container(hydra[part], refuse, ("hydra", part)) or {}
        for path, key, value in _items(node, ("hydra", part)):
            top = path == ("hydra", part, "_target_")
            if key in ("_target_", "()") and not (top and value in ALLOWED_TARGETS[part]):
                refuse(path, value, f"is not a {part} the project ships ({', '.join(sorted(ALLOWED_TARGETS[part]))})")
        if node.get("setup"):
            refuse(("hydra", part, "setup"), node["setup"], "is shell code run before each job")
    for part in ("job_logging", "hydra_logging"):
        _check_logging(_container(hydra[part], refuse, ("hydra", part)) or {}, ("hydra", part), run_folder, refuse)
    for entry in hydra.searchpath or []:
        if not _inside(_searchpath_folder(str(entry)), _project_root() / "configs"):
            refuse(("hydra", "searchpath"), entry, "adds configs from outside the project's configs/ (they could "
                   "replace its presets)", fix="use --config-dir DIR for your own presets")
    subdir = hydra.output_subdir
    if subdir is not None and not _inside(run_folder / os.path.expanduser(str(subdir)), run_folder):
        refuse(("hydra", "output_subdir"), subdir, f"writes config.yaml outside the run folder {run_folder}",
               fix="leave it null or give a folder inside the run folder")
    for var in (hydra.job.env_set or {}):
        if not str(var).startswith(ALLOWED_ENV_PREFIXES):
            refuse(("hydra", "job", "env_set", str(var)), hydra.job.env_set[var],
                   "sets an environment variable that can make a later program run other code",
                   fix=f"set only {', '.join(p.rstrip('_') + '*' for p in ALLOWED_ENV_PREFIXES)}")


def _check_logging(node: Any, base: Tuple[str, ...], run_folder: Path, refuse: "_Refuser") -> None:
    """``logging.config.dictConfig``'s callables: ``()`` anywhere, ``class`` of a handler or formatter,
    ``ext://`` objects; a FileHandler's file."""
    for path, key, value in _items(node, base):
        if key == "()":
            refuse(path, value, "is a factory logging.config calls")
        elif key == "class" and value not in ALLOWED_LOG_CLASSES:
            refuse(path, value, f"is a class logging.config calls (allowed: {', '.join(sorted(ALLOWED_LOG_CLASSES))})")
        elif isinstance(value, str) and value.startswith("ext://") and value not in ALLOWED_STREAMS:
            refuse(path, value, "imports an object for logging.config (allowed: ext://sys.stdout, ext://sys.stderr)")
    for handler, spec in (node.get("handlers") or {}).items():
        if isinstance(spec, dict) and spec.get("class") == "logging.FileHandler":
            file = Path(os.path.expanduser(str(spec.get("filename"))))
            file = file if file.is_absolute() else Path.cwd() / file  # FileHandler: abspath at configuration
            if not (str(file).endswith(".log") and _inside(file, run_folder)):
                refuse(base + ("handlers", str(handler), "filename"), spec.get("filename"),
                       f"is a FileHandler's file outside the run folder {run_folder} or not *.log (mode "
                       f"{spec.get('mode', 'a')} would write it)", fix="log to the console, or to a *.log inside the run folder")


def _items(node: Any, path: Tuple[str, ...]) -> Iterator[Tuple[Tuple[str, ...], str, Any]]:
    """(path, key, value) of every key of a plain container, depth first (lists by index)."""
    entries = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in entries:
        here = path + (str(key),)
        yield here, str(key), value
        yield from _items(value, here)


def _container(node: Any, refuse: "_Refuser", path: Tuple[str, ...]) -> Any:
    """``node`` resolved as Hydra will resolve it; an interpolation that does not resolve now is
    refused where it is a name Hydra would call (``_checked_unresolved``)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if not isinstance(node, (DictConfig, ListConfig)):
        return node
    try:
        return OmegaConf.to_container(node, resolve=True)
    except Exception:  # an interpolation of a runtime value: check the raw text instead
        raw = OmegaConf.to_container(node, resolve=False)
        for where, key, value in _items(raw, path):
            if key in ("_target_", "()", "class", "filename") and isinstance(value, str) and "${" in value:
                refuse(where, value, "is an interpolation that cannot be resolved before the run, where Hydra "
                       "calls or opens what it names")
        return raw


def _run_folder(cfg: Any, multirun: bool) -> Path:
    from omegaconf import OmegaConf

    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    try:
        folder = OmegaConf.select(cfg, key)
    except Exception:
        folder = OmegaConf.select(cfg, key, throw_on_resolution_failure=False) or "."
    return Path(os.path.abspath(os.path.expanduser(str(folder))))


def _inside(path: Path, folder: Path) -> bool:
    path, folder = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    return path == folder or folder in path.parents


def _searchpath_folder(entry: str) -> Path:
    if entry.startswith("file://"):
        return Path(os.path.abspath(os.path.expanduser(entry[len("file://"):])))
    return Path("/nonexistent-outside") / entry  # pkg:// and other schemes: outside the project's configs


class _Refuser:
    """Raise the one-line ``ConfigError`` for a key: its path, value, why, and where it came from."""

    def __init__(self, cfg: Any, app: Any, name: str, overrides: Sequence[str]):
        self.cfg, self.app, self.name, self.overrides = cfg, app, name, list(overrides)

    def __call__(self, path: Sequence[str], value: Any, why: str, fix: str = _FIX) -> None:
        key = ".".join(path)
        raise ConfigError(f"{key}={value} {why} ({self.origin(tuple(path))}); {fix}")

    def origin(self, path: Tuple[str, ...]) -> str:
        """The override that set ``path`` (or chose its group), else the file the defaults list took it from."""
        dotted = ".".join(path)
        for raw in reversed(self.overrides):
            key = raw.lstrip("+~").split("=", 1)[0].strip().replace("/", ".")
            if key and (dotted == key or dotted.startswith(key + ".")):
                return f"from the override {raw}"
        found = self._file(path)
        return f"from {found}" if found else "from the composed configuration"

    def _file(self, path: Tuple[str, ...]) -> Optional[str]:
        try:  # Hydra's own defaults list: the deepest package that holds the key and declares it
            from hydra._internal.defaults_list import create_defaults_list
            from hydra.types import RunMode

            loader = self.app.config_loader
            parsed, repo = loader._parse_overrides_and_create_caching_repo(self.name, self.overrides)
            defaults = create_defaults_list(repo=repo, config_name=self.name, overrides_list=parsed,
                                            prepend_hydra=True, skip_missing=True).defaults
            for d in sorted(defaults, key=lambda d: -len(d.package or "")):
                package = tuple((d.package or "").split(".")) if d.package else ()
                if d.config_path is None or path[:len(package)] != package:
                    continue
                loaded = repo.load_config(d.config_path)
                node: Any = loaded.config if loaded is not None else None
                for part in path[len(package):]:
                    node = node.get(part) if hasattr(node, "get") else None
                if node is not None:
                    folder = loaded.path[len("file://"):] if loaded.path.startswith("file://") else loaded.path
                    return f"{folder}/{d.config_path}.yaml"
        except Exception:  # a best effort: the key and value are named anyway
            return None
        return None
