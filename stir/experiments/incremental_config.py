"""The config of experiment kind ``incremental`` (``stir.experiments.incremental``), torch-free."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List

from stir.experiments.schema import AtIRIsFields, ExperimentConfig, kind_config, once


@kind_config("incremental")
@dataclass
class IncrementalConfig(ExperimentConfig, AtIRIsFields):
    """experiment kind ``incremental``: {label: [m_1, m_2, ...]} chains ordered by training-set size."""

    chains: Dict[str, List[str]] = field(default_factory=dict)
    update: str = "scratch"  # scratch (each m_t from scratch, as the paper) | warm (m_t warm-started: <name>_warm)

    def model_names(self, common: Any = None) -> List[str]:
        return once(m for chain in self.chains.values() for m in chain)
