"""What every model source returns, and the parts they share: the [0, 1] wrapper, taps, identity.

A source turns a string (``torchvision:resnet18``) and its options into a ``LoadedModel``: an
``nn.Module`` taking images in [0, 1] and returning (n, classes) logits, with named taps
(``penultimate`` at least), a content identity for result stores and caches, and a record for
reports. Foreign networks are wrapped in ``SourcedModel``: optional input normalisation (the
library's own constants, as buffers) around the network, and the named taps.
"""
from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from stir.models.identity import callable_identity, content_identity
from stir.models.normalize import Normalize
from stir.models.taps import LOGITS, TapPoint, find_penultimate, representation, tap_point
from stir.models.weights import first_mismatch
from stir.untrusted import UnsafeFileError, first_line, load_plain

log = logging.getLogger(__name__)

PENULTIMATE = "penultimate"
PYTHON_PREFIX = "python:"


class SourceError(ValueError):
    """A model source cannot make the model asked for; the message names the problem and the fix."""


@dataclass(frozen=True)
class RobustBenchOptions:
    """RobustBench's coordinates of a model: its benchmark and where its weights live."""

    dataset: str = "cifar10"  # cifar10 | cifar100 | imagenet
    threat_model: str = "L2"  # Linf | L2 | corruptions
    model_dir: str = "models"  # RobustBench's layout: <model_dir>/<dataset>/<threat_model>/<name>.pt


@dataclass(frozen=True)
class SourceOptions:
    """How one model is made from its source string (all optional)."""

    weights: Optional[str] = None  # a state-dict file, or the library's pretrained tag (torchvision: DEFAULT, IMAGENET1K_V1; timm: pretrained)
    weights_root: Optional[str] = None  # realnet: the folder of the real networks' files (default: $STIR_REALNETS, ../shared/realnets)
    tap: Optional[str] = None  # what `penultimate` reads: a module name, NAME:input, or python:module:function
    mean: Optional[Sequence[float]] = None  # input normalisation; default: the library's metadata (torchvision/timm), none otherwise
    std: Optional[Sequence[float]] = None
    normalize: bool = True  # false: the network already takes [0, 1] images
    num_classes: Optional[int] = None  # head size for an architecture built without pretrained weights
    kwargs: Mapping[str, Any] = field(default_factory=dict)  # more arguments of the builder / factory
    download: bool = False  # let the library download weights that are not on disk
    image_size: int = 32  # side of the probe batch that checks the output is (n, classes) logits
    robustbench: RobustBenchOptions = field(default_factory=RobustBenchOptions)


@dataclass
class LoadedModel:
    """A model from a source: the module ([0, 1] images -> logits, eval mode, CPU) and its papers."""

    module: nn.Module
    taps: Dict[str, str]  # named tap -> what it reads (e.g. penultimate -> "fc:input")
    identity: str  # sha256 of the weights, normalisation and named-tap definitions
    record: Dict[str, Any]  # for reports: source, weights file, normalisation, taps, identity


class SourcedModel(nn.Module):
    """A foreign network as this project's models are: [0, 1] images in, logits out, named taps.

    ``forward(x) = net(normalize(x))``. ``named_taps`` maps names (``penultimate``) to points of
    ``net`` (module names are ``net``'s own: ``inner`` tells ``stir.models.taps`` so). The named
    taps' definitions are kept as a persistent buffer, so that the state dict, and with it every
    content hash (store keys, the inversion cache), changes when ``penultimate`` means another layer
    (for a ``python:`` tap function, when its source changes). ``origin`` says in a few words where the
    network's code came from (a ``python:`` factory: the sha256 of its module's source, its arguments);
    it is the ``extra_repr``, so ``content_identity`` covers it.
    """

    def __init__(self, net: nn.Module, mean: Optional[Sequence[float]] = None, std: Optional[Sequence[float]] = None):
        super().__init__()
        self.normalize = Normalize(mean, std) if mean is not None else nn.Identity()
        self.net = net
        self.named_taps: Dict[str, TapPoint] = {}
        self.origin = ""
        self.register_buffer("tap_definitions", torch.zeros(32, dtype=torch.uint8))

    @property
    def inner(self) -> nn.Module:
        return self.net

    def forward(self, x: Tensor) -> Tensor:  # (b, c, h, w) in [0, 1] -> (b, classes)
        return self.net(self.normalize(x))

    def extra_repr(self) -> str:
        return f"origin={self.origin}" if self.origin else ""  # in content_identity (stir.models.identity)

    def set_taps(self, taps: Mapping[str, str]) -> None:
        """Name taps: {name: module name | NAME:input | python:module:function} of ``net``."""
        self.named_taps, points = {}, {}  # module names resolve against net, not earlier named taps
        code = {}
        for name, spec in taps.items():
            if spec.startswith(PYTHON_PREFIX):
                fn = import_object(spec[len(PYTHON_PREFIX):], what="tap function")
                code[name] = callable_identity(fn)  # the tap's code is part of what the model is
                # The function sees the user's own network and the batch as that network receives it.
                points[name] = TapPoint(fn=lambda model, x, fn=fn: fn(model.net, model.normalize(x)), spec=spec)
            else:
                point = tap_point(self, spec)
                points[name] = TapPoint(module=point.module, at=point.at, fn=point.fn, spec=spec)
        self.named_taps = points
        definitions = dict(sorted(taps.items()))
        if code:
            definitions = {"taps": definitions, "code": dict(sorted(code.items()))}
        digest = hashlib.sha256(json.dumps(definitions).encode()).digest()
        self.tap_definitions.copy_(torch.tensor(list(digest), dtype=torch.uint8))


