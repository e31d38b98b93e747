"""The config of experiment kind ``grounding`` (``stir.experiments.grounding``), torch-free."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List

from stir.experiments.schema import ExperimentConfig, kind_config, once


@kind_config("grounding")
@dataclass
class GroundingConfig(ExperimentConfig):
    """experiment kind ``grounding`` (Ding et al. 2021): seed models in ``models``, taps in ``layers``."""

    models: List[str] = field(default_factory=list)
    measures: List[str] = field(default_factory=list)  # [] = every registered measure (+ rbf_cka_0.8)
    n_probe: int = 1000  # held-out images: linear probes (half train, half score) and the measures
    pc_ks: List[int] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32])  # k PCs deleted
    pc_order: str = "top"  # top (largest variance first) | bottom (smallest nonzero variance first)
    robustness_models: List[str] = field(default_factory=list)  # the OOD axis: every pair of these ([] = skip)
    stir: bool = True  # STIR (both directions) for the depth pairs of two models and the robustness pairs
    n_boot: int = 1000  # bootstrap resamples of the rank correlation

    def model_names(self, common: Any = None) -> List[str]:
        return once([*self.models, *self.robustness_models])
