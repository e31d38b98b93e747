"""The experiment registry: every built-in kind is there with its config, and an unknown kind lists the choices."""
import dataclasses
from pathlib import Path

import pytest

from stir.config.validate import ConfigError
from stir.experiments import kinds, registry
from stir.experiments.config import ExperimentConfig, compose_evaluate

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "evaluate"


def test_builtin_kinds_are_registered_with_their_own_config():
    assert set(kinds()) == {"pair", "pairs", "matrix", "incremental", "stitching", "layer_matching", "grounding", "invariance", "suite", "paper"}
    for name in kinds():
        kind = registry.get(name)
        assert callable(kind.run) and callable(kind.units) and callable(kind.check)
        assert issubclass(kind.config, ExperimentConfig)  # name, kind, description, compute, then its own fields


def test_each_preset_is_typed_by_its_kinds_config():
    for preset in sorted(p.stem for p in (CONFIGS / "experiment").glob("*.yaml")):
        _, experiment = compose_evaluate(CONFIGS, [f"experiment={preset}"])
        assert isinstance(experiment, registry.get(experiment.kind).config), preset
        assert experiment.name == preset


def test_kind_configs_hold_only_their_own_keys():
    fields = {name: {f.name for f in dataclasses.fields(registry.get(name).config)} for name in kinds()}
    base = {f.name for f in dataclasses.fields(ExperimentConfig)}
    assert fields["pair"] - base == {"at_iris", "at_iris_steps"}  # STIR at IRIs beside the published value (issue 53)
    assert fields["matrix"] - base == {"models", "seed_twins"}
    assert "seeds" in fields["stitching"] and "seeds" not in fields["grounding"]


def test_unknown_kind_lists_the_choices():
    with pytest.raises(ConfigError, match="choose one of .*matrix"):
        registry.get("no_such_kind")


def test_a_key_of_another_kind_is_refused():
    with pytest.raises(Exception, match="experiment.seeds"):
        compose_evaluate(CONFIGS, ["experiment=seeds", "experiment.seeds=[0]"])


def test_registering_a_different_runner_twice_is_refused():
    registry.register(registry.Kind("_test_kind", ExperimentConfig, lambda c, e: None, lambda c, e: []))
    try:
        with pytest.raises(ValueError, match="registered twice"):
            registry.register(registry.Kind("_test_kind", ExperimentConfig, lambda c, e: 1, lambda c, e: []))
    finally:
        registry._KINDS.pop("_test_kind")
