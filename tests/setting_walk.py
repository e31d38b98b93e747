"""The walk of one setting through the code, computed from the source (AST, nothing imported).

``walk(project, entry, sink, value)`` follows a value from ``entry`` (a function whose first
annotated parameter holds the command line's config) to the call of ``sink`` (``stir.descent.descend``)
whose ``steps`` parameter receives the value's ``steps``:

* The value's *records* are ``value`` (the class, e.g. ``InversionConfig``), every project class that
  holds one of them in a typed field (the ``Estimator``, the ``Plan``, the ``Context``, ...:
  computed, transitively), and the entry's config type (``DictConfig``).
* A call passes the value when an argument (or the receiver of a method) is typed as a record;
  types come from annotations (parameters, fields, properties, return types, ``x: T = ...``),
  through assignments, ``a or b``, ``x if c else y``, ``dataclasses.replace(x, ...)`` and a
  ``TypeVar`` returned as given. Callees are resolved through each module's imports (package
  re-exports and lazy ``_LAZY`` maps included), ``self``, the receiver's type, and a registry's
  dispatch (``dispatch``: the registered function a call of a record's callable field runs).
* The *spine*: the functions on a chain of such calls from ``entry`` to the ``sink`` call. A
  *side trip*: a call made by a spine function (or by a side trip) whose result is a record and
  flows, through assignments, into the spine's next call (or into the side trip's return): where
  the value is read off the config, resolved or built into a record (``evaluate_config``,
  ``resolved_budgets``, ``open_context``, ``make_plan``).
* A function *handles* the value when it names it: an expression typed as ``value`` itself, its
  ``steps``, or the command line's config. Files whose functions only hand on a record that holds it
  (a ``Context``, a ``Call``) carry it unopened.

``Walk.files`` are the files that handle the value (and the sink's), ``Walk.carriers`` every file of
the spine and side trips. Restricted on purpose: a call the resolver cannot type or resolve is not
followed, which a test of the walk then shows as a broken chain (no path to the sink).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple, Union

STEPS = "<steps>"  # the type of ``<value>.steps``: the setting itself
ENTRY = "<config>"  # the type of the command line's config (DictConfig)


@dataclass
class Module:
    name: str
    path: str  # relative to the project root
    tree: ast.Module
    imports: Dict[str, Tuple[str, Optional[str]]] = field(default_factory=dict)  # local name -> (module, attr)
    lazy: Dict[str, str] = field(default_factory=dict)  # _LAZY = {name: module}


@dataclass(frozen=True)
class Def:
    module: str
    node: ast.AST  # FunctionDef or ClassDef
    owner: Optional[ast.ClassDef] = None  # a method's class

    @property
    def qualname(self) -> str:
        return f"{self.owner.name}.{self.node.name}" if self.owner is not None else self.node.name

    @property
    def is_class(self) -> bool:
        return isinstance(self.node, ast.ClassDef)


Type = Union[None, str, Def, Tuple]  # STEPS / ENTRY, a project class, a tuple of element types


class Project:
    def __init__(self, root: Path, files: Iterable[Path]):
        self.root = root
        self.modules: Dict[str, Module] = {}
        for path in files:
            rel = path.relative_to(root)
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join(parts)
            module = Module(name, str(rel), ast.parse(path.read_text(), str(path)))
            package = name if rel.name == "__init__.py" else name.rpartition(".")[0]
            for node in ast.walk(module.tree):
                if isinstance(node, ast.Import):
                    for a in node.names:
                        module.imports[a.asname or a.name.split(".")[0]] = (a.name if a.asname else a.name.split(".")[0], None)
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        up = package.split(".")[: len(package.split(".")) - node.level + 1]
                        base = ".".join(up + ([node.module] if node.module else []))
                    for a in node.names:
                        module.imports[a.asname or a.name] = (base, a.name)
                elif (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                      and node.targets[0].id == "_LAZY" and isinstance(node.value, ast.Dict)):
                    module.lazy = ast.literal_eval(node.value)
            self.modules[name] = module

    # ------------------------------------------------------------------------------ names
    def top(self, module: Module, name: str) -> Optional[Def]:
        for node in module.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                return Def(module.name, node)
        return None

    def resolve(self, module: Module, name: str, seen: Tuple = ()) -> Union[None, Def, Module]:
        """What ``name`` means in ``module``: a project function or class, a project module, or None."""
        if (module.name, name) in seen:
            return None
        seen += ((module.name, name),)
        found = self.top(module, name)
        if found is not None:
            return found
        if name in module.imports:
            base, attr = module.imports[name]
            return self.attribute(base, attr, seen) if attr is not None else self.modules.get(base)
        if name in module.lazy:
            return self.attribute(module.lazy[name], name, seen)
        return None

    def attribute(self, base: str, attr: str, seen: Tuple = ()) -> Union[None, Def, Module]:
        if f"{base}.{attr}" in self.modules:
            return self.modules[f"{base}.{attr}"]
        module = self.modules.get(base)
        return self.resolve(module, attr, seen) if module is not None else None

    def member(self, cls: Def, name: str) -> Optional[Def]:
        """The method ``name`` of class ``cls`` (or of a base class in the project)."""
        for node in cls.node.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return Def(cls.module, node, cls.node)
        for base in cls.node.bases:
            found = self.expr_def(self.modules[cls.module], base)
            if isinstance(found, Def) and found.is_class:
                method = self.member(found, name)
                if method is not None:
                    return method
        return None

    def field_annotation(self, cls: Def, name: str) -> Optional[Tuple[Module, ast.expr]]:
        for node in cls.node.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
                return self.modules[cls.module], node.annotation
        method = self.member(cls, name)
        if method is not None and any(_decorator(d) == "property" for d in method.node.decorator_list):
            return self.modules[method.module], method.node.returns
        for base in cls.node.bases:
            found = self.expr_def(self.modules[cls.module], base)
            if isinstance(found, Def) and found.is_class:
                ann = self.field_annotation(found, name)
                if ann is not None:
                    return ann
        return None

    def expr_def(self, module: Module, expr: ast.expr) -> Union[None, Def, Module]:
        if isinstance(expr, ast.Name):
            return self.resolve(module, expr.id)
        if isinstance(expr, ast.Attribute):
            base = self.expr_def(module, expr.value)
            if isinstance(base, Module):
                return self.attribute(base.name, expr.attr)
        return None

    def annotation(self, module: Module, ann: Optional[ast.expr]) -> Type:
        """The type an annotation names: a project class, ENTRY for DictConfig, a tuple, or None."""
        if ann is None:
            return None
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            try:
                ann = ast.parse(ann.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(ann, ast.Subscript):
            outer = ann.value.id if isinstance(ann.value, ast.Name) else getattr(ann.value, "attr", "")
            inner = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            if outer in ("Tuple", "tuple"):
                return tuple(self.annotation(module, e) for e in inner)
            if outer in ("Optional", "Union"):
                return next((t for t in (self.annotation(module, e) for e in inner) if t is not None), None)
            return None
        if isinstance(ann, ast.BinOp):  # X | None
            return self.annotation(module, ann.left) or self.annotation(module, ann.right)
        if isinstance(ann, ast.Name) and ann.id == "DictConfig":
            return ENTRY
        found = self.expr_def(module, ann)
        return found if isinstance(found, Def) and found.is_class else None


def _decorator(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")


def _params(fn: ast.AST) -> List[ast.arg]:
    a = fn.args
    return a.posonlyargs + a.args + a.kwonlyargs


@dataclass
class Walk:
    spine: List[Def]  # in the order found, entry first
    side_trips: List[Def]
    handlers: Set[Def]
    sink: Def

    def _files(self, defs: Iterable[Def], project: Project) -> List[str]:
        return sorted({project.modules[d.module].path for d in defs} | {project.modules[self.sink.module].path})

    def files(self, project: Project) -> List[str]:
        """The files whose code handles the value (names it, reads it off the config, resolves it), and the sink's."""
        return self._files(self.handlers, project)

    def carriers(self, project: Project) -> List[str]:
        """Every file of the spine and the side trips, the value named or carried unopened in a record."""
        return self._files(self.spine + self.side_trips, project)


