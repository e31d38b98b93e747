"""Early stopping on a PGD check: Wong et al. 2020's guard against catastrophic overfitting.

Fast adversarial training (FGSM with a random start, or few-step PGD) can collapse within an epoch:
the network learns to defeat the weak training attack, its accuracy under the training attack jumps
while its accuracy under a real (multi-step) attack falls to near zero ("Fast is better than free",
section 5). Wong et al. check robust accuracy against PGD on a training minibatch during training
and keep the model from before the collapse. ``CatastrophicOverfittingGuard`` does that once per
epoch: PGD-l2 (``steps`` steps at ``eval_attack``'s eps) on a fixed set of training images (the
first ``images`` of the split, not augmented); when their robust accuracy falls more than
``max_drop`` below the best epoch's, training stops and the best epoch's weights (network and,
with EMA, the average) are restored. The check's attack draws from its own seeded generator, so the
training's random streams are the same with or without the guard; its state (best accuracy, best
weights, whether it stopped) is saved in every checkpoint, so a resumed run makes the same decision.
"""
from __future__ import annotations

import copy
import logging
from typing import Any, Dict, Optional

import lightning as L
import torch

from stir.attacks import robust_accuracy
from stir.config.schema import AttackConfig, RobustCheckConfig
from stir.data import to_float

log = logging.getLogger(__name__)

CHECK_SEED = 20200112  # the check attack's generator (Wong et al.'s arXiv date): fixed, not the run's seed


class CatastrophicOverfittingGuard(L.Callback):
    """After each training epoch: PGD check, remember the best weights, stop and restore on a collapse.

    Logs ``check/robust_acc`` (the fixed images' PGD accuracy) every epoch. Runs before the
    checkpoint callback (Lightning orders ModelCheckpoint last), so ``last.ckpt`` holds the
    decision and, after a stop, the restored weights.
    """

    def __init__(self, cfg: RobustCheckConfig, eval_attack: AttackConfig):
        self.cfg = cfg
        self.attack = AttackConfig(eps=eval_attack.eps, steps=cfg.steps)
        self.best_acc = -1.0
        self.best_epoch: Optional[int] = None
        self.best_state: Optional[Dict[str, torch.Tensor]] = None
        self.stopped_at: Optional[int] = None
        self.history: list = []  # (epoch, check accuracy)

    def on_train_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if self.stopped_at is not None:  # a resumed run that had already stopped: stay stopped
            trainer.should_stop = True

    def on_train_epoch_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        images, labels = trainer.datamodule.split_tensors("train")
        x = to_float(images[: self.cfg.images].to(module.device))  # (k, 3, h, w), not augmented
        y = labels[: self.cfg.images].to(module.device)
        network = module.eval_network
        generator = torch.Generator(device=module.device).manual_seed(CHECK_SEED)
        with torch.autocast(module.device.type, enabled=False):  # the check in float32, like eval_attack
            # The attack on eval_attack's copy of the network (folded batch norm: rounding only), judged on the network.
            acc = float(robust_accuracy(network, x, y, self.attack, generator=generator,
                                        attack_model=module.eval_attack_model()))
        epoch = trainer.current_epoch
        self.history.append((epoch, acc))
        module.log("check/robust_acc", acc, on_step=False, on_epoch=True)
        if acc > self.best_acc:
            self.best_acc, self.best_epoch = acc, epoch
            self.best_state = {k: v.detach().clone() for k, v in module.state_dict().items()}
        elif acc < self.best_acc - self.cfg.max_drop:
            log.warning("catastrophic overfitting at epoch %d: PGD accuracy on %d training images %.3f, best %.3f "
                        "(epoch %d); stopping with the weights of epoch %d", epoch, len(y), acc, self.best_acc,
                        self.best_epoch, self.best_epoch)
            module.load_state_dict(self.best_state)
            self.stopped_at = epoch
            trainer.should_stop = True

    def summary(self) -> Dict[str, Any]:
        """For the run's metrics.json: each epoch's check accuracy, the best epoch, where it stopped."""
        return {"accuracy_by_epoch": [acc for _, acc in self.history], "best_epoch": self.best_epoch,
                "stopped_at_epoch": self.stopped_at, "images": self.cfg.images, "steps": self.cfg.steps}

    def state_dict(self) -> Dict[str, Any]:
        return {"best_acc": self.best_acc, "best_epoch": self.best_epoch, "stopped_at": self.stopped_at,
                "history": list(self.history), "best_state": self.best_state}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.best_acc, self.best_epoch, self.stopped_at = state["best_acc"], state["best_epoch"], state["stopped_at"]
        self.history = [tuple(h) for h in state["history"]]
        self.best_state = copy.copy(state["best_state"])
