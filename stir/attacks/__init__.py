"""Adversarial examples in the l2 ball: PGD with cross-entropy (AT, MART) and TRADES' KL attack.

Every attack measures the model inside ``stir.models.frozen`` (eval mode, no weight gradients) and
leaves it exactly as it found it; inputs and outputs are images in [0, 1]. ``AttackNetwork`` is
the faster copy of a network that training attacks (batch norm folded, channels-last; rounding only).
"""
from stir.attacks.network import AttackNetwork, attacked
from stir.attacks.pgd import pgd_l2, robust_accuracy, torchattacks_pgd_l2
from stir.attacks.trades import kl_per_example, trades_l2

__all__ = ["AttackNetwork", "attacked", "kl_per_example", "pgd_l2", "robust_accuracy", "torchattacks_pgd_l2", "trades_l2"]
