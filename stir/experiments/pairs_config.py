"""The configs of experiment kinds ``pair`` and ``pairs`` (``stir.experiments.pairs``), torch-free."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List

from stir.experiments.schema import AtIRIsFields, ExperimentConfig, kind_config, once


@kind_config("pair")
@dataclass
class PairConfig(ExperimentConfig, AtIRIsFields):
    """experiment=pair: ref (m1) vs target (m2), the top-level ``ref`` and ``target``."""

    def model_names(self, common: Any = None) -> List[str]:
        return [] if common is None else once([common.ref, common.target])  # the top-level ref and target


@kind_config("pairs")
@dataclass
class PairsConfig(ExperimentConfig, AtIRIsFields):
    """experiment kind ``pairs``: each [ref, target] of ``pairs``."""

    pairs: List[List[str]] = field(default_factory=list)

    def model_names(self, common: Any = None) -> List[str]:
        return once(m for pair in self.pairs for m in pair)
