"""What ``evaluate.py`` checks before torch, the data and the models are loaded (issue 69): that the data
file it names exists and that every model it names can be found (a zoo name, an existing path, a
registered source; a real network's weights on disk). Each problem is one ``ConfigError`` line, so a
misspelt name or a missing file costs a second, not the minute of imports and data decoding after
which the same mistake used to be found. Imports nothing heavy: the composed config (Hydra,
OmegaConf), the kinds' config dataclasses and ``stir.config.model_names``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Sequence

from omegaconf import DictConfig, OmegaConf

from stir.config import ConfigError
from stir.config import model_names
from stir.config.store import compose, to_dataclass
from stir.experiments.schema import KIND_CONFIGS


def check_command(argv: Sequence[str], command: Any, repo: Path) -> None:
    """``check`` on evaluate.py's command line (``command``: its ``stir.config.argv.Command``), a problem as
    ``error: <line>`` and exit status 2; a sweep, another config or ``--help`` is left to Hydra."""
    from stir.cli import one_line_errors
    from stir.config.argv import parse

    line = parse(argv)
    if line.other_config or line.multirun or line.introspection or line.wants_help:
        return
    with one_line_errors(ConfigError):
        check(command.config_dir, command.config_name, [o.raw for o in line.overrides if not o.key.startswith("hydra")],
              repo)


def check(config_dir: Path, config_name: str, overrides: Sequence[str], repo: Path) -> None:
    """``ConfigError`` (one line) for the first data file or model that the composed command names and
    that is not there; nothing when all are (the loaders then check the rest: a checkpoint's contents,
    a library's model names)."""
    cfg = compose(config_dir, config_name, list(overrides))
    source = cfg.data.get("source")
    if source is not None and not Path(str(source)).expanduser().exists():
        raise ConfigError(f"data.source={source} does not exist (resolved: {Path(str(source)).expanduser().resolve()}); "
                          "give the path of the CIFAR-10 copy (an image folder or a .tar.gz of one: README.md, PATH), "
                          "or leave data.source out to use torchvision's CIFAR files under data.root")
    zoo_file = Path(str(cfg.zoo.file))
    zoo_file = zoo_file if zoo_file.is_absolute() else repo / zoo_file
    zoo = _zoo_entries(zoo_file)
    if zoo is None:
        return  # an unreadable zoo file: the zoo says so in its own words
    given = {cfg.ref: cfg.get("weights_ref"), cfg.target: cfg.get("weights_target")}  # a release file given as weights
    for name in names(cfg):
        if given.get(name):
            continue
        said = model_names.problem(name, zoo, zoo_file, cfg.zoo.get("weights_root"))
        if said is not None:
            raise ConfigError(said)


def names(cfg: DictConfig) -> List[str]:
    """The model names the composed evaluation measures (its kind's ``model_names``)."""
    kind = KIND_CONFIGS.get(str(cfg.experiment.kind))
    if kind is None:
        return []
    try:
        experiment = to_dataclass(cfg.experiment, kind, prefix="experiment.")
    except ConfigError:
        return []  # the experiment's own check says what is wrong with it
    return [str(n) for n in experiment.model_names(cfg)]


def _zoo_entries(path: Path) -> Dict[str, Any] | None:
    try:
        raw = OmegaConf.to_container(OmegaConf.load(path))
    except Exception:  # a missing or malformed zoo file: stir.zoo.recipes.read_zoo_file names the line and the fix
        return None
    return raw if isinstance(raw, dict) else None