class Walker:
    def __init__(self, project: Project, value: Tuple[str, str], sink: Tuple[str, str],
                 dispatch: Optional[Callable[["Walker", Def, str], Optional[Def]]] = None):
        self.p = project
        self.value = project.top(project.modules[value[0]], value[1])
        self.sink = project.top(project.modules[sink[0]], sink[1])
        assert self.value is not None and self.sink is not None, (value, sink)
        self.dispatch = dispatch
        self.records = self._records()
        self._analysed: Dict[Def, "Frame"] = {}

    def _records(self) -> Set[Def]:
        """The value's class and every project class holding a record in a typed field, transitively."""
        classes = [Def(m.name, n) for m in self.p.modules.values() for n in m.tree.body if isinstance(n, ast.ClassDef)]
        records = {self.value}
        grew = True
        while grew:
            grew = False
            for cls in classes:
                if cls in records:
                    continue
                module = self.p.modules[cls.module]
                for node in cls.node.body:
                    if isinstance(node, ast.AnnAssign) and self.p.annotation(module, node.annotation) in records:
                        records.add(cls)
                        grew = True
                        break
        return records

    def is_record(self, t: Type) -> bool:
        if isinstance(t, tuple):  # a function returning (record, other): the record flows on
            return any(self.is_record(x) for x in t)
        return t in self.records or t in (STEPS, ENTRY)

    def frame(self, fn: Def) -> "Frame":
        if fn not in self._analysed:
            self._analysed[fn] = Frame(self, fn)
        return self._analysed[fn]

    def walk(self, entry: Tuple[str, str]) -> Walk:
        start = self.p.top(self.p.modules[entry[0]], entry[1])
        assert start is not None, entry
        # every function reachable from the entry through calls that pass the value
        graph: Dict[Def, List[Tuple[ast.Call, Def]]] = {}
        todo = [start]
        while todo:
            fn = todo.pop()
            if fn in graph or fn.is_class:
                continue
            graph[fn] = self.frame(fn).edges
            todo += [callee for _, callee in graph[fn]]
        # the spine: functions from which a call of the sink with the value's steps is reached
        reaches = {fn for fn, edges in graph.items() if any(c == self.sink and self.frame(fn).steps_into(call)
                                                            for call, c in edges)}
        grew = True
        while grew:
            grew = False
            for fn, edges in graph.items():
                if fn not in reaches and any(c in reaches for _, c in edges):
                    reaches.add(fn)
                    grew = True
        if start not in reaches:
            raise ValueError(f"no chain of calls passes the value from {entry} to {self.sink.qualname}")
        spine = [fn for fn in graph if fn in reaches]
        spine = [start] + [fn for fn in spine if fn != start]
        # side trips: record-valued calls flowing into each spine function's next calls, then their own
        side: List[Def] = []
        trips = [(fn, [call for call, c in graph[fn] if c in reaches or c == self.sink]) for fn in spine]
        while trips:
            fn, outlets = trips.pop()
            for callee in self.frame(fn).feeding(outlets):
                if callee not in side and callee not in spine:
                    side.append(callee)
                    if not callee.is_class:
                        trips.append((callee, self.frame(callee).returns))
        handlers = {fn for fn in spine + side if self.frame(fn).handles}
        return Walk(spine, side, handlers, self.sink)


