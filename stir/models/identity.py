"""One content hash for every model, loaded or on disk: what names a model in every key.

A model is what it computes: its weights and buffers *and* the code that runs them. Two networks
with the same state dict and another forward (ReLU against tanh, a dropout forced on, a ``detach``
inside) are different models, and must not share a stored result or a cached inversion.

``content_identity(module)`` is the sha256 of

* the state dict (``state_dict_identity``: names in sorted order, each with its dtype, shape and
  raw bytes), and
* the code (``code_identity``): for every submodule, in ``named_modules`` order, its name, its
  class's qualified name and ``extra_repr`` (a convolution's stride and padding, a dropout's p,
  which no state dict holds), the functions it holds (``self.act = torch.tanh``) and its forward
  hooks (forward and backward, and torch's global module hooks: a backward hook changes the
  gradients an inversion descends); and the source of every method its class resolves to outside torch (``inspect.getsource``;
  the qualified name where there is no source). torch's own classes are named, not read: their code
  is that of the installed torch, which every record states.

Plain attributes (numbers, strings) are not read: they change as a model runs (a counter of forward
passes, a flag set for one experiment), and an identity must not move between the zoo reading a model
and the inversion cache keying it. What a setting decides shows in the code, the weights' shapes or
``extra_repr``; a wrapper that knows more says it there (``SourcedModel``: the factory's code and
arguments).

The same weights and code give the same identity in any process, on any device, from any import
path (the module path of a class is not in it, its source is), whichever file or source they came
from. It keys the results store, the inversion cache and every provenance record. Editing a network's
source (even a comment inside a method) changes its identity: results are then recomputed, never
shared with the code before.

``state_dict_identity(state)`` is the weights part alone, for a weights file (a file holds no code);
``tensor_digest(t)`` hashes one tensor (an image set) the same way.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import re
from typing import Any, Iterator, List, Mapping

import torch
from torch import Tensor, nn

_PREFIX = b"stir-model-v1\n"
_CODE_PREFIX = b"stir-model-code-v1\n"
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # reprs of functions and objects: not stable across processes
# Hooks on a module: the forward ones change what it computes; the backward ones change the gradients
# an inversion descends (a hook that scales or clips them moves every x', not one output), which no
# forward probe sees. A module without hooks hashes as before (an empty dict adds nothing).
_HOOKS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")
# torch's global module hooks (``nn.modules.module.register_module_*_hook``) run on every module.
_GLOBAL_HOOKS = ("_global_forward_pre_hooks", "_global_forward_hooks", "_global_backward_pre_hooks",
                 "_global_backward_hooks")


def state_dict_identity(state: Mapping[str, Tensor]) -> str:
    """sha256 hex of a state dict: sorted names, dtypes, shapes and bytes."""
    h = hashlib.sha256(_PREFIX)
    for name, value in sorted(state.items()):
        t = value.detach().cpu().contiguous().reshape(-1)  # 0-d tensors (num_batches_tracked) too
        h.update(f"{name}\n{t.dtype}\n{tuple(value.shape)}\n".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _is_torch(obj: Any) -> bool:
    return (getattr(obj, "__module__", None) or "").split(".")[0] == "torch"


def _qualname(obj: Any) -> str:
    """A function's or class's qualified name without its module path (an import path is not code)."""
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__qualname__


def _source(obj: Any) -> str:
    """The source text of a function or class, or its qualified name where Python has none (a class
    made with ``type(...)``, a C function, code typed into a REPL)."""
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return f"<no source: {_qualname(obj)}>"


def callable_identity(fn: Any) -> str:
    """What a function held by a model computes: torch's by name, any other by its source.

    ``functools.partial`` by its function and arguments; a bound method by its function.
    """
    if isinstance(fn, functools.partial):
        return f"partial({callable_identity(fn.func)}, {_ADDRESS.sub('', repr(fn.args))}, " \
               f"{_ADDRESS.sub('', repr(sorted(fn.keywords.items())))})"
    fn = getattr(fn, "__func__", fn)
    if _is_torch(fn) or not (inspect.isfunction(fn) or inspect.isclass(fn)):
        module = getattr(fn, "__module__", None) or ""
        return f"{module.split('.')[0] + ':' if module else ''}{_qualname(fn)}"
    return _source(fn)


@functools.lru_cache(maxsize=None)
def _class_code(cls: type) -> str:
    """The code a module class runs: its qualified name, then every method (function, property,
    static or class method) it resolves to outside torch, by name and source, in sorted order."""
    resolved = {}
    for klass in cls.__mro__:
        if klass is object or _is_torch(klass):
            continue
        for name, member in vars(klass).items():
            if name in resolved or name.startswith("__") and name not in ("__call__", "__init__"):
                continue
            if isinstance(member, property):
                member = member.fget
            member = getattr(member, "__func__", member)  # staticmethod / classmethod
            if inspect.isfunction(member):
                resolved[name] = member
    parts = [f"class {_qualname(cls)} of {'torch' if _is_torch(cls) else 'user code'}"]
    parts += [f"def {name}:\n{_source(fn)}" for name, fn in sorted(resolved.items())]
    return "\n".join(parts)


def _settings(module: nn.Module) -> Iterator[str]:
    """The functions one module holds as attributes, and its forward hooks (not its parameters,
    buffers, submodules, mode, plain values or private state)."""
    for name, value in sorted(vars(module).items()):
        if name.startswith("_") or isinstance(value, (nn.Module, Tensor, type)):
            continue
        if callable(value):
            yield f"{name}=<fn {callable_identity(value)}>"
    for kind in _HOOKS:
        for hook in getattr(module, kind, {}).values():
            yield f"{kind}=<fn {callable_identity(hook)}>"


def code_identity(model: nn.Module) -> str:
    """sha256 hex of the code ``model`` runs (module docstring): per submodule its name, class code,
    ``extra_repr``, held functions and hooks."""
    h = hashlib.sha256(_CODE_PREFIX)
    for name, module in model.named_modules(remove_duplicate=False):
        lines: List[str] = [f"module {name!r}", _class_code(type(module)),
                            f"extra_repr {_ADDRESS.sub('', module.extra_repr())}", *_settings(module)]
        h.update("\n".join(lines).encode())
        h.update(b"\0")
    for kind in _GLOBAL_HOOKS:  # none registered (the usual case): nothing added, the identity as before
        for hook in getattr(nn.modules.module, kind, {}).values():
            h.update(f"{kind}=<fn {callable_identity(hook)}>\0".encode())
    return h.hexdigest()


def content_identity(model: nn.Module) -> str:
    """sha256 hex identifying ``model`` by its weights and buffers and the code that runs them."""
    h = hashlib.sha256(b"stir-model-v2\n")
    h.update(state_dict_identity(model.state_dict()).encode())
    h.update(code_identity(model).encode())
    return h.hexdigest()


def tensor_digest(t: Tensor) -> str:
    """sha256 hex of a tensor's dtype, shape and bytes (device-independent)."""
    t = t.detach().cpu().contiguous()
    h = hashlib.sha256(f"{t.dtype}|{tuple(t.shape)}|".encode())
    h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())  # raw bytes of any dtype (bf16 too)
    return h.hexdigest()
