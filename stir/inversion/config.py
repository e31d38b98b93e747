"""Settings of the inversion engine (``stir.inversion``): one small dataclass, ``InversionConfig``.

Two modes share every field that is not about the optimiser:

* ``faithful`` (default): the published STIR procedure (Nanda et al., ICML 2022, official code): 1000
  steps of fixed L2 length 0.5 along the per-image normalized gradient, the model reading its input
  through the published clamp (so the first step sees the raw N(0, 1) seed projected onto [0, 1]),
  clamp to [0, 1] after every step, the best iterate per image kept, no early stopping, and FakeReLU
  on the last stage of ResNets (``fake_relu``). The STIR numbers of the paper come from this.
* ``fast`` (opt-in, a DIFFERENT estimator): per-image Adam on the gradient with an inverse-time decayed learning rate
  (lr / (1 + t / decay_steps): no horizon, so a larger step budget never slows the first steps),
  the best iterate per image, per-image early stopping once the relative residual meets
  ``tolerance``, bf16 autocast and channels-last on CUDA. It finds other IRIs than the published
  procedure and gives other STIR values on the same models and images, even stopped at the same
  residual (docs/estimator.md, "Fast mode"); use it only labelled as such.

Adversarial IRIs have three objectives (``adversarial_objective``, see ``stir.inversion.objectives``):
``constrained`` (default: max r2 subject to r1 <= bound, IRIs that stay IRIs), ``paper`` (eq. 7 of
the paper, d1 - d2 unnormalised) and ``original`` (the original code's r1 - 0.1 r2).

What changes x' and how it is computed are two configs. ``InversionConfig`` is the estimator: every
field may change x' (or, for ``tolerance``, which x' count as IRIs), and ``key_settings`` derives
from it the one description of an inversion that the inversion cache and the results store both
key by. ``ExecutionConfig`` is how it runs: batch size, memory, compilation, channels-last layout,
the cache folder, progress and log thresholds; it changes x' at most by float rounding and is in no
key.
"""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple, TypeVar, Union

if TYPE_CHECKING:
    from stir.inversion.iri import IRIConfig

SEED_KINDS = ("normal", "uniform", "shared_normal", "white", "black", "reversed")  # stir.inversion.seeds makes them

MODES = ("faithful", "fast", "iri")
ADVERSARIAL_OBJECTIVES = ("constrained", "paper", "original")
PRECISIONS = ("auto", "32", "bf16", "16")
SCHEDULES = ("inverse_time", "cosine", "constant")

# Steps each mode takes when ``steps`` is None: 1000 (the original code's default; the paper states no step count), and the fast mode's budget.
DEFAULT_STEPS = {"faithful": 1000, "fast": 300, "iri": 3000}

# Fields only one mode reads, and those the fast mode reads only while it stops early.
_FAST_ONLY = frozenset({"lr", "betas", "schedule", "decay_steps", "early_stop", "stop_fraction", "tolerance"})
# The IRI solver's own fields (stir.inversion.iri); it reads lr and betas too, and stops at `target`.
_IRI_ONLY = frozenset({"target", "patience", "reparam", "surrogate", "smooth_share", "smooth_beta", "smooth_target",
                       "seed_map"})
_IRI_SKIPS = frozenset({"schedule", "decay_steps", "early_stop", "stop_fraction", "tolerance", "step_size"})
_FAITHFUL_ONLY = frozenset({"step_size"})
_EARLY_STOP = frozenset({"stop_fraction", "tolerance"})
_ADVERSARIAL_ONLY = frozenset({"adversarial_weight", "adversarial_objective"})
_CONTINUATION = frozenset({"continue_steps", "continue_patience", "continue_shrink", "continue_descent"})
CONTINUE_DESCENTS = ("iri", "halving")
# Fields added after results keyed by them were stored or cached, with the value the code had before each
# existed: a key leaves such a field out at that value, so those results stay served for what made them
# (here and in stir.inversion.iri.IRIConfig.key; a name only one of the two has is the other's to skip).
KEYED_SINCE = {"smooth_target": "fixed", "continue_descent": "halving", "seed_map": "clamp", "retries": 0}


