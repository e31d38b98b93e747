"""The experiment registry: every built-in kind is there with its config, and an unknown kind lists the choices."""
import dataclasses
from pathlib import Path

import pytest

from stir.config.validate import ConfigError
from stir.experiments import kinds, registry
from stir.experiments.config import ExperimentConfig, compose_evaluate

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "evaluate"


def test_builtin_kinds_are_registered():
    # known members, never the exact set: a new kind (one module) passes here without an edit
    assert {"pair", "pairs", "matrix", "incremental", "stitching", "layer_matching", "grounding", "invariance", "suite",
            "paper"} <= set(kinds())


# Every registered kind (the registry lists itself: a new kind's module is picked up here).
@pytest.mark.parametrize("name", kinds())
def test_each_kind_is_registered_with_the_config_declared_for_it(name):
    from stir.experiments.schema import KIND_CONFIGS

    kind = registry.get(name)
    assert callable(kind.run) and callable(kind.units) and callable(kind.check) and callable(kind.report_name)
    assert issubclass(kind.config, ExperimentConfig)  # name, kind, description, compute, then its own fields
    assert KIND_CONFIGS[name] is kind.config and kind.config.kind_name == name  # what the command line checks
    assert kind.config.__module__ == f"{kind.run.__module__}_config"  # beside the kind's code (torch-free)
    assert kind.models(kind.config(name="x", kind=name)) == []  # an empty config names no model


@pytest.mark.parametrize("name", kinds())
def test_each_kind_has_a_preset(name):
    """Every kind has at least one preset in configs/evaluate/experiment/ (docs/presets.md renders them)."""
    import yaml

    presets = [yaml.safe_load(p.read_text())["experiment"]["kind"] for p in (CONFIGS / "experiment").glob("*.yaml")]
    assert name in presets


def test_each_preset_is_typed_by_its_kinds_config():
    for preset in sorted(p.stem for p in (CONFIGS / "experiment").glob("*.yaml")):
        _, experiment = compose_evaluate(CONFIGS, [f"experiment={preset}"])
        assert isinstance(experiment, registry.get(experiment.kind).config), preset
        assert experiment.name == preset


def test_kind_configs_hold_only_their_own_keys():
    fields = {name: {f.name for f in dataclasses.fields(registry.get(name).config)} for name in kinds()}
    base = {f.name for f in dataclasses.fields(ExperimentConfig)}
    at_iris = {"at_iris", "at_iris_steps", "at_iris_level", "at_iris_draws"}  # beside the published value (issue 53)
    assert fields["pair"] - base == at_iris and fields["pairs"] - base == at_iris | {"pairs"}
    assert fields["matrix"] - base == at_iris | {"models", "seed_twins"}
    assert "seeds" in fields["stitching"] and "seeds" not in fields["grounding"]


def test_unknown_kind_lists_the_choices():
    with pytest.raises(ConfigError, match="choose one of .*matrix"):
        registry.get("no_such_kind")


def test_a_key_of_another_kind_is_refused():
    with pytest.raises(Exception, match="experiment.seeds"):
        compose_evaluate(CONFIGS, ["experiment=seeds", "experiment.seeds=[0]"])


def test_registering_a_different_runner_twice_is_refused():
    from stir.experiments.schema import KIND_CONFIG, kind_config

    config = kind_config("_test_kind")(dataclasses.make_dataclass("TestKindConfig", [], bases=(ExperimentConfig,)))
    registry.register(registry.Kind("_test_kind", config, lambda c, e: None, lambda c, e: []))
    try:
        with pytest.raises(ValueError, match="registered twice"):
            registry.register(registry.Kind("_test_kind", config, lambda c, e: 1, lambda c, e: []))
    finally:
        registry.KINDS.remove("_test_kind")
        KIND_CONFIG.remove("_test_kind")


def test_a_kind_whose_config_is_not_declared_for_it_is_refused():
    with pytest.raises(ValueError, match=r"config ExperimentConfig is declared for None; declare it with "
                                         r"@kind_config\('_undeclared'\)"):
        registry.register(registry.Kind("_undeclared", ExperimentConfig, lambda c, e: None, lambda c, e: []))
    assert "_undeclared" not in kinds()


def test_the_docs_kinds_table_reads_every_registered_kind():
    """docs/presets.md's kinds table (docs/hooks/registries.py, read from the source) lists the registry's kinds."""
    import importlib.util

    from stir.experiments.schema import KIND_CONFIGS

    spec = importlib.util.spec_from_file_location("registries_hook", CONFIGS.parents[1] / "docs/hooks/registries.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    read = {e["name"]: e for e in hook.kinds()}
    assert sorted(read) == kinds()
    for name in kinds():
        kind = registry.get(name)
        assert read[name]["config"] == KIND_CONFIGS[name].__name__
        assert f"stir.experiments.{read[name]['config_module']}" == KIND_CONFIGS[name].__module__, name
        assert f"stir.experiments.{read[name]['module']}" == kind.run.__module__, name
