"""What ``python evaluate.py OVERRIDES`` would measure, for use from Python.

    from stir.experiments.library import open_evaluation

    ev = open_evaluation("profile=laptop data.source=PATH")   # the command line's key=value overrides
    m1, m2 = ev.model("vanilla"), ev.model("vanilla_s1")
    r = ev.pair(m1, m2)                                       # served from the results store when measured

``open_evaluation`` reads its overrides as the command line does (each string split like a shell
line, then checked against the same schema: an unknown key, preset or value raises ``ConfigError``
with the command's one line), composes the same configuration files and returns the same
``Context`` the command builds: its zoo (names, run folders, shipped weights), its images X (``n``
images of ``split`` chosen by ``image_seed``), its ``Estimator``, its ``ExecutionConfig`` and its
results store (``out_dir/store``, backed by the shipped results in ``zoo/store``). ``ev.pair``
gives the command's numbers from the same store (a pair the command measured, or that is shipped,
comes back in seconds); ``stir.measure.evaluate_pair(..., store=ev.store)`` does the same for any
``nn.Module``. Only the report is the command's own.
"""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import List, Optional, Sequence

from stir.config import ConfigError
from stir.experiments.config import compose_evaluate
from stir.experiments.context import Context, open_context

REPO = Path(__file__).resolve().parents[2]  # the repository root: configs/ and zoo/ beside stir/


def command_words(overrides: Sequence[str]) -> List[str]:
    """The overrides as the command line has them: each string split as a shell splits a line
    (``"profile=cpu data.source=/my data"`` -> two words only when quoted: ``data.source='/my data'``)."""
    words: List[str] = []
    for given in overrides:
        try:
            words += shlex.split(given)
        except ValueError as err:  # an unclosed quote
            raise ConfigError(f"overrides {given!r}: {err}; quote a value with spaces as on the command line") from None
    return words


def open_evaluation(*overrides: str, repo: Optional[Path] = None) -> Context:
    """The ``Context`` (zoo, X, estimator, execution, results store) of ``python evaluate.py *overrides``.

    ``overrides``: key=value strings, one or several per string (``"profile=cpu data.source=PATH"``).
    ``repo``: the repository whose ``configs/`` and ``zoo/`` are read (default: this package's). A bad
    override raises ``ConfigError`` with the line ``evaluate.py`` would print (a mistyped key names
    its close match), before anything is loaded.
    """
    from stir.cli import check_line
    from stir.config.argv import parse
    from stir.experiments.commands import evaluate_command
    from stir.experiments.schema import register_evaluate_configs

    register_evaluate_configs()  # the schema the trial composition types the overrides with
    root = Path(repo) if repo is not None else REPO
    words = command_words(overrides)
    line = parse(words)
    if line.wants_help or line.multirun or line.other_config:
        raise ConfigError(f"open_evaluation takes key=value overrides, not {' '.join(words)!r} (--help, -m and "
                          "--config-name are for the command line)")
    check_line(line, evaluate_command(root / "configs" / "evaluate"))
    config, experiment = compose_evaluate(root / "configs" / "evaluate", words)
    return open_context(config, experiment, repo=root)