@dataclass
class InversionConfig:
    """How identically represented inputs (IRIs) are made; see ``stir.inversion.invert``.

    The estimator only: every field can change x' (``tolerance`` also decides which x' are IRIs).
    How the inversion runs (batch size, memory, compile, cache, progress) is ``ExecutionConfig``.
    """

    mode: str = "faithful"  # faithful (the published procedure) | fast | iri (different estimators, opt-in)
    steps: Optional[int] = None  # most gradient steps per image; None: 1000 (faithful) / 300 (fast) / 3000 (iri)
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
    adversarial_objective: str = "constrained"  # constrained | paper (eq. 7) | original (the code's r1 - 0.1 r2)
    # FakeReLU while inverting (identity gradient through chosen ReLUs; stir.models.fake_relu): None = the
    # mode's default ("published" in faithful mode: what the original code fakes, i.e. the last stage of
    # this project's ResNets and nothing in other networks; "off" in fast mode) | true / "published" |
    # "architecture" (each registered architecture's own rule, e.g. CIFAR ResNet20's last stage) |
    # false / "off" | a list of ReLU module names of any network.
    fake_relu: Any = None
    # Steps at which the best iterate so far is kept, to record STIR and the residual along the
    # budget (the convergence record); steps >= the budget are ignored, the final step is always in.
    record_steps: Tuple[int, ...] = (100, 250, 500)
    # Optimise on a copy with batch norm folded into the convolutions (stir.models.fold): the same
    # network up to float rounding, about 1.5x faster input gradients on CPU (docs/benchmarks/levers.md). In the
    # keys: the folded copy takes another rounding path, so x' differs in its last bits.
    fold_batch_norm: bool = True
    # A continuation after the published procedure (faithful mode), to drive X' to the tolerance: up to
    # continue_steps more steps from the best iterate along r1's TRUE gradient (FakeReLU off: its
    # surrogate stalls the published steps on ResNet18s), each image stopped once within
    # stop_fraction * tolerance. 0: off (the published procedure alone, the default). The value at the
    # published budget stays in the convergence record (its step ``steps``). continue_descent: iri (the IRI
    # solver's descent from the published x' without its smoothing phase or surrogate: x = sigmoid(z),
    # per-image plateau Adam; stir.inversion.iri.descend_iri) | halving (normalised steps whose length starts
    # at step_size * continue_shrink and shrinks by continue_shrink for an image whose residual has not
    # improved for continue_patience steps, stir.descent.HalvingLengthStep; the continuation before: on
    # the laptop vanilla 16% of X' within 0.02 after 1000 such steps, 91% with iri; docs/benchmarks/iri.md).
    continue_steps: int = 0
    continue_patience: int = 20
    continue_shrink: float = 0.5
    continue_descent: str = "iri"
    # The IRI solver (mode=iri, stir.inversion.iri; lr and betas as fast mode): each image stops once
    # r1 <= target (the precision its IRIs are read at); the rate halves per image after `patience`
    # steps without a better r1; reparam sigmoid (x = sigmoid(z)) | box; surrogate raising | off.
    target: float = 0.005
    patience: int = 30
    reparam: str = "sigmoid"
    surrogate: str = "raising"
    # the smoothing phase (softplus homotopy, stir.inversion.iri) before the solver: its share of `steps`
    # (0: none) and the softplus sharpness it starts at
    smooth_share: float = 0.45
    smooth_beta: float = 4.0
    # its targets: fixed (m1(x) itself) | tracked (the smoothed network's own m1_beta(x), a true homotopy)
    smooth_target: str = "fixed"
    # where the descent starts: logistic (the N(0, 1) seed read as z, x0 = sigmoid(seed): no pixel on the box's
    # faces) | clamp (x0 = clamp(seed, 0, 1), the published procedure's start: 66% of pixels on the faces, where
    # the laptop at's failures stick; docs/benchmarks/iri.md). mode=iri runs one try per image: its batches record
    # each image's one path (history, snapshots); STIR at IRIs (stir.measure.at_iris) retries an image still above
    # the target from fresh draws (IRIConfig.retries; the laptop at: docs/benchmarks/iri.md#retries-from-fresh-draws)
    seed_map: str = "logistic"
    # The models' forward: auto (fast mode: bf16 on CUDA, 32 elsewhere; faithful and iri mode: 32 everywhere,
    # as published: bf16 is another rounding regime, its STIR gap on CPU up to 0.021 after 1000 steps,
    # ~2.5x float32's own rounding drift; docs/benchmarks/levers.md) | 32 | bf16 | 16
    precision: str = "auto"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"inversion.mode must be one of {MODES}, got {self.mode!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"inversion.precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.seed_kind not in SEED_KINDS:
            raise ValueError(f"inversion.seed_kind must be one of {SEED_KINDS}, got {self.seed_kind!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"inversion.schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"inversion.steps must be >= 1 (an inversion of zero steps returns its noise seeds), "
                             f"got {self.steps}")
        if self.continue_descent not in CONTINUE_DESCENTS:
            raise ValueError(f"inversion.continue_descent must be one of {CONTINUE_DESCENTS}, got {self.continue_descent!r}")
        if self.continue_steps < 0 or self.continue_patience < 1 or not 0 < self.continue_shrink < 1:
            raise ValueError("inversion.continue_steps must be >= 0, continue_patience >= 1 and continue_shrink in "
                             f"(0, 1), got {self.continue_steps}, {self.continue_patience}, {self.continue_shrink}")
        if self.mode == "iri":
            self.iri_config()  # its checks, one place
        if self.continue_steps and self.mode != "faithful":
            raise ValueError("inversion.continue_steps continues the published (faithful) procedure: use "
                             "inversion.mode=faithful, or more inversion.steps in fast mode")
        numbers = {"tolerance": self.tolerance, "step_size": self.step_size, "lr": self.lr,
                   "stop_fraction": self.stop_fraction, "adversarial_weight": self.adversarial_weight,
                   "decay_steps": self.decay_steps, "continue_shrink": self.continue_shrink}
        bad = {k: v for k, v in numbers.items() if not isinstance(v, (int, float)) or not math.isfinite(v)}
        if bad:
            raise ValueError(f"inversion.{next(iter(bad))} must be a finite number, got {next(iter(bad.values()))!r}")
        if self.tolerance <= 0:
            raise ValueError(f"inversion.tolerance must be > 0 (x' is an IRI when its relative residual is within it; "
                             f"at {self.tolerance} none can be), got {self.tolerance}")
        if len(self.betas) != 2 or not all(isinstance(b, (int, float)) and 0 <= b < 1 for b in self.betas):
            raise ValueError(f"inversion.betas must be two numbers in [0, 1) (Adam's decay rates), got {list(self.betas)}")
        if self.step_size <= 0 or self.lr <= 0:
            raise ValueError(f"inversion.step_size and inversion.lr must be > 0 (a step of length 0 leaves x' at its "
                             f"noise seed, like steps=0), got {self.step_size}, {self.lr}")
        if self.adversarial_weight <= 0:
            raise ValueError(f"inversion.adversarial_weight must be > 0, got {self.adversarial_weight}")
        if self.decay_steps <= 0:
            raise ValueError(f"inversion.decay_steps must be > 0, got {self.decay_steps}")
        if not 0 < self.stop_fraction <= 1:
            raise ValueError(f"inversion.stop_fraction must be in (0, 1], got {self.stop_fraction}")
        if self.adversarial_objective not in ADVERSARIAL_OBJECTIVES:
            raise ValueError(f"inversion.adversarial_objective must be one of {ADVERSARIAL_OBJECTIVES}, "
                             f"got {self.adversarial_objective!r}")
        if self.fake_relu is not None and not isinstance(self.fake_relu, bool):
            self.fake_relu = self.fake_relu if isinstance(self.fake_relu, str) else [str(n) for n in self.fake_relu]
            self.fake_relu_spec  # a malformed spec fails here, before any work (FakeReLUError: a ValueError)
        if any(int(s) != s or s < 1 for s in self.record_steps):
            raise ValueError(f"inversion.record_steps must be positive step counts, got {list(self.record_steps)}")
        self.betas = tuple(self.betas)  # YAML gives a list
        self.record_steps = tuple(sorted({int(s) for s in self.record_steps}))

    @property
    def model_precision(self) -> str:
        """``precision`` with "auto" settled by mode: faithful runs in float32 ("32") on every device."""
        return "32" if self.precision == "auto" and self.mode in ("faithful", "iri") else self.precision

    @property
    def num_steps(self) -> int:
        """Gradient steps per image: ``steps``, or the mode's default."""
        return self.steps if self.steps is not None else DEFAULT_STEPS[self.mode]

    def iri_config(self) -> "IRIConfig":
        """The IRI solver's settings (``inversion.mode=iri``) that these fields give."""
        from stir.inversion.iri import IRIConfig

        return IRIConfig(target=self.target, steps=self.num_steps, lr=self.lr, patience=self.patience,
                         reparam=self.reparam, surrogate=self.surrogate, smooth_share=self.smooth_share,
                         smooth_beta=self.smooth_beta, smooth_target=self.smooth_target, betas=tuple(self.betas),
                         seed_map=self.seed_map, retries=0)  # one path per image: its history and snapshots

    def resolved(self) -> "InversionConfig":
        """These settings with ``steps`` filled in (the mode's default when unset): a new object, or this
        one when already resolved. ``python evaluate.py`` resolves once (``resolve_budgets``); the engine's
        entry points resolve a library caller's config the same way."""
        return self if self.steps is not None else dataclasses.replace(self, steps=self.num_steps)

    @property
    def fake_relu_spec(self) -> Union[str, Tuple[str, ...]]:
        """``fake_relu`` as a spec of ``stir.models.fake_relu`` ("published", "architecture", "off" or
        module names); None is the mode's default: "published" in faithful mode, "off" in fast mode."""
        from stir.models.fake_relu import normalize_spec

        if self.fake_relu is None:
            return "published" if self.mode == "faithful" else "off"
        return normalize_spec(self.fake_relu)

    @property
    def fake_relu_key(self) -> Any:
        """The spec as keys record it: True ("published"), False ("off"), "architecture" or the names."""
        spec = self.fake_relu_spec
        return {"published": True, "off": False}.get(spec, spec) if isinstance(spec, str) else list(spec)

    def history_bytes(self, n: int) -> int:
        """Bytes of the residual record an inversion of ``n`` images keeps: (total_steps + 1, n) floats
        (``DescentResult.history``, in every cache entry), the largest thing it allocates."""
        return (self.total_steps + 1) * n * 4

    def check_budget(self, n: int) -> None:
        """Refuse a budget whose record alone would not fit in memory, before any model is loaded:
        ``inversion.steps=1000000000`` for 8 images asked for 32 GB after the models had loaded. The
        bound is a quarter of this machine's memory (4 GiB where it cannot be read)."""
        need, limit = self.history_bytes(n), _memory_bound()
        if need > limit:
            raise ValueError(
                f"inversion.steps={self.num_steps}{f' + continue_steps={self.continue_steps}' if self.continue_steps else ''}"
                f" for {n} images keeps a ({self.total_steps + 1}, {n}) residual record of {need / 2**30:.3g} GiB, more "
                f"than the {limit / 2**30:.3g} GiB allowed (a quarter of this machine's memory): lower inversion.steps")

    @property
    def total_steps(self) -> int:
        """Every step an image may take: the procedure's ``num_steps`` and the continuation's."""
        return self.num_steps + self.continue_steps

    @property
    def snapshot_steps(self) -> Tuple[int, ...]:
        """The recorded steps inside the budget, then the budget itself: (t_1 < ... < steps), and with a
        continuation its end too (steps + continue_steps)."""
        inside = tuple(s for s in self.record_steps if s < self.num_steps) + (self.num_steps,)
        return inside + ((self.total_steps,) if self.continue_steps else ())

    def key_settings(self, adversarial: bool, precision: str) -> Dict[str, Any]:
        """What fixes an inversion's x' (and which x' are IRIs), as a JSON-able dict: the one
        description the inversion cache and the results store both key by.

        ``precision`` is the resolved one ("32" | "bf16" | "16": "auto" depends on the device).
        Every field is in unless the inversion does not read it: the other mode's optimiser
        settings; for arbitrary IRIs the adversarial objective; for fast arbitrary IRIs without
        early stopping the stopping bound; ``tolerance`` in faithful arbitrary IRIs (it only sorts
        x' into IRIs and non-IRIs, so a result keyed by it, such as a stored STIR, adds it itself:
        ``stir.measure.plan.direction_parts``). ``steps``, ``fake_relu`` and ``record_steps`` enter resolved.
        """
        if self.mode == "iri":
            skip = {"fake_relu"} | _FAITHFUL_ONLY | _IRI_SKIPS
        else:  # the published and the fast mode's keys, as before the IRI solver existed
            skip = {"fake_relu"} | _IRI_ONLY | (_FAITHFUL_ONLY if self.mode == "fast" else _FAST_ONLY)
        if not self.continue_steps:
            skip |= _CONTINUATION  # off: the published procedure's key, as before the continuation existed
        else:
            skip -= {"tolerance", "stop_fraction"}  # the continuation stops each image at the IRI bound
        if adversarial:
            skip -= _EARLY_STOP  # the IRI bound of the adversarial objective, in either mode
        else:
            skip |= _ADVERSARIAL_ONLY
            if self.mode == "fast" and not self.early_stop:
                skip |= _EARLY_STOP  # no early stop: the tolerance only classifies
        skip |= {name for name, before in KEYED_SINCE.items() if hasattr(self, name) and getattr(self, name) == before}
        settings = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
        settings.update(precision=precision, steps=self.num_steps, adversarial=adversarial,
                        fake_relu=self.fake_relu_key, record_steps=list(self.snapshot_steps))
        if self.continue_steps:
            # the continuation follows r1's true gradient (FakeReLU off) since issue 53: a key of its own, so a
            # continuation cached when it kept the published FakeReLU is never served as this one
            settings["continue_fake_relu"] = False
        return settings


