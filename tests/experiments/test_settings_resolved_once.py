"""Settings resolved once (issue 56): ``evaluate_config`` fills in every budget that depends on another
setting (``inversion.steps`` by mode, ``difficulty.steps`` following it) as integers; the run's one
``Estimator`` is built from them and measured with as it is; the record is a plain copy of them."""
import ast
import dataclasses
import json

import pytest
import torch

from conftest import REPO
from stir.experiments.config import compose_evaluate
from stir.experiments.context import open_context
from stir.inversion.config import resolved_budgets
from stir.measure.plan import make_plan

CONFIGS = REPO / "configs" / "evaluate"


@pytest.mark.parametrize("overrides, steps, walk", [
    ([], 1000, 200),  # the published inversion walks 200
    (["inversion.mode=fast"], 300, 200),  # the fast mode's budget
    (["inversion.mode=iri"], 3000, 200),
    (["inversion.steps=20"], 20, 20),  # a short inversion walks as many as it steps
    (["difficulty.steps=7"], 1000, 7),  # a walk of its own is kept
    (["profile=cpu"], 150, 150),
])
def test_evaluate_config_returns_the_budgets_as_integers(overrides, steps, walk):
    cfg, _ = compose_evaluate(CONFIGS, overrides)
    assert (cfg.inversion.steps, cfg.difficulty.steps) == (steps, walk)
    assert resolved_budgets(cfg) is cfg  # resolving again changes nothing


def test_the_record_is_a_plain_copy_and_the_estimator_is_measured_with_as_built(tmp_path):
    cfg, experiment = compose_evaluate(CONFIGS, [f"out_dir={tmp_path}", "inversion.steps=40"])
    ctx = open_context(cfg, experiment, repo=REPO)
    record = ctx.config
    assert record["inversion"]["steps"] == 40 and record["difficulty"]["steps"] == 40
    assert record["inversion"] == json.loads(json.dumps(dataclasses.asdict(cfg.inversion)))  # a copy, nothing patched
    assert record["data"] == dataclasses.asdict(cfg.data)  # what selects the images: no training keys
    assert ctx.estimator.inversion == cfg.inversion and ctx.estimator.difficulty == cfg.difficulty
    plan = make_plan(torch.rand(2, 3, 8, 8), ctx.estimator)
    assert plan.estimator is ctx.estimator  # resolved once: the plan takes it as it is


def test_nothing_in_stir_writes_into_a_frozen_object():
    """``object.__setattr__`` on a frozen dataclass resolved settings behind its back (plan.py's walk)."""
    found = []
    for path in sorted((REPO / "stir").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Attribute) and node.attr == "__setattr__" and isinstance(node.value, ast.Name)
                    and node.value.id == "object"):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not found, found
