"""The one model type of an evaluation: what every experiment kind reads about a model."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from torch import nn

from stir.config.schema import DataConfig, TrainConfig


@dataclass
class Model:
    """A resolved model, whatever named it (zoo name, run folder, checkpoint, library source, factory).

    Attributes:
        label: short, unique within a report: the zoo name; for a run folder or checkpoint the
            recipe part of its path (``vanilla-n5000/seed0``); for a library source its model name,
            for ``python:`` the factory, each with the weights file's stem when one is given. Used in
            tables, titles and legends; file names use ``stir.reporting.report.slug`` of it.
        module: the network ([0, 1] images -> logits), eval mode, on the evaluation's device.
        identity: ``stir.models.identity.content_identity`` of the module: what names it in keys.
        record: provenance for reports and the store (source, run folder or file, train command,
            normalisation, taps, identity as ``sha256``).
        data: the data set its images X come from (its training data, or ``data=`` for models of
            other sources).
        train: the training recipe when this project trained it (None otherwise).
        metrics: test metrics of its run (``test/acc``, ``test/robust_acc``; empty when unknown).
    """

    label: str
    module: nn.Module
    identity: str
    record: Dict[str, Any]
    data: DataConfig
    train: Optional[TrainConfig] = None
    metrics: Dict[str, float] = field(default_factory=dict)