class Frame:
    """One function's local types, the calls it makes that pass the value, and what flows into what."""

    def __init__(self, w: Walker, fn: Def):
        self.w, self.fn = w, fn
        self.module = w.p.modules[fn.module]
        self.types: Dict[str, Type] = {}
        self.sources: Dict[str, List[ast.AST]] = {}  # name -> the expressions assigned to it
        if fn.is_class:
            self.edges, self.returns, self.handles = [], [], False
            return
        for a in _params(fn.node):
            t = w.p.annotation(self.module, a.annotation)
            if a.arg in ("self", "cls") and fn.owner is not None:
                t = Def(fn.module, fn.owner)
            if t is not None:
                self.types[a.arg] = t
        nodes = sorted((n for n in ast.walk(fn.node) if isinstance(n, (ast.Assign, ast.AnnAssign))),
                       key=lambda n: (n.lineno, n.col_offset))
        for node in nodes:  # in source order, twice: a name typed by a later line
            self._assign(node)
        for node in nodes:
            self._assign(node)
        self.edges: List[Tuple[ast.Call, Def]] = []
        self._bound: Dict[int, Dict[str, ast.expr]] = {}
        for call in (n for n in ast.walk(fn.node) if isinstance(n, ast.Call)):
            callee, receiver = self.callee(call)
            if callee is None:
                continue
            bound = self.bind(call, callee, receiver)
            if any(self.w.is_record(self.type_of(e)) for e in bound.values()):
                self.edges.append((call, callee))
                self._bound[id(call)] = bound
        self.returns = [n for n in ast.walk(fn.node) if isinstance(n, ast.Return) and n.value is not None]
        self.handles = any(self.type_of(n) in (w.value, STEPS, ENTRY)
                           for n in ast.walk(fn.node) if isinstance(n, (ast.Name, ast.Attribute)))

    # ---------------------------------------------------------------------------- types
    def _assign(self, node: ast.AST) -> None:
        if isinstance(node, ast.AnnAssign):
            targets, t = [node.target], self.w.p.annotation(self.module, node.annotation)
            if isinstance(node.target, ast.Name) and t is not None:
                self.types[node.target.id] = t
                self.sources.setdefault(node.target.id, []).append(node.value)
            return
        for target in node.targets:
            self._bind_target(target, node.value)

    def _bind_target(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            t = self.type_of(value)
            if t is not None and target.id not in self.types:
                self.types[target.id] = t
            self.sources.setdefault(target.id, []).append(value)
        elif isinstance(target, ast.Tuple):
            if isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts):
                    self._bind_target(t, v)
                return
            t = self.type_of(value)
            for i, elt in enumerate(target.elts):
                if isinstance(elt, ast.Name):
                    if isinstance(t, tuple) and i < len(t) and t[i] is not None and elt.id not in self.types:
                        self.types[elt.id] = t[i]
                    self.sources.setdefault(elt.id, []).append(value)

    def type_of(self, e: Optional[ast.expr]) -> Type:
        p = self.w.p
        if isinstance(e, ast.Name):
            return self.types.get(e.id)
        if isinstance(e, ast.Attribute):
            base = self.type_of(e.value)
            if base == self.w.value and e.attr in ("steps", "num_steps"):
                return STEPS
            if isinstance(base, Def) and base.is_class:
                ann = p.field_annotation(base, e.attr)
                return p.annotation(*ann) if ann is not None else None
            return None
        if isinstance(e, ast.BoolOp):
            return next((t for t in map(self.type_of, e.values) if t is not None), None)
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub):  # steps - a phase's share: still the budget
            return STEPS if self.type_of(e.left) == STEPS else None
        if isinstance(e, ast.IfExp):
            return self.type_of(e.body) or self.type_of(e.orelse)
        if isinstance(e, ast.Tuple):
            return tuple(self.type_of(x) for x in e.elts)
        if isinstance(e, ast.Call):
            if _decorator(e.func) == "replace" and e.args:  # dataclasses.replace(x, ...): x's type
                return self.type_of(e.args[0])
            callee, receiver = self.callee(e)
            if callee is None:
                return None
            if callee.is_class:
                return callee
            ret = callee.node.returns
            module = p.modules[callee.module]
            for a in _params(callee.node):  # a TypeVar T: the type of the argument given as T, or as Type[T]
                if not (isinstance(ret, ast.Name) and p.annotation(module, ret) is None):
                    break
                ann = a.annotation
                if isinstance(ann, ast.Name) and ann.id == ret.id:
                    arg = self.bind(e, callee, receiver).get(a.arg)
                    return self.type_of(arg) if arg is not None else None
                if (isinstance(ann, ast.Subscript) and _decorator(ann.value) == "Type"
                        and isinstance(ann.slice, ast.Name) and ann.slice.id == ret.id):
                    arg = self.bind(e, callee, receiver).get(a.arg)
                    found = p.expr_def(self.module, arg) if arg is not None else None
                    return found if isinstance(found, Def) and found.is_class else None
            return p.annotation(module, ret)
        return None

    def callee(self, call: ast.Call) -> Tuple[Optional[Def], Optional[ast.expr]]:
        """(the project function or class ``call`` runs, the receiver bound to ``self``) or (None, None)."""
        p, f = self.w.p, call.func
        if isinstance(f, ast.Name):
            found = p.resolve(self.module, f.id)
            return (found, None) if isinstance(found, Def) else (None, None)
        if not isinstance(f, ast.Attribute):
            return None, None
        static = p.expr_def(self.module, f)
        if isinstance(static, Def):
            return static, None
        holder = p.expr_def(self.module, f.value)
        if isinstance(holder, Def) and holder.is_class:  # Class.method(...): a classmethod or staticmethod
            return p.member(holder, f.attr), None
        base = self.type_of(f.value)
        if isinstance(base, Def) and base.is_class:
            method = p.member(base, f.attr)
            if method is not None:
                return method, f.value
            if self.w.dispatch is not None:  # a callable field of a record: what the registry runs
                return self.w.dispatch(self.w, base, f.attr), None
        return None, None

    def bind(self, call: ast.Call, callee: Def, receiver: Optional[ast.expr]) -> Dict[str, ast.expr]:
        """{parameter: argument} of ``call`` to ``callee`` (the receiver as ``self``)."""
        if callee.is_class:
            return {f"arg{i}": a for i, a in enumerate(call.args)} | {k.arg: k.value for k in call.keywords if k.arg}
        names = [a.arg for a in callee.node.args.posonlyargs + callee.node.args.args]
        is_method = callee.owner is not None and not any(
            _decorator(d) == "staticmethod" for d in callee.node.decorator_list)
        out: Dict[str, ast.expr] = {}
        if is_method and names:
            if receiver is not None:
                out[names[0]] = receiver
            names = names[1:]
        for name, arg in zip(names, call.args):
            out[name] = arg
        out.update({k.arg: k.value for k in call.keywords if k.arg})
        return out

    def steps_into(self, call: ast.Call) -> bool:
        """Whether ``call`` (of the sink) hands the value's steps to its ``steps`` parameter."""
        arg = self._bound.get(id(call), {}).get("steps")
        return arg is not None and self.type_of(arg) == STEPS

    # ---------------------------------------------------------------------------- flow
    def feeding(self, outlets: List[ast.AST]) -> List[Def]:
        """The record-valued calls of this function whose results flow into ``outlets`` (calls: through
        their arguments and receiver; returns: through their value), through the assignments between."""
        used: List[Def] = []
        seen: Set[int] = set()
        names: Set[str] = set()
        todo: List[ast.AST] = []
        for node in outlets:
            if isinstance(node, ast.Call):
                todo += node.args + [k.value for k in node.keywords]
                todo += [node.func.value] if isinstance(node.func, ast.Attribute) else []
            else:
                todo.append(node)
        while todo:
            for sub in ast.walk(todo.pop()):
                if isinstance(sub, ast.Name) and sub.id not in names:
                    names.add(sub.id)
                    todo += self.sources.get(sub.id, [])
                elif isinstance(sub, ast.Call) and id(sub) not in seen:
                    seen.add(id(sub))
                    edge = next((c for call, c in self.edges if call is sub), None)
                    if edge is not None and self.w.is_record(self.type_of(sub)) and edge not in used:
                        used.append(edge)
        return used


def walk_files(root: Path, files: Iterable[Path], entry, value, sink, dispatch=None) -> Tuple[Walk, Project]:
    project = Project(root, files)
    return Walker(project, value, sink, dispatch).walk(entry), project
