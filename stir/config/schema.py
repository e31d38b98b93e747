"""The typed configuration schema: one small dataclass per component.

Hydra composes YAML presets (``configs/``) over these dataclasses, so an unknown key or a value of
the wrong type fails before any work starts. Each component receives only its own config
(``DataConfig`` for the data module, ``ModelConfig`` for the network ...), never the whole tree.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class ImagesConfig:
    """Where the images come from and how the training set is split: what selects an image, and all
    that evaluation reads (``evaluate.py``'s ``data`` group; training adds ``DataConfig``'s batching
    and augmentation)."""

    name: str = "cifar10"  # cifar10 | cifar100: picks the torchvision data set and the class count
    root: str = "data"  # torchvision download / decoded-tensor cache directory
    source: Optional[str] = None  # local image-folder tree or tar(.gz) of one; overrides torchvision
    download: bool = True  # let torchvision download into `root` when the files are missing
    num_classes: int = 10
    holdout_size: int = 5000  # fixed validation split taken from the training set
    train_size: Optional[int] = None  # nested training subset of the rest; None = all of it
    data_seed: int = 0  # fixes the holdout split and the nesting order of training subsets

    def for_loading(self) -> "DataConfig":
        """The ``DataConfig`` the data module takes: these fields, the training-only ones at their defaults
        (no image it selects depends on them)."""
        return DataConfig(**dataclasses.asdict(self))


@dataclass
class DataConfig(ImagesConfig):
    """Where the images come from (``ImagesConfig``) and how they are batched and augmented for training."""

    # The global training batch: one optimiser step sees batch_size images whatever the number of
    # processes (each of W DDP processes takes batch_size / W of them; see StirDataModule).
    batch_size: int = 128
    eval_batch_size: int = 500  # per process
    augment: bool = True  # random crop (crop_padding pixels each side) + horizontal flip, batched on device
    crop_padding: int = 4  # the random crop translates each image by up to this many pixels
    padding_mode: str = "zeros"  # zeros | reflect: what the crop sees beyond the border (airbench: reflect)
    flip: bool = True  # mirror each training image with probability 1/2
    # The whole uint8 training split on the training device, shuffled and augmented there in batches
    # from a generator seeded by (seed, epoch) (stir.data.device_loader): no DataLoader, no host copy
    # per batch. The same augmentation distribution as the default path, other random draws.
    device_resident: bool = False


@dataclass
class ModelConfig:
    """Which registered architecture to build and how wide."""

    arch: str = "resnet18"  # resnet18 | resnet34 | vgg16 | vgg19 (see stir.models.names())
    width: int = 64  # channels of the first stage; 64 is the standard network


@dataclass
class AttackConfig:
    """PGD in an l_p ball around clean images in [0, 1]."""

    norm: str = "l2"
    eps: float = 1.0
    steps: int = 10
    # None: 2.5 * eps / steps (Madry et al.); torchattacks' own default (2 * eps / steps) is not used.
    step_size: Optional[float] = None
    random_start: bool = True
    # How the attack is computed, not what it computes (rounding only; not part of a run's recipe):
    # during training the attack differentiates a copy of the network's eval-mode function
    # (stir.attacks.AttackNetwork, refreshed every step) with batch norm folded into the preceding
    # convolutions and / or in channels-last memory (CPU too: only input gradients run on the copy,
    # the trained network keeps trainer.channels_last). Both off: the network itself is attacked.
    fold_batch_norm: bool = True
    channels_last: bool = True

    @property
    def alpha(self) -> float:
        return self.step_size if self.step_size is not None else 2.5 * self.eps / self.steps


@dataclass
class LossConfig:
    """The training objective: ``name`` is a registered loss (``stir.training.losses``; ``train.py --help`` lists them)."""

    name: str = "vanilla"
    beta: float = 1.0  # TRADES / MART regulariser weight (STIR paper, appendix B)
    # Szegedy et al. 2016: the cross-entropy terms of the objective (never the attacks') against
    # (1 - s) * onehot(y) + s / C. 0 = the papers' objectives.
    label_smoothing: float = 0.0


@dataclass
class OptimConfig:
    """SGD with momentum and weight decay, one-cycle / cosine schedule."""

    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 5e-4
    nesterov: bool = True
    schedule: str = "cosine"  # cosine | onecycle | constant
    warmup_epochs: float = 0.0


@dataclass
class EmaConfig:
    """An exponential moving average of the network's weights (and batch-norm statistics).

    theta_ema <- d * theta_ema + (1 - d) * theta every ``every_n_steps`` optimiser steps, with
    d = min(decay, (1 + t) / (10 + t)) at update t (the short-run warm-up of TensorFlow's
    ExponentialMovingAverage). Validation, testing and the run's weights.pt use the average.
    """

    decay: Optional[float] = None  # None: no average; the network itself is evaluated and saved
    every_n_steps: int = 1


@dataclass
class RobustCheckConfig:
    """Wong et al. 2020's guard against catastrophic overfitting of fast (one- or few-step) AT.

    After every training epoch, PGD-l2 (``eval_attack``'s eps, ``steps`` steps, 2.5 * eps / steps)
    attacks the first ``images`` training images (not augmented); when their robust accuracy falls
    more than ``max_drop`` below the best epoch's, training stops and the best epoch's weights are
    restored. The check draws from its own generator: it never moves the training's random streams.
    """

    images: int = 0  # 0: no check
    steps: int = 10
    max_drop: float = 0.2


@dataclass
class TrainerConfig:
    """Arguments passed to ``lightning.Trainer`` (plus when to measure robustness)."""

    max_epochs: int = 100
    accelerator: str = "auto"
    devices: Any = "auto"
    num_nodes: int = 1
    strategy: str = "auto"
    precision: str = "32-true"
    sync_batchnorm: bool = False
    deterministic: bool = False
    # NHWC activations on CUDA (what tensor cores want). On the CPU only with cpu_channels_last: it
    # was once seen to segfault in torch 2.14's CPU backward for a width-4 ResNet18 (not reproduced
    # since: the fast recipe's tests train width 4 channels-last under bf16 autocast).
    channels_last: bool = True
    # NHWC on the CPU as well (the fast recipe): faster CPU steps at width 16, most of all under bf16
    # autocast (bench/bench_train.py levers; docs/training.md).
    cpu_channels_last: bool = False
    compile: bool = False  # torch.compile the network (opt-in: minutes of compilation before the first step)
    # Clean val / test accuracy averaged over flipped (and 1-pixel translated) copies of each image:
    # none | flip | flip_translate. An evaluation option only: never applied to robust accuracy, to
    # the saved network, or to any representation STIR reads (evaluate.py sees the plain network).
    test_time_augmentation: str = "none"
    limit_train_batches: Optional[float] = None
    log_every_n_steps: int = 50
    enable_progress_bar: bool = True
    robust_val_every_n_epochs: int = 5  # 0 disables robust validation during training
    robust_val_size: int = 500  # validation images attacked for robust accuracy
    robust_test_size: int = 1000  # test images attacked at the end of training


@dataclass
class WandbConfig:
    mode: str = "offline"  # offline | online | disabled
    project: str = "stir"
    entity: Optional[str] = None
    log_model: bool = True  # train.py: the finished weights.pt as a W&B model artifact
    # evaluate.py: a rerun served entirely from the results store logs no new W&B run unless true
    log_cached: bool = False


@dataclass
class LoggerConfig:
    wandb: WandbConfig = field(default_factory=WandbConfig)
    csv: bool = True  # CSV log beside the W&B run: the ground truth for tests and scripts

    def without_wandb(self) -> "LoggerConfig":
        """The same settings with W&B disabled (a new object)."""
        return dataclasses.replace(self, wandb=dataclasses.replace(self.wandb, mode="disabled"))


@dataclass
class TrainConfig:
    """Everything ``python train.py`` reads."""

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    attack: AttackConfig = field(default_factory=AttackConfig)  # the training attack (AT, TRADES, MART)
    # Robust accuracy is always measured with PGD-l2 at eps=1.0 (20 steps), whatever the training attack.
    eval_attack: AttackConfig = field(default_factory=lambda: AttackConfig(eps=1.0, steps=20))
    optim: OptimConfig = field(default_factory=OptimConfig)
    ema: EmaConfig = field(default_factory=EmaConfig)
    robust_check: RobustCheckConfig = field(default_factory=RobustCheckConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    seed: int = 0  # initialisation, batch order, augmentation and the attacks' random starts
    # The recipe's name (configs/recipe/<name>.yaml): "paper" (the STIR paper's, the default) or
    # "fast"; any other than "paper" appears in the run folder (vanilla-fast/...).
    recipe_name: str = "paper"
    # A name for a recipe that moves one lever of its preset (loss.label_smoothing, optim.*,
    # data.batch_size, trainer.precision): it goes into the run folder (vanilla-fast-<variant>/...),
    # so that two variants of one preset never share a folder (the recipe ablation of configs/zoo.yaml).
    variant: str = ""
    runs_dir: str = "runs"  # where run folders go
    run_dir: Optional[str] = None  # None: runs_dir/<data>/<arch>[_w<width>]/<loss>[...]/seed<seed>
    init_from: Optional[str] = None  # warm start (a model update) from a checkpoint or run folder
    retrain: bool = False  # train again even if the run folder holds a finished run
