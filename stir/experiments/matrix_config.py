"""The config of experiment kind ``matrix`` (``stir.experiments.matrix``), torch-free."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List

from stir.experiments.schema import AtIRIsFields, ExperimentConfig, kind_config, once


@kind_config("matrix")
@dataclass
class MatrixConfig(ExperimentConfig, AtIRIsFields):
    """experiment kind ``matrix``: every ordered pair of ``models``."""

    models: List[str] = field(default_factory=list)
    # {model: its seed twin}; the diagonal compares a model with its twin, not with itself
    seed_twins: Dict[str, str] = field(default_factory=dict)

    def model_names(self, common: Any = None) -> List[str]:
        return once([*self.models, *self.seed_twins.values()])