def iri_shortfall(kind: str, fraction: float, count: int, median: float, cfg: InversionConfig) -> str:
    """The one message for X' of which too few are IRIs: the engine's log line and the report's note say
    the same, with the same fix. ``kind``: arbitrary | adversarial; ``count``: X' in all (every draw)."""
    if cfg.mode == "faithful" and not cfg.continue_steps:
        fix = ("the published procedure often ends above it; inversion.continue_steps=1000 continues it toward the "
               "tolerance (docs/estimator.md#the-continuation)")
    else:
        fix = "more inversion.steps or inversion.continue_steps bring them closer (docs/estimator.md#the-continuation)"
    return (f"{kind} IRIs: only {fraction:.0%} of {count} X' are within the tolerance {cfg.tolerance:g} "
            f"(median residual {median:.3g}); {fix}")


@dataclass
class ExecutionConfig:
    """How an inversion (and every measurement pass) runs: nothing here changes a reported number.

    Every image is optimised independently (eval-mode models, per-image steps and stopping), so the
    batch size trades memory for speed only; channels-last and compiling change x' at most by float
    rounding (docs/benchmarks/levers.md); the rest decides where files go and what is logged.
    """

    # Images optimised together. None: automatic (stir.inversion.batching: 128 on CPU; on CUDA what
    # fits in memory_gb, the k draws as one batch).
    batch_size: Optional[int] = None
    memory_gb: Optional[float] = None  # CUDA memory an automatic batch may take; None: the free memory
    # Cut the working copy at the tap and run it through torch.compile (stir.models.truncate); falls
    # back to eager where compiling fails. Opt-in: compiling takes seconds to a minute per batch shape.
    compile: bool = False
    # CPU: glibc malloc keeps freed memory in the process (stir.allocator: 1.17x faster steps here;
    # process-wide, applied once; up to 1 GiB of freed memory stays in RSS). No effect elsewhere.
    keep_cpu_memory: bool = True
    channels_last: bool = True  # the working copy and its inputs in channels-last memory format (rounding only)
    cache_dir: Optional[str] = None  # on-disk cache of finished inversions; None: no cache
    # Progress of every inversion and walk: a bar on a terminal (images x steps, median residual, ETA), a log
    # line every few percent otherwise (stir.progress); false: silent.
    progress: bool = True
    warn_below: float = 0.9  # log a warning when the fraction of IRIs of an inversion is below this
    # Images per no-gradient measurement pass (representations, predictions); None: batch_size, or 1000
    # when that is automatic.
    eval_batch: Optional[int] = None

    def __post_init__(self) -> None:
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"execution.batch_size must be >= 1 (or null: automatic), got {self.batch_size}")
        if self.memory_gb is not None and self.memory_gb <= 0:
            raise ValueError(f"execution.memory_gb must be > 0 (or null: the free device memory), got {self.memory_gb}")
        if self.eval_batch is not None and self.eval_batch < 1:
            raise ValueError(f"execution.eval_batch must be >= 1 (or null), got {self.eval_batch}")

    @property
    def eval_batch_size(self) -> int:
        """Images per no-gradient measurement pass: ``eval_batch``, else ``batch_size``, else 1000."""
        if self.eval_batch is not None:
            return self.eval_batch
        return self.batch_size if self.batch_size is not None else 1000


