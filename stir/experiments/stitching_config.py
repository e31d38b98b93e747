"""The config of experiment kind ``stitching`` (``stir.experiments.stitching``), torch-free."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, List, Optional

from stir.experiments.schema import ExperimentConfig, kind_config, once

if TYPE_CHECKING:
    from stir.stitching import StitchSettings


@kind_config("stitching")
@dataclass
class StitchingConfig(ExperimentConfig):
    """experiment kind ``stitching``: how stitching layers are fitted and tested (``stir.stitching``)."""

    pairs: List[List[str]] = field(default_factory=list)  # [[A, B], ...]: both directions of each
    kinds: List[str] = field(default_factory=lambda: ["identity", "linear", "g_relu"])  # identity | linear | g_relu | orthogonal
    seeds: List[int] = field(default_factory=lambda: [0, 1])  # stitching seeds (training subset, batch order)
    epochs: int = 3  # passes of Adam over the training images
    batch_size: int = 128  # training batches of S
    eval_batch_size: int = 500  # statistics and test accuracy (no effect on the numbers)
    lr: float = 0.01
    train_images: Optional[int] = None  # per seed, drawn from the back model's training split (None: all)
    test_images: Optional[int] = None  # the first N of the fixed-order test split (None: all)
    init: str = "match"  # match (least squares / Hungarian / Procrustes) | identity

    def model_names(self, common: Any = None) -> List[str]:
        return once(m for pair in self.pairs for m in pair)

    def settings(self) -> "StitchSettings":
        from stir.stitching import StitchSettings  # torch: not needed to check a command line

        return StitchSettings(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr,
                              train_images=self.train_images, init=self.init)
