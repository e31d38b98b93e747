"""What the entry points share: a mistake in the command prints one line, not a traceback; the
command line is checked against the schema before Hydra reads it (``check_command_line``)."""
from __future__ import annotations

import logging
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, List, Mapping, Sequence, Tuple, Type

log = logging.getLogger("stir")


@contextmanager
def one_line_errors(*errors: Type[BaseException]) -> Iterator[None]:
    """Turn ``errors`` (the user's to fix: a bad key, a refused run folder) into ``error: <message>`` and exit 2.

    ``HYDRA_FULL_ERROR=1`` lets them through with the full traceback, as Hydra does for its own errors.
    """
    caught: Tuple[Type[BaseException], ...] = tuple(errors)
    try:
        yield
    except caught as err:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"error: {err}", file=sys.stderr)
        print("(HYDRA_FULL_ERROR=1 shows where it was raised)", file=sys.stderr)
        sys.exit(2)


@dataclass(frozen=True)
class Command:
    """What an entry point's command line is checked against before Hydra composes it.

    ``tree``: (the parsed command line) -> the schema tree (``stir.config.argv.schema_tree``), so that
    a field typed by a choice (evaluate.py's ``experiment``) gets the chosen one's fields;
    ``groups``: {group: choices}; ``moved``: old key -> where it is now; ``help``: the ``--help`` text.
    """

    config_dir: Path
    config_name: str
    tree: Callable[[Any], Mapping[str, Any]]
    groups: Mapping[str, Sequence[str]]
    help: Callable[[], str]
    moved: Mapping[str, str] = field(default_factory=dict)


def check_command_line(argv: Sequence[str], command: Command) -> None:
    """``--help`` from the schema; an unknown key, preset or value as one line and exit 2, before Hydra.

    Keys and group choices are checked against the schema (close matches, moved keys: ``stir.config.argv``);
    then the overrides are composed once, so that a value of the wrong type is one line too. A sweep
    (``-m``) is composed by Hydra itself; ``--config-name`` and the like skip the check.
    """
    from stir.config import ConfigError
    from stir.config.argv import check_overrides, parse

    line = parse(argv)
    if line.other_config:
        return
    if line.wants_help:
        print(command.help(), end="")
        sys.exit(0)
    with one_line_errors(ConfigError):
        check_overrides(line, command.tree(line), command.groups, command.moved)
        if not line.multirun and not line.introspection:
            _trial_compose(command, [o.raw for o in line.overrides if not o.key.startswith("hydra")])


def _trial_compose(command: Command, overrides: List[str]) -> None:
    """Compose the config as Hydra will; its error (a value of the wrong type ...) as one ConfigError."""
    from stir.config import ConfigError
    from stir.config.store import compose

    try:
        compose(command.config_dir, command.config_name, overrides)
    except Exception as err:  # Hydra's and OmegaConf's composition errors, whatever their class
        messages, e = [], err
        while e is not None:
            text = str(e).strip()
            first = text.splitlines()[0].strip() if text else ""
            if first and first not in messages:
                messages.append(first)
            e = e.__cause__ or (e.__context__ if not e.__suppress_context__ else None)
        raise ConfigError(": ".join(messages) or type(err).__name__) from err
