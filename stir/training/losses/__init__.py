"""Training objectives, one module each (vanilla, AT, TRADES, MART, ...), on one registry.

A loss is ``loss(model, x, y, loss_cfg, attack_cfg, generator=None, attack_model=None) ->
LossOutput``, decorated where it is defined with what it uses::

    @register("trades", adversarial=True, attack=("eps", "steps"), beta=True)

(``stir.config.loss_specs.LossSpec``: the code reads these flags, never a loss's name; a new loss is
its module here, its ``configs/loss/<name>.yaml`` and its test). :data:`LOSSES` collects every module
of this package on first use; ``stir.config.loss_specs`` reads the same declarations from the source
for the torch-free command-line check.

The model is called in whatever mode the caller set for the training forward (train mode in the
LightningModule); attacks run inside ``stir.models.frozen`` (eval mode, no weight gradients) and
leave every module's mode, ``requires_grad`` flag and batch-norm statistic as they were.
``attack_model``: what the attack differentiates instead of ``model`` (the LightningModule passes
``stir.attacks.AttackNetwork``'s copy, to an ``adversarial`` loss only: ``model``'s eval-mode
function, batch norm folded, channels-last, refreshed every step); the training forwards always use
``model``. Only the training forward passes (clean and / or adversarial, in the caller's mode)
update batch-norm running statistics. Images are in [0, 1]; logits are (b, C).

KL direction (all losses): KL(p(x) || p(x_adv)) = sum_k p_k(x) log(p_k(x) / p_k(x_adv)), summed
over classes per example, averaged over the batch (the official TRADES / MART codes:
KLDivLoss(log_softmax(f(x_adv)), softmax(f(x))), sum / batch size). In the training objectives the
gradient flows through both f(x) and f(x_adv) (as in both papers' code); only the attacks treat
f(x) as a constant.

Label smoothing (``loss_cfg.label_smoothing = s``, Szegedy et al. 2016) replaces the one-hot target
of every cross-entropy term of the objective by (1 - s) * onehot(y) + s / C; the attacks keep the
plain cross-entropy (or KL) they maximise, and MART's margin and weight terms are unchanged.
s = 0 (the default) is each paper's objective.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from torch import Tensor

from stir.config.loss_specs import LossSpec, summary
from stir.registry import Registry


@dataclass
class LossOutput:
    """What a training objective returns."""

    loss: Tensor  # () the scalar to backpropagate
    logits_clean: Optional[Tensor] = None  # (b, C) from the training forward on x, if the loss made one
    logits_adv: Optional[Tensor] = None  # (b, C) from the training forward on x_adv, if the loss made one
    extra: Dict[str, Tensor] = field(default_factory=dict)  # detached scalar terms for logging


Loss = Callable[..., LossOutput]


@dataclass(frozen=True)
class Objective:
    """A registered loss: what it uses and the function."""

    spec: LossSpec
    fn: Loss


LOSSES: Registry[Objective] = Registry("loss", package="stir.training.losses")


def register(name: str, *, adversarial: bool = False, attack: Tuple[str, ...] = (),
             beta: bool = False) -> Callable[[Loss], Loss]:
    """Decorator: ``fn`` is the loss ``loss.name=name``, with what it uses (``LossSpec``; literals only:
    ``stir.config.loss_specs`` reads them from the source). Its docstring's first line is its summary."""

    def wrap(fn: Loss) -> Loss:
        LOSSES.add(name, Objective(LossSpec(name, adversarial, tuple(attack), beta, summary(fn.__doc__)), fn))
        return fn

    return wrap


def names() -> List[str]:
    """Every registered loss, sorted."""
    return LOSSES.names()


def get_loss(name: str) -> Loss:
    """The registered objective called ``name``; ValueError listing the valid names otherwise."""
    return LOSSES.get(name).fn


def loss_spec(name: str) -> LossSpec:
    """What the registered loss ``name`` uses; ValueError listing the valid names otherwise."""
    return LOSSES.get(name).spec
