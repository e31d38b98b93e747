"""What each training objective uses, read from the losses' source without importing them.

A loss is one module in ``stir/training/losses/`` whose function is decorated with what it uses::

    @register("trades", adversarial=True, attack=("eps", "steps"), beta=True)
    def trades_loss(model, x, y, loss_cfg, attack_cfg, generator=None, attack_model=None) -> LossOutput:
        '''TRADES (Zhang et al. 2019): CE(f(x), y) + beta * KL(p(x) || p(x_adv)).'''

and the code reads those flags (:class:`LossSpec`) instead of the loss's name: the run folder
(``stir.training.runs.recipe_dir``: ``-b<beta>`` only for a loss that reads ``loss.beta``,
``-eps`` / ``-it`` only for the attack settings it reads), the W&B config, the attacked copy the
training step hands over and the catastrophic-overfitting guard (``adversarial``).

The command-line check of ``loss.name`` (``stir.config.validate``), ``train.py --help`` and the
documentation's table import no torch and no loss, so they cannot ask the registry
(``stir.training.losses.LOSSES``); they read the same declarations from the source here, as
``stir.config.arch_names`` does for architectures. The name is a string literal and each flag a
literal (anything else is refused with the place and the fix); the one-line summary is the first
line of the function's docstring. ``tests/training/test_loss_registry.py`` keeps this reading equal
to the registry's.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Tuple

LOSSES = Path(__file__).resolve().parents[1] / "training" / "losses"  # the registry's package
# The attack.* settings a loss may declare it reads, each with its part of the run folder's name
# (stir.training.runs.recipe_dir), in the order they appear there.
ATTACK_SETTINGS = ("eps", "steps")


@dataclass(frozen=True)
class LossSpec:
    """What one training objective uses (declared at its ``@register``)."""

    name: str
    # It attacks the network at every step: the step hands it the attacked copy (AttackNetwork), and
    # the catastrophic-overfitting guard (robust_check.*) watches its robust accuracy.
    adversarial: bool = False
    # The attack.* settings of ATTACK_SETTINGS its objective reads: they name its run folder (-eps, -it)
    # where they differ from the defaults, and enter its W&B config; the others it ignores.
    attack: Tuple[str, ...] = ()
    beta: bool = False  # it reads loss.beta: -b<beta> in its run folder, beta in its W&B config
    summary: str = ""  # the first line of its docstring: the objective and its paper

    def __post_init__(self) -> None:
        unknown = [a for a in self.attack if a not in ATTACK_SETTINGS]
        if unknown or not isinstance(self.attack, tuple):
            raise ValueError(f"loss {self.name!r} declares attack={self.attack!r}: give a tuple of {ATTACK_SETTINGS}")


@lru_cache(maxsize=None)
def loss_specs(folder: Path = LOSSES) -> Dict[str, LossSpec]:
    """{name: LossSpec} of every loss ``@register``-ed in the modules directly inside ``folder``
    (private modules left out, as ``stir.registry.import_package`` does), sorted by name."""
    specs: List[LossSpec] = []
    for path in sorted(folder.glob("*.py")):
        if not path.stem.startswith("_"):
            specs += declared_in(path)
    out: Dict[str, LossSpec] = {}
    for spec in specs:
        if spec.name in out:
            raise ValueError(f"loss {spec.name!r} is registered twice in {folder}")
        out[spec.name] = spec
    return dict(sorted(out.items()))


def loss_names() -> Tuple[str, ...]:
    """The registered losses' names, sorted (the choices of ``loss.name`` and ``loss=``)."""
    return tuple(loss_specs())


def declared_in(path: Path) -> List[LossSpec]:
    """The :class:`LossSpec` of each ``@register(...)`` decorator of one module's source."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out: List[LossSpec] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call) and _called(deco.func) == "register":
                out.append(_spec(deco, node, path))
    return out


def _called(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _spec(deco: ast.Call, fn: ast.FunctionDef, path: Path) -> LossSpec:
    try:
        if len(deco.args) != 1:
            raise ValueError("one positional argument, the name")
        name = ast.literal_eval(deco.args[0])
        flags = {k.arg: ast.literal_eval(k.value) for k in deco.keywords}
        if not isinstance(name, str) or None in flags:
            raise ValueError("a string name and keyword flags")
        return LossSpec(name, **flags, summary=summary(ast.get_docstring(fn)))
    except (ValueError, TypeError) as err:
        raise ValueError(f"{path.name}:{deco.lineno}: @{ast.unparse(deco)} cannot be read without running the module "
                         f"({err}); the torch-free check of loss.name reads it: write the name as a string literal and "
                         f"each flag (adversarial, attack, beta) as a literal") from None


def summary(doc: object) -> str:
    """The first line of a docstring (the loss's one-line summary), or ''."""
    lines = str(doc or "").strip().splitlines()
    return lines[0].strip() if lines else ""
