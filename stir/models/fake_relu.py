"""FakeReLU: ReLU in the forward pass, identity in the backward pass (the published STIR inversion).

    forward:  y = max(x, 0)        backward:  dL/dx = dL/dy   (also where x < 0)

The original STIR code (built on the robustness library) inverts its CIFAR ResNets with
``fake_relu=True``: the output ReLU of every block of the last stage passes the gradient through as
if it were the identity, so a representation whose units are dead (negative pre-activation) can
still be moved. Its VGGs have no such option, and its adapter for models of other libraries ignores
the flag. The forward value is unchanged, so residuals and STIR of a given x' are the same; only the
optimisation path differs (and with it the x' reached: PITFALLS.md).

Which ReLUs are faked is a *spec*, resolved per model to module paths (``resolve_sites``):

* ``True`` / ``"published"``: what the original STIR code does with this network: the
  ``fake_relu_sites`` of the architectures its own zoo has (this project's ResNet18/34:
  ``published_fake_relu = True``), nothing for every other network (its adapter for models of other
  libraries ignores the flag, so CIFAR ResNet20-56, the robust CROWN networks, torchvision or
  ``python:`` models are inverted with real ReLUs, as there);
* ``"architecture"``: the architecture's own rule, the ``fake_relu_sites`` a registered network
  declares whether or not the original code fakes them (``fake_relu_rule`` says it in words;
  e.g. the last stage of a CIFAR ResNet20, the penultimate ReLU of a CROWN network);
* ``False`` / ``None`` / ``"off"``: none;
* a list of module names (or one name, or names joined by commas) of ANY network: an ``OutputReLU``
  or a plain ``nn.ReLU``. Names are those of ``named_modules()``; for a model that wraps another
  (``inner``: a model of another source, a cut network) the wrapped network's names work too.

``fake_relu(*models, enabled=spec)`` (one spec for every model) and ``faked([(model, spec), ...])``
(one per model) apply the spec within a ``with`` block and restore everything after, exceptions
included: an ``OutputReLU``'s ``fake`` flag; for a plain ``nn.ReLU`` a forward hook (first in line)
that replaces its output by the identity-gradient function of its input, removed after, with
``inplace`` switched off meanwhile (an in-place ReLU would overwrite the input the hook needs) and
restored. A module called several times in one forward pass (torchvision's blocks reuse one
``relu``) is faked at every call. ``describe(model, spec)`` is what records and notes say.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterable, Iterator, List, Sequence, Tuple, Union

import torch
from torch import Tensor, nn

PUBLISHED = "published"
ARCHITECTURE = "architecture"
OFF = "off"
# True | "published": what the original code fakes; "architecture": the architecture's rule;
# False | None | "off": none; names of ReLU modules.
FakeReLUSpec = Union[None, bool, str, Sequence[str]]


class FakeReLUError(ValueError):
    """A FakeReLU spec names something that is not a ReLU module of the model; the message lists them."""


class _FakeReLUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:  # noqa: D401 - autograd signature
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        return grad  # identity: the gradient passes where the unit is dead too


class OutputReLU(nn.Module):
    """A ReLU that can be made fake (``fake = True``): same forward, identity gradient."""

    def __init__(self) -> None:
        super().__init__()
        self.fake = False

    def forward(self, x: Tensor) -> Tensor:
        return _FakeReLUFunction.apply(x) if self.fake else torch.relu(x)

    def extra_repr(self) -> str:
        return "fake=True" if self.fake else ""


_RELUS = (nn.ReLU, OutputReLU)


def normalize_spec(spec: FakeReLUSpec) -> Union[str, Tuple[str, ...]]:
    """"published", "architecture", "off" or a tuple of module names (a comma-separated string is split)."""
    if spec is True or spec == PUBLISHED:
        return PUBLISHED
    if spec == ARCHITECTURE:
        return ARCHITECTURE
    if spec is None or spec is False or spec == OFF:
        return OFF
    if isinstance(spec, str):
        names = tuple(s.strip() for s in spec.split(",") if s.strip())
    else:
        try:
            names = tuple(spec)
        except TypeError:
            raise FakeReLUError(f"FakeReLU spec {spec!r}: give true/'published', 'architecture', false/'off' or "
                                "a list of module names") from None
    if not names or not all(isinstance(n, str) and n for n in names):
        raise FakeReLUError(f"FakeReLU spec {spec!r}: a list of module names must be non-empty strings")
    return names


def relu_modules(model: nn.Module) -> List[str]:
    """Paths of every ReLU module (``nn.ReLU``, ``OutputReLU``) of ``model``: what a spec can name."""
    return [name for name, m in model.named_modules() if isinstance(m, _RELUS)]


def _inner_prefix(model: nn.Module) -> str:
    """The path of the network ``model`` wraps (``inner``), with a trailing dot; '' when none."""
    inner = getattr(model, "inner", None)
    if isinstance(inner, nn.Module) and inner is not model:
        for name, module in model.named_modules():
            if module is inner and name:
                return name + "."
    return ""


def resolve_sites(model: nn.Module, spec: FakeReLUSpec) -> Tuple[str, ...]:
    """The module paths of ``model`` whose ReLU ``spec`` fakes (module docstring), in the model's order.

    A name that a cut network dropped (``dropped_modules``: it is never run) resolves to nothing.
    ``FakeReLUError`` listing the model's ReLU modules when a name is not one of them.
    """
    spec = normalize_spec(spec)
    if spec == OFF:
        return ()
    modules = dict(model.named_modules())
    if spec == PUBLISHED and not getattr(model, "published_fake_relu", False):
        return ()  # the original code fakes no ReLU of this network
    if spec in (PUBLISHED, ARCHITECTURE):
        sites = tuple(getattr(model, "fake_relu_sites", ()))
        for path in sites:  # a registered network's own list: a wrong entry is a bug, say so here
            if not isinstance(modules.get(path), OutputReLU):
                raise FakeReLUError(f"{type(model).__name__}.fake_relu_sites names {path!r}, which is not an "
                                    "OutputReLU of the model")
        return sites
    prefix, dropped = _inner_prefix(model), set(getattr(model, "dropped_modules", ()))
    found: List[str] = []
    for name in spec:
        path = name if name in modules else prefix + name if prefix and prefix + name in modules else None
        if path is None:
            if name in dropped:
                continue  # cut away with everything after the tap: faking it changes nothing
            raise FakeReLUError(f"FakeReLU site {name!r} is not a module of {type(model).__name__}; its ReLU "
                                f"modules: {_listing(model, prefix)}")
        if not isinstance(modules[path], _RELUS):
            raise FakeReLUError(f"FakeReLU site {name!r} of {type(model).__name__} is a "
                                f"{type(modules[path]).__name__}, not a ReLU module; its ReLU modules: "
                                f"{_listing(model, prefix)} (a functional relu cannot be faked: make it a module)")
        if path not in found:
            found.append(path)
    order = {name: i for i, name in enumerate(modules)}
    return tuple(sorted(found, key=order.__getitem__))


def _listing(model: nn.Module, prefix: str, limit: int = 24) -> str:
    names = [n[len(prefix):] if prefix and n.startswith(prefix) else n for n in relu_modules(model)]
    if not names:
        return "none"
    return str(names[:limit]) + (f" ... ({len(names)} in all)" if len(names) > limit else "")


def describe(model: nn.Module, spec: FakeReLUSpec) -> Dict[str, Any]:
    """For records and notes: the spec, whether anything is faked, the sites, the rule in words.

    {"spec": "published" | "off" | [names], "applied": bool, "sites": [paths], "rule": text}
    """
    norm = normalize_spec(spec)
    sites = resolve_sites(model, norm)
    if norm == PUBLISHED and not sites:
        rule = "the original STIR code fakes no ReLU of this network"
    elif norm in (PUBLISHED, ARCHITECTURE):
        rule = getattr(model, "fake_relu_rule", None) if getattr(model, "fake_relu_sites", ()) else None
        rule = rule or "the architecture has no FakeReLU rule: nothing is faked"
    elif norm == OFF:
        rule = "off"
    else:
        rule = "the modules named"
    return {"spec": norm if isinstance(norm, str) else list(norm), "applied": bool(sites), "sites": list(sites),
            "rule": rule}


def fake_relu_sites(model: nn.Module) -> List[OutputReLU]:
    """The ReLUs of ``model`` that the published rule fakes during inversion (empty if none)."""
    modules = dict(model.named_modules())
    return [modules[path] for path in resolve_sites(model, PUBLISHED)]


def _fake(module: nn.Module) -> Callable[[], None]:
    """Make one ReLU module fake; returns the function that restores it exactly."""
    if isinstance(module, OutputReLU):
        was = module.fake
        module.fake = True

        def undo_output() -> None:
            module.fake = was

        return undo_output
    was_inplace = module.inplace
    module.inplace = False  # the hook reads the input: an in-place ReLU would have overwritten it
    # prepend: taps reading this module's output (hooks added later) see the faked tensor
    handle = module.register_forward_hook(lambda _m, args, _out: _FakeReLUFunction.apply(args[0]), prepend=True)

    def undo_plain() -> None:
        handle.remove()
        module.inplace = was_inplace

    return undo_plain


@contextmanager
def faked(assignments: Iterable[Tuple[nn.Module, FakeReLUSpec]]) -> Iterator[List[Tuple[str, ...]]]:
    """Within the block every (model, spec) pair's sites are fake; yields each pair's sites, in order.

    Every spec is resolved before anything changes (a bad name leaves every model as it was); a
    module reached twice (one model given twice) is faked once and restored once.
    """
    pairs = list(assignments)
    resolved = [resolve_sites(model, spec) for model, spec in pairs]
    targets: Dict[int, nn.Module] = {}
    for (model, _), sites in zip(pairs, resolved):
        for path in sites:
            module = model.get_submodule(path)
            targets.setdefault(id(module), module)
    undo: List[Callable[[], None]] = []
    try:
        for module in targets.values():
            undo.append(_fake(module))
        yield resolved
    finally:
        for restore in reversed(undo):
            restore()


@contextmanager
def fake_relu(*models: nn.Module, enabled: FakeReLUSpec = True) -> Iterator[None]:
    """Within the block, the sites ``enabled`` names (True: each model's published rule) are fake."""
    with faked((m, enabled) for m in models):
        yield


class _RaisingReLUFunction(torch.autograd.Function):
    """ReLU whose gradient also passes through a dead unit where the loss wants that unit higher; a
    channel of a map counts as a unit, dead only where it is dead at every position (so that after a
    global pool it is a 0 of the representation), and the push reaches each of its positions."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:  # noqa: D401 - autograd signature
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        alive = x > 0
        # a unit (a channel of a (b, c, h, w) map: dead when dead at every position) that is dead throughout
        dead = ~alive.flatten(2).any(2)[..., None, None] if x.dim() == 4 else ~alive
        return grad * (alive | (dead & (grad < 0)))  # alive: the true gradient; dead unit: only a push upwards


def last_relu(model: nn.Module, probe: Tensor) -> str:
    """The path of the ReLU module (``nn.ReLU``, ``OutputReLU``) that ``model``'s forward on ``probe``
    calls last: the one in front of a post-ReLU representation; '' when it calls none."""
    order: List[str] = []
    handles = [m.register_forward_hook(lambda _m, _a, _o, name=name: order.append(name))
               for name, m in model.named_modules() if isinstance(m, _RELUS)]
    try:
        with torch.no_grad():
            model(probe)
    finally:
        for h in handles:
            h.remove()
    return order[-1] if order else ""


@contextmanager
def raising_relu(model: nn.Module, sites: Sequence[str]) -> Iterator[None]:
    """Within the block the ReLU modules ``sites`` of ``model`` pass the gradient where the unit is alive
    (the true gradient) and, where it is dead, only where the loss wants it higher (dL/dy < 0):

        forward:  y = max(x, 0)        backward:  dL/dx = dL/dy * [x > 0 or (unit dead and dL/dy < 0)]

    A one-sided FakeReLU for inversions: a unit that is positive in m(x) and dead in m(x') carries
    residual that the true gradient cannot remove (on the laptop ResNet18s a median 32% of it, issue 53),
    while FakeReLU's identity also moves units that should stay dead. Values are unchanged.
    """
    with _outputs_replaced(model, sites, _RaisingReLUFunction.apply):
        yield


@contextmanager
def softplus_relus(model: nn.Module, beta: Callable[[], float]) -> Iterator[None]:
    """Within the block every ReLU module of ``model`` (``relu_modules``) outputs softplus of its input,

        y = log(1 + exp(beta * x)) / beta        (-> max(x, 0) as beta -> inf)

    with ``beta()`` read at every call, so a caller can raise it step by step (a homotopy from a smooth
    network to the network itself: ``stir.inversion.iri``'s smoothing phase). Values change while it is
    on; everything (hooks, ``inplace``) is restored after, exceptions included. A functional relu is
    not reached (make it a module)."""
    with _outputs_replaced(model, relu_modules(model), lambda x: torch.nn.functional.softplus(x, beta=beta())):
        yield


@contextmanager
def _outputs_replaced(model: nn.Module, sites: Sequence[str], fn: Callable[[Tensor], Tensor]) -> Iterator[None]:
    """Within the block the modules ``sites`` of ``model`` output ``fn(their input)`` (a forward hook, first
    in line, with ``inplace`` off meanwhile: the hook reads the input); hooks and ``inplace`` restored
    after, exceptions included. Shared by ``raising_relu`` and ``softplus_relus``."""
    undo: List[Callable[[], None]] = []
    try:
        for path in sites:
            module = model.get_submodule(path)
            was_inplace = getattr(module, "inplace", None)
            if was_inplace:
                module.inplace = False
            handle = module.register_forward_hook(lambda _m, args, _out: fn(args[0]), prepend=True)

            def restore(handle=handle, module=module, was=was_inplace) -> None:
                handle.remove()
                if was:
                    module.inplace = was

            undo.append(restore)
        yield
    finally:
        for restore in reversed(undo):
            restore()
