"""What ``python evaluate.py OVERRIDES`` would measure, for use from Python.

    from stir.experiments.library import open_evaluation
    from stir.measure import evaluate_pair

    ev = open_evaluation("profile=cpu")                # the command line's key=value overrides
    m1, m2 = ev.model("vanilla"), ev.model("vanilla_s1")
    r = evaluate_pair(m1.module, m2.module, ev.images(m1), estimator=ev.estimator, run=ev.run,
                      names=(m1.label, m2.label))

``open_evaluation`` composes the same configuration files with the same overrides and returns the
same ``Context`` the command builds: its zoo (names, run folders, shipped weights), its images X
(``n`` images of ``split`` chosen by ``image_seed``), its ``Estimator`` and its ``ExecutionConfig``
(the inversion cache under ``out_dir``). A library call with them gives the command's numbers: only
the results store and the report are the command's own.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from stir.experiments.config import compose_evaluate
from stir.experiments.context import Context, open_context

REPO = Path(__file__).resolve().parents[2]  # the repository root: configs/ and zoo/ beside stir/


def open_evaluation(*overrides: str, repo: Optional[Path] = None) -> Context:
    """The ``Context`` (zoo, X, estimator, execution) of ``python evaluate.py *overrides``.

    ``repo``: the repository whose ``configs/`` and ``zoo/`` are read (default: this package's). The
    overrides are checked as on the command line: an unknown key raises ``ConfigError`` naming it.
    """
    root = Path(repo) if repo is not None else REPO
    config, experiment = compose_evaluate(root / "configs" / "evaluate", list(overrides))
    return open_context(config, experiment, repo=root)