# The longest walk difficulty.steps may ask for: 100,000 steps of 0.1 is an L2 length of 10,000, 180
# times the diameter of [0, 1]^(3x32x32) (55.4); a walk keeps per-step state, so 1e9 ran out of memory.
MAX_WALK_STEPS = 100_000
WALK_STEPS = 200  # the walk of the published budget (1000 inversion steps); shorter inversions walk as many as they step


@dataclass
class ControversialConfig:
    """How controversial-stimulus difficulty is measured (``stir.inversion.controversial``).

    The STIR paper (appendix C, eq. 8) makes controversial stimuli x_c by minimising
    ||m1(x) - m1(x_c)|| - ||m2(x) - m2(x_c)|| and reports Delta = mean ||x - x_c||_2, "the amount of
    perturbation needed". Here x_c starts at x (plus a perturbation of L2 norm ``start_noise``, where
    the distances have a gradient) and moves by fixed-length steps under the adversarial objective
    of ``InversionConfig.adversarial_objective``; an image becomes controversial at the first
    iterate with r1 <= ``InversionConfig.tolerance`` (m1 still cannot tell x_c from x) and
    r2 >= ``m2_threshold`` (m2's relative distance, ||m2(x_c) - m2(x)|| / ||m2(x)||). Its
    difficulty is the smallest ||x_c - x||_2 among such iterates; images that never get there
    within ``steps`` count in the reported fraction, not in Delta.
    """

    # Fixed-length steps from x. None: follow the inversion budget, ``walk_steps(inversion steps)`` =
    # min(WALK_STEPS, inversion steps): the default 1000-step inversion walks 200 steps, a 20-step
    # trial 20 (a small run stays small); set it to walk a budget of its own.
    steps: Optional[int] = None
    step_size: float = 0.1  # L2 length of each step: the resolution of Delta (at most steps * step_size)
    start_noise: float = 1e-3  # L2 norm of the random perturbation x_c starts from
    m2_threshold: float = 0.5  # r2 at which m2 is taken to represent x_c differently from x

    def __post_init__(self) -> None:
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"difficulty.steps must be >= 1 (or unset: it follows inversion.steps), got {self.steps}")
        if self.steps is not None and self.steps > MAX_WALK_STEPS:
            raise ValueError(f"difficulty.steps={self.steps} is beyond {MAX_WALK_STEPS:,}: the walk would go far past "
                             f"any image (the published budget walks {WALK_STEPS}); lower it or leave it unset")
        if self.step_size <= 0 or self.start_noise <= 0 or self.m2_threshold <= 0:
            raise ValueError("difficulty.step_size, difficulty.start_noise and difficulty.m2_threshold must be > 0, "
                             f"got {self.step_size}, {self.start_noise}, {self.m2_threshold}")

    def following(self, inversion_steps: int) -> "ControversialConfig":
        """This walk with ``steps`` resolved: its own when set, else min(WALK_STEPS, inversion_steps)."""
        if self.steps is not None:
            return self
        return dataclasses.replace(self, steps=min(WALK_STEPS, int(inversion_steps)))


