"""Settings of the inversion engine (``stir.inversion``): one small dataclass, ``InversionConfig``.

Two modes share every field that is not about the optimiser:

* ``faithful``: the published STIR procedure (Nanda et al., ICML 2022, official code): 1000 steps of
  fixed L2 length 0.5 along the per-image normalized gradient, clamp to [0, 1] after every step, the
  best iterate per image kept, no early stopping.
* ``fast`` (default): per-image Adam on the gradient with an inverse-time decayed learning rate
  (lr / (1 + t / decay_steps): no horizon, so a larger step budget never slows the first steps),
  the best iterate per image, per-image early stopping once the relative residual meets
  ``tolerance``, bf16 autocast and channels-last on CUDA. ``bench/bench_inversion.py`` measures
  the two modes and the alternatives (bench/README.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from stir.inversion.seeds import SEED_KINDS

MODES = ("fast", "faithful")
PRECISIONS = ("auto", "32", "bf16", "16")
SCHEDULES = ("inverse_time", "cosine", "constant")

# Steps each mode takes when ``steps`` is None: the published 1000, and the fast mode's budget.
DEFAULT_STEPS = {"faithful": 1000, "fast": 300}


@dataclass
class InversionConfig:
    """How identically represented inputs (IRIs) are made; see ``stir.inversion.invert``."""

    mode: str = "fast"  # fast | faithful
    steps: Optional[int] = None  # most gradient steps per image; None: 1000 (faithful) / 300 (fast)
    step_size: float = 0.5  # faithful: L2 length of every step (the published 0.5)
    lr: float = 0.2  # fast: Adam's initial learning rate (about the first step per pixel; images in [0, 1])
    betas: Tuple[float, float] = (0.9, 0.99)  # fast: Adam's moment decay rates
    schedule: str = "inverse_time"  # fast: inverse_time | cosine (to 0 at `steps`) | constant
    decay_steps: float = 20.0  # fast, inverse_time: lr_t = lr / (1 + (t - 1) / decay_steps)
    tolerance: float = 0.02  # relaxed-IRI delta: x' is an IRI when ||m1(x')-m1(x)|| / ||m1(x)|| <= delta
    early_stop: bool = True  # fast: stop an image once its residual <= stop_fraction * tolerance
    stop_fraction: float = 0.9  # margin for the fp32 re-measurement of mixed-precision residuals
    seed_kind: str = "normal"  # normal | uniform | shared_normal | white | black | reversed
    seed: int = 0  # seeds the CPU generator that draws the noise seeds
    normalize_residual: bool = True  # objective ||.|| / ||m1(x)|| (official code); False: absolute
    # Adversarial IRIs: w scales the push on m2 once x' is an IRI (the switching objective of
    # stir.inversion.objectives; the IRI bound is stop_fraction * tolerance). Measured on two
    # profile=cpu vanilla ResNet18s (32 test images, 150 steps, bench/bench_adversarial.py): IRIs
    # 81% for every w (as arbitrary IRIs), m2 pushed 2.4x / 3.2x / 2.8x further than by arbitrary
    # IRIs at w = 0.1 / 1 / 3.
    adversarial_weight: float = 1.0
    batch_size: int = 1000  # images optimised together (each independently: only memory and speed)
    cache_dir: Optional[str] = None  # on-disk cache of finished inversions; None: no cache
    precision: str = "auto"  # auto (bf16 on CUDA, 32 elsewhere) | 32 | bf16 | 16: the models' forward
    channels_last: bool = True  # CUDA only: feed images in channels-last memory format
    warn_below: float = 0.9  # log a warning when the fraction of IRIs is below this
    progress: bool = False  # tqdm bar over batches

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"inversion.mode must be one of {MODES}, got {self.mode!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"inversion.precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.seed_kind not in SEED_KINDS:
            raise ValueError(f"inversion.seed_kind must be one of {SEED_KINDS}, got {self.seed_kind!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"inversion.schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.steps is not None and self.steps < 0:
            raise ValueError(f"inversion.steps must be >= 0, got {self.steps}")
        if self.adversarial_weight <= 0:
            raise ValueError(f"inversion.adversarial_weight must be > 0, got {self.adversarial_weight}")
        if self.batch_size < 1:
            raise ValueError(f"inversion.batch_size must be >= 1, got {self.batch_size}")
        if self.decay_steps <= 0:
            raise ValueError(f"inversion.decay_steps must be > 0, got {self.decay_steps}")
        if not 0 < self.stop_fraction <= 1:
            raise ValueError(f"inversion.stop_fraction must be in (0, 1], got {self.stop_fraction}")
        self.betas = tuple(self.betas)  # YAML gives a list

    @property
    def num_steps(self) -> int:
        """Gradient steps per image: ``steps``, or the mode's default."""
        return self.steps if self.steps is not None else DEFAULT_STEPS[self.mode]