def builder_origin(spec: str, kwargs: Mapping[str, Any]) -> str:
    """The ``origin`` of a network a library builder made (``torchvision:``, ``timm:``): the arguments
    given to it beyond the defaults, so an argument that changes what it computes without changing
    its weights or module tree is in the identity; "" without any (the identity as before)."""
    return f"{spec} kwargs {json.dumps(dict(kwargs), sort_keys=True, default=repr)}" if kwargs else ""


def wrap(net: nn.Module, options: SourceOptions, mean: Optional[Sequence[float]], std: Optional[Sequence[float]],
         spec: str, record: Dict[str, Any], origin: str = "") -> LoadedModel:
    """Wrap a foreign network: normalisation, named taps (``penultimate`` found when not given),
    a check that it returns (n, classes) logits, its identity and record. ``origin``: where its code
    came from, beyond the module tree (``SourcedModel``), part of the identity."""
    if options.mean is not None or options.std is not None:
        if options.mean is None or options.std is None:
            raise SourceError(f"{spec}: give both mean and std for the input normalisation, or neither")
        mean, std = options.mean, options.std
    if not options.normalize:
        mean = std = None
    model = SourcedModel(net.eval(), mean, std).eval()
    model.origin = origin
    probe = _probe(model, options.image_size)
    check_logits(model, probe, spec)
    if options.tap is not None:
        penultimate = options.tap
    else:
        with torch.no_grad():
            penultimate = find_penultimate(model.net, model.normalize(probe))
    model.set_taps({PENULTIMATE: penultimate})
    with torch.no_grad():
        rep = representation(model, probe, PENULTIMATE)  # (2, d): the tap reads something
    taps = {PENULTIMATE: penultimate, LOGITS: LOGITS}
    identity = content_identity(model)
    record = {**record, "spec": spec, "identity": identity, "sha256": identity, "taps": taps,
              "penultimate_dim": int(rep.shape[1]),
              "normalization": {"mean": list(map(float, mean)), "std": list(map(float, std))} if mean is not None else None}
    log.info("%s: penultimate = %s (%d features), normalisation %s", spec, penultimate, rep.shape[1],
             record["normalization"] or "none (takes [0, 1] images)")
    return LoadedModel(module=model, taps=taps, identity=identity, record=record)


def _probe(model: nn.Module, size: int) -> Tensor:
    """Two fixed images (2, 3, size, size) in [0, 1] on the model's device and dtype."""
    ref = next((t for t in [*model.parameters(), *model.buffers()] if t.is_floating_point()), None)
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(2, 3, size, size, generator=gen)
    return x if ref is None else x.to(device=ref.device, dtype=ref.dtype)


