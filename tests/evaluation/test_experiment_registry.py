"""The experiment registry: every built-in kind is there, and an unknown kind lists the choices."""
import pytest

from stir.config.validate import ConfigError
from stir.evaluation.experiments import kinds, registry


def test_builtin_kinds_are_registered():
    assert {"pair", "pairs", "matrix", "incremental"} <= set(kinds())
    for name in kinds():
        kind = registry.get(name)
        assert callable(kind.run) and callable(kind.units)


def test_unknown_kind_lists_the_choices():
    with pytest.raises(ValueError, match="choose one of .*matrix"):
        registry.get("no_such_kind")


def test_config_rejects_an_unknown_kind(tmp_path):
    from pathlib import Path

    from stir.config.evaluate_store import compose_evaluate

    configs = Path(__file__).resolve().parents[2] / "configs" / "evaluate"
    with pytest.raises(ConfigError, match="experiment.kind"):
        compose_evaluate(configs, ["experiment.kind=no_such_kind"])


def test_registering_a_different_runner_twice_is_refused():
    registry.register("_test_kind", lambda s: None, lambda s: [])
    try:
        with pytest.raises(ValueError, match="registered twice"):
            registry.register("_test_kind", lambda s: 1, lambda s: [])
    finally:
        registry._KINDS.pop("_test_kind")
