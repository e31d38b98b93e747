"""A network's taps in depth order, and the taps of two networks that correspond by relative depth.

Nanda et al., ICML 2022, study how shared invariance changes with depth (section 5). Two networks
rarely have the same number of layers, so taps are paired by *relative depth*: in a list of L taps
(depth order) tap i sits at depth_i = i / (L - 1), from 0 (first tap) to 1 (last); a single tap
sits at depth 1 (it is taken as the output end).
"""
from __future__ import annotations

from fractions import Fraction
from typing import List, Optional, Sequence, Tuple, TypeVar, Union

from torch import nn

from stir.models.taps import LOGITS, _inner, with_reduction

T = TypeVar("T")
# None / "all": every depth tap; "original": the original code's list; or names / (tap1, tap2) pairs
TapSpec = Union[None, str, Sequence[Union[str, Tuple[str, str]]]]


def depth_taps(model: nn.Module) -> List[str]:
    """The model's taps in depth order, without "logits" (logits are the output, not a layer).

    Registered networks (``stir.models.Network``) give their declared taps, "penultimate" included.
    Any other module gives its leaf submodules in registration order (``named_modules``; those of
    ``inner`` for a wrapped network), which is depth order for sequential stacks and an
    approximation otherwise (pass explicit taps then), and then its named taps (``penultimate``).
    """
    if getattr(model, "taps", None):
        return [t.name for t in model.taps if t.name != LOGITS]  # the depth list, not the inner taps
    inner, _ = _inner(model)
    leaves = [name for name, module in inner.named_modules() if name and not any(True for _ in module.children())]
    named = [t for t in (getattr(model, "named_taps", None) or {}) if t not in leaves]
    return leaves + named



def relative_depths(count: int) -> List[float]:
    """depth_i = i / (count - 1) for i < count; [1.0] for a single tap."""
    if count < 1:
        raise ValueError("need at least one tap")
    return [float(d) for d in _exact_depths(count)]


def _exact_depths(count: int) -> List[Fraction]:
    return [Fraction(1)] if count == 1 else [Fraction(i, count - 1) for i in range(count)]


def corresponding_taps(taps1: Sequence[str], taps2: Sequence[str]) -> List[Tuple[str, str, float]]:
    """Pair taps at the same relative depth: [(tap1, tap2, depth)], one per tap of the SHORTER list.

    Each tap of the shorter list (``taps1`` when equally long) is paired with the tap of the other
    list whose relative depth is nearest to its own (ties: the shallower one); ``depth`` is the
    shorter list's relative depth. Equal-length lists pair one to one. tap1 always comes from
    ``taps1`` and tap2 from ``taps2``. Example: 3 vs 5 taps pair (0, 0), (1, 2), (2, 4) at 0, .5, 1.
    """
    taps1, taps2 = list(taps1), list(taps2)
    if not taps1 or not taps2:
        raise ValueError(f"both tap lists must be non-empty, got {len(taps1)} and {len(taps2)} taps")
    swap = len(taps2) < len(taps1)
    short, long = (taps2, taps1) if swap else (taps1, taps2)
    long_depths = _exact_depths(len(long))
    pairs = []
    for tap, depth in zip(short, _exact_depths(len(short))):
        # Exact rational distances, so that ties are ties; min keeps the first (shallower) on a tie.
        match = long[min(range(len(long)), key=lambda j: abs(long_depths[j] - depth))]
        pairs.append((match, tap, float(depth)) if swap else (tap, match, float(depth)))
    return pairs


def evenly_spaced(items: Sequence[T], count: Optional[int]) -> List[T]:
    """At most ``count`` of ``items``, evenly spaced in the list, first and last kept (None: all)."""
    items = list(items)
    if count is None or count >= len(items):
        return items
    keep = sorted({round(i * (len(items) - 1) / (count - 1)) for i in range(count)})
    return [items[i] for i in keep]


def original_taps(model: nn.Module) -> List[str]:
    """The layer list of the original STIR code: for its ResNets the stem, every block's first
    post-ReLU output and pre-ReLU sum, then the penultimate vector; otherwise ``depth_taps``."""
    listed = getattr(model, "original_layer_taps", None)
    return list(listed) if listed else depth_taps(model)


def layer_pairs(m1: nn.Module, m2: nn.Module, taps: TapSpec = None, reduce: str = "flatten",
                count: Optional[int] = None) -> List[Tuple[str, str, float]]:
    """The (tap1, tap2, depth) pairs ``evaluate_layers`` measures.

    ``taps`` None or "all": ``corresponding_taps(depth_taps(m1), depth_taps(m2))``; "original": the
    same over ``original_taps`` (the original code's layer list). A list of names: each name in
    both models. A list of (tap1, tap2) pairs: as given. For explicit lists the depth is tap1's
    relative depth in ``depth_taps(m1)`` ("logits", or a tap outside that list, sits at 1).
    ``reduce`` ("flatten" | "spatial_mean" | "original", ``stir.models.taps``) is appended to
    every tap: how a spatial map becomes the (n, d) representation, for inversion and measure alike.
    ``count`` keeps at most that many pairs, evenly spaced in the list (first and last kept).
    """
    pairs = evenly_spaced(_layer_pairs(m1, m2, taps), count)
    return [(with_reduction(t1, reduce), with_reduction(t2, reduce), d) for t1, t2, d in pairs]


def _layer_pairs(m1: nn.Module, m2: nn.Module, taps: TapSpec) -> List[Tuple[str, str, float]]:
    if taps is None or taps == "all":
        return corresponding_taps(depth_taps(m1), depth_taps(m2))
    if taps == "original":
        return corresponding_taps(original_taps(m1), original_taps(m2))
    if isinstance(taps, str):
        raise ValueError(f"taps must be None, 'all', 'original' or a list of tap names / (tap1, tap2) pairs, got {taps!r}")
    order = depth_taps(m1)
    depth_of = dict(zip(order, relative_depths(len(order)))) if order else {}
    pairs = []
    for item in taps:
        tap1, tap2 = (item, item) if isinstance(item, str) else tuple(item)
        pairs.append((tap1, tap2, depth_of.get(tap1, 1.0)))
    return pairs