def check_logits(model: nn.Module, x: Tensor, spec: str) -> None:
    """The model must map a (b, c, h, w) batch to a (b, classes) tensor of logits."""
    try:
        with torch.no_grad():
            out = model(x)
    except (RuntimeError, AssertionError, IndexError, TypeError) as err:  # shapes, dtypes, the network's own asserts
        raise SourceError(f"{spec}: the model cannot take a {tuple(x.shape)} batch of images in [0, 1] "
                          f"({first_line(err)})") from err
    if not isinstance(out, Tensor) or out.dim() != 2 or out.shape[0] != x.shape[0]:
        got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
        raise SourceError(
            f"{spec}: the model must return (n, classes) logits; for a batch of {x.shape[0]} images it returned {got}. "
            "Wrap it in a module whose forward returns the logits tensor (python:module:factory)"
        )


def import_object(path: str, what: str) -> Any:
    """``module.path:attribute`` -> the object (importlib; no eval): a class or function of a module
    outside the standard library. ``os:system``, ``builtins:open``, ``subprocess:run`` ... are refused
    by name before anything is imported (``SourceError``); so is anything that is not a class or a
    Python function (a builtin, an instance with ``__call__``)."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise SourceError(f"{what} {path!r} must be written module.path:name (e.g. mypackage.nets:make_net)")
    top = module_name.split(".")[0]
    if top in sys.stdlib_module_names or top in sys.builtin_module_names or top in ("builtins", "__main__"):
        raise SourceError(f"{what} {path!r} names the standard library ({top}), not a class or function of your "
                          "own module: a python: source is code you wrote (mypackage.nets:make_net)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise SourceError(f"{what} {path!r}: cannot import module {module_name!r} ({err}); is it on PYTHONPATH?") from err
    except Exception as err:  # the module itself fails on import: its error in one line
        raise SourceError(f"{what} {path!r}: importing module {module_name!r} raised {type(err).__name__}: {err}") from err
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise SourceError(f"{what} {path!r}: module {module_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    if not (inspect.isclass(obj) or inspect.isfunction(obj)):
        raise SourceError(f"{what} {path!r} is a {type(obj).__name__}, not a class or function of your own module")
    return obj


def load_weights_file(net: nn.Module, path: str, spec: str) -> Path:
    """Load a state-dict file (a plain state dict or {'state_dict': ...}; DataParallel's 'module.'
    prefixes removed) into ``net`` strictly; SourceError naming the file otherwise."""
    file, state = read_state_dict(path, spec)
    problem = first_mismatch(net.state_dict(), state)  # one line, not torch's list of every key
    if problem is not None:
        raise SourceError(f"{spec}: the weights in {file} do not fit the architecture ({type(net).__name__}): {problem}")
    try:
        net.load_state_dict(state)
    except RuntimeError as err:
        raise SourceError(f"{spec}: the weights in {file} do not fit the architecture: {str(err).splitlines()[0]}") from err
    return file


def classes_in_weights(net: nn.Module, path: str, spec: str) -> Optional[int]:
    """The class count of a weights file when it differs from ``net``'s: the rows of the weight of
    ``net``'s last ``nn.Linear`` in the file (None when equal, or when the file has no such entry)."""
    linears = [(name, m) for name, m in net.named_modules() if isinstance(m, nn.Linear)]
    _, state = read_state_dict(path, spec)
    weight = state.get(f"{linears[-1][0]}.weight") if linears else None
    if weight is None or weight.dim() != 2 or weight.shape[0] == linears[-1][1].out_features:
        return None
    return int(weight.shape[0])


def read_state_dict(path: str, spec: str) -> Tuple[Path, Dict[str, Tensor]]:
    file = Path(path)
    if not file.is_file():
        raise SourceError(f"{spec}: no weights file at {file}")
    try:
        blob = load_plain(file)
    except UnsafeFileError as err:  # a file that asks to run code: one line, never loaded
        raise SourceError(f"{spec}: {err}") from None
    except Exception as err:  # a corrupt or foreign file: say which and why
        raise SourceError(f"{spec}: cannot read weights from {file}: {first_line(err)}") from err
    state = blob.get("state_dict", blob) if isinstance(blob, dict) else blob
    if not isinstance(state, dict):
        raise SourceError(f"{spec}: {file} holds a {type(state).__name__}, not a state dict")
    return file, {k[len("module."):] if k.startswith("module.") else k: v for k, v in state.items()}


def split_spec(spec: str) -> Tuple[str, str]:
    """'prefix:rest' -> (prefix, rest); ('', spec) when there is no prefix."""
    prefix, sep, rest = spec.partition(":")
    return (prefix, rest) if sep else ("", spec)