def resolve_budgets(inversion: InversionConfig,
                    difficulty: ControversialConfig) -> Tuple[InversionConfig, ControversialConfig]:
    """The one place an unset budget is filled in: (the inversion with its steps, the walk with its
    steps following them); each the same object when it was set already. Idempotent."""
    inversion = inversion.resolved()
    return inversion, difficulty.following(inversion.steps)


Settings = TypeVar("Settings")


def resolved_budgets(settings: Settings) -> Settings:
    """``settings``, a frozen record holding ``inversion`` and ``difficulty`` (``python evaluate.py``'s
    ``EvaluateConfig``, a ``stir.measure.Estimator``), with both budgets filled in (``resolve_budgets``):
    a new record, or ``settings`` itself when nothing was unset. Called once per run, where the command
    line's config is read (``stir.experiments.config.evaluate_config``), and by the library's entry
    point for estimators built by hand (``stir.measure.plan.make_plan``); the record is carried whole
    from there to the descent loop (docs/architecture.md, "The walk of inversion.steps")."""
    inversion, difficulty = resolve_budgets(settings.inversion, settings.difficulty)
    if inversion is settings.inversion and difficulty is settings.difficulty:
        return settings
    return dataclasses.replace(settings, inversion=inversion, difficulty=difficulty)


def _memory_bound() -> int:
    """A quarter of the physical memory (4 GiB where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4
    except (ValueError, OSError, AttributeError):
        return 4 * 2**30
