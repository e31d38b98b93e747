"""The config of experiment kind ``layer_matching`` (``stir.experiments.layer_matching``), torch-free."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List

from stir.experiments.schema import ExperimentConfig, kind_config, once


@kind_config("layer_matching")
@dataclass
class LayerMatchingConfig(ExperimentConfig):
    """experiment kind ``layer_matching``: seed models in ``models``, taps in ``layers``."""

    models: List[str] = field(default_factory=list)
    measures: List[str] = field(default_factory=list)  # [] = every registered measure (+ rbf_cka_0.8)
    stir: bool = True  # STIR grids too: arbitrary IRIs of every tap of every model (measure, k, inversion)

    def model_names(self, common: Any = None) -> List[str]:
        return once(self.models)
