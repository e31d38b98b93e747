"""The config of experiment kind ``invariance`` (``stir.experiments.invariance``), torch-free."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List

from stir.experiments.schema import ExperimentConfig, kind_config, once


@kind_config("invariance")
@dataclass
class InvarianceConfig(ExperimentConfig):
    """experiment kind ``invariance`` (G-EED, Kvinge et al. 2022): models in ``models``, taps in ``layers``."""

    models: List[str] = field(default_factory=list)
    transforms: List[str] = field(default_factory=lambda: [
        "hflip", "shift1", "shift2", "shift3", "shift4", "rot90", "rot180", "rot270", "brightness", "grayscale"])
    distances: List[str] = field(default_factory=lambda: ["euclidean", "cosine"])
    noise: List[float] = field(default_factory=lambda: [0.0, 0.05, 0.1])  # Gaussian input noise levels
    random_init: bool = True  # add an untrained network of the first model's architecture

    def model_names(self, common: Any = None) -> List[str]:
        return once(self.models)
