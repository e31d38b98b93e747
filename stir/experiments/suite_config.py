"""The config of experiment kind ``suite`` (``stir.experiments.suite``) and its parts, each typed by its
own kind's config dataclass (``KIND_CONFIGS``), torch-free: the models a suite names are read without
the application; the kinds' checks of the parts are ``stir.experiments.suite.part_configs``."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

from omegaconf import OmegaConf

from stir.config.store import to_dataclass
from stir.config.validate import ConfigError
from stir.experiments.schema import KIND_CONFIGS, ExperimentConfig, kind_config, once

OWN = ("layers", "iri")  # settings a part may set for itself


@kind_config("suite")
@dataclass
class SuiteConfig(ExperimentConfig):
    """experiment kind ``suite``: {part name: {kind: ..., <that kind's fields>, layers: {...}, iri: ...}}."""

    parts: Dict[str, Any] = field(default_factory=dict)

    def model_names(self, common: Any = None) -> List[str]:
        return once(m for part, _ in typed_parts(self).values() for m in part.model_names(common))


def typed_parts(cfg: SuiteConfig) -> Dict[str, Tuple[Any, Dict[str, Any]]]:
    """{part: (its config as its kind's dataclass, not yet checked by the kind; its own settings, ``OWN``,
    as given)}."""
    out = {}
    for name, given in cfg.parts.items():
        given = dict(given)
        kind_name = given.get("kind")
        if kind_name in (None, "suite"):
            raise ConfigError(f"experiment.parts.{name}: give the kind of the part (any kind but suite)")
        if kind_name not in KIND_CONFIGS:
            raise ConfigError(f"experiment.parts.{name}.kind={kind_name!r} is not a valid choice; choose one of "
                              f"{sorted(KIND_CONFIGS)}")
        config = KIND_CONFIGS[kind_name]
        own = {key: given.pop(key) for key in OWN if key in given}
        node = OmegaConf.merge(OmegaConf.structured(config), {"name": name, **given})
        out[name] = (to_dataclass(node, config, prefix=f"experiment.parts.{name}."), own)
    return out
