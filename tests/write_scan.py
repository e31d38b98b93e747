"""Find direct file writes in Python sources with the AST (issue 32: every write goes through ``stir.atomic``).

``scan(root)`` walks every ``*.py`` under ``root`` and returns one ``Write`` per call that writes a
file other than through ``stir.atomic``:

- ``open`` / ``<x>.open`` / ``gzip.open`` / ``io.open`` / ``codecs.open`` with a mode holding w, a, x or +;
  ``os.open`` with O_WRONLY / O_RDWR / O_CREAT; ``tarfile.open`` / ``zipfile.ZipFile`` for writing;
- ``<x>.write_text`` / ``<x>.write_bytes`` (``pathlib``), unless ``<x>`` is the ``stir.atomic`` module;
- ``json.dump`` / ``pickle.dump`` / ``yaml.dump`` / ``yaml.safe_dump`` / ``torch.save`` / ``np.save*`` /
  ``OmegaConf.save`` / ``<x>.savefig`` / ``<x>.save`` (PIL, ...) / ``csv.writer`` / ``csv.DictWriter`` /
  ``<x>.to_csv`` / ``<x>.tofile`` / ``shutil.copy*`` / ``<x>.touch`` / ``logging.FileHandler`` /
  Lightning's ``save_hparams_to_yaml``,
  unless their target is an in-memory buffer: a name bound to ``io.BytesIO()`` / ``io.StringIO()``
  in the same function (or module), or such a call itself.

``<x>.open(...)`` is reported only with a literal write mode (or a ``mode=`` keyword): a first
argument that is not a string is a file to read (``Image.open(fp)``). Writes made inside
libraries (Lightning's checkpoints through ``AtomicCheckpointIO``, W&B's run files, Hydra's
output folder, ``FileLock``'s lock files) are not calls of this code and are not seen.

A call of a name imported from ``stir.atomic`` (``from stir.atomic import write_text``) is the
sanctioned path and is not reported; neither is anything in ``stir/atomic.py`` itself.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Set

ATOMIC_MODULES = {"stir.atomic"}
BUFFERS = {"BytesIO", "StringIO"}
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}


@dataclass(frozen=True)
class Write:
    path: str  # relative to the scanned root, with "/"
    line: int
    scope: str  # the enclosing function's qualified name ("<module>" at top level)
    call: str  # what writes: "open", "write_text", "savefig", "torch.save", ...

    def __str__(self) -> str:
        return f"{self.path}:{self.line} in {self.scope}: {self.call}"


def _dotted(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _const_str(node: Optional[ast.AST]) -> Optional[str]:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _arg(call: ast.Call, index: int, keyword: str) -> Optional[ast.AST]:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return call.args[index] if len(call.args) > index else None


def _writes_mode(mode: Optional[ast.AST], default: str = "r") -> bool:
    text = _const_str(mode)
    if mode is not None and text is None:
        return True  # a mode computed at run time: assume it writes
    return any(c in (text if text is not None else default) for c in "wax+")


class _Scanner(ast.NodeVisitor):
    def __init__(self, rel: str):
        self.rel = rel
        self.found: List[Write] = []
        self.scopes: List[str] = []
        self.buffers: List[Set[str]] = [set()]
        self.atomic_modules: Set[str] = set()  # local names of the stir.atomic module
        self.atomic_names: Set[str] = set()  # functions imported from it

    # -- bookkeeping -------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name in ATOMIC_MODULES:
                self.atomic_modules.add(alias.asname or alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for alias in node.names:
            if f"{module}.{alias.name}" in ATOMIC_MODULES:
                self.atomic_modules.add(alias.asname or alias.name)
            elif module in ATOMIC_MODULES:
                self.atomic_names.add(alias.asname or alias.name)

    def _scoped(self, node, name: str) -> None:
        self.scopes.append(name)
        self.buffers.append(set(self._buffer_names(node)))
        self.generic_visit(node)
        self.buffers.pop()
        self.scopes.pop()

    def visit_FunctionDef(self, node) -> None:
        self._scoped(node, node.name)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scopes.append(node.name)
        self.generic_visit(node)
        self.scopes.pop()

    def visit_Module(self, node: ast.Module) -> None:
        self.buffers = [set(self._buffer_names(node))]
        self.generic_visit(node)

    @staticmethod
    def _is_buffer_call(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and (_dotted(node.func) or "").rsplit(".", 1)[-1] in BUFFERS

    def _buffer_names(self, scope: ast.AST) -> Iterator[str]:
        """Names bound to io.BytesIO()/StringIO() in ``scope`` (not descending into nested functions)."""
        stack = list(ast.iter_child_nodes(scope))
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(node, ast.Assign) and self._is_buffer_call(node.value):
                yield from (t.id for t in node.targets if isinstance(t, ast.Name))
            if isinstance(node, ast.With):
                for item in node.items:
                    if self._is_buffer_call(item.context_expr) and isinstance(item.optional_vars, ast.Name):
                        yield item.optional_vars.id
            stack.extend(ast.iter_child_nodes(node))

    def _in_memory(self, target: Optional[ast.AST]) -> bool:
        if target is None:
            return False
        if self._is_buffer_call(target):
            return True
        return isinstance(target, ast.Name) and any(target.id in b for b in self.buffers)

    def _report(self, node: ast.Call, call: str) -> None:
        self.found.append(Write(self.rel, node.lineno, ".".join(self.scopes) or "<module>", call))

    # -- the calls ---------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        name = _dotted(node.func) or ""
        attr = node.func.attr if isinstance(node.func, ast.Attribute) else None
        receiver = _dotted(node.func.value) if isinstance(node.func, ast.Attribute) else None
        if receiver in self.atomic_modules or (isinstance(node.func, ast.Name) and name in self.atomic_names):
            return  # stir.atomic: the sanctioned path
        call = self._kind(node, name, attr)
        if call:
            self._report(node, call)

    def _kind(self, node: ast.Call, name: str, attr: Optional[str]) -> Optional[str]:
        last = name.rsplit(".", 1)[-1] if name else attr
        if name in ("open", "io.open", "codecs.open", "gzip.open", "bz2.open", "lzma.open"):
            return name if _writes_mode(_arg(node, 1, "mode")) else None
        if attr == "open" and name not in ("os.open", "tarfile.open"):  # Path.open(mode); not Image.open(fp)
            mode = _arg(node, 0, "mode")
            text = _const_str(mode)
            keyword = any(kw.arg == "mode" for kw in node.keywords)
            return "Path.open" if (text is not None or keyword) and _writes_mode(mode) else None
        if name == "os.open":
            flags = {n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "") for n in ast.walk(node.args[1])} \
                if len(node.args) > 1 else set()
            return "os.open" if flags & WRITE_FLAGS else None
        if name == "tarfile.open":  # to a file, unless fileobj= is an in-memory buffer
            writes = _writes_mode(_arg(node, 1, "mode"))
            return "tarfile.open" if writes and not self._in_memory(_arg(node, 2, "fileobj")) else None
        if name in ("zipfile.ZipFile", "ZipFile"):
            return "zipfile.ZipFile" if _writes_mode(_arg(node, 1, "mode")) else None
        if attr in ("write_text", "write_bytes"):
            return attr
        if name in ("json.dump", "pickle.dump", "marshal.dump"):
            return None if self._in_memory(_arg(node, 1, "fp")) else name
        if name in ("yaml.dump", "yaml.safe_dump"):
            stream = _arg(node, 1, "stream")
            return None if stream is None or self._in_memory(stream) else name
        if name == "torch.save":
            return None if self._in_memory(_arg(node, 1, "f")) else name
        if name in ("OmegaConf.save",):
            return None if self._in_memory(_arg(node, 1, "f")) else name
        if name in ("np.save", "np.savez", "np.savez_compressed", "np.savetxt",
                    "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt"):
            return None if self._in_memory(_arg(node, 0, "file")) else name
        if name in ("csv.writer", "csv.DictWriter"):
            return None if self._in_memory(_arg(node, 0, "f")) else name
        if attr in ("savefig", "imsave", "imwrite", "to_csv", "tofile", "to_parquet", "to_json"):
            return None if self._in_memory(_arg(node, 0, "fname")) else attr
        if attr == "save" and (node.args or node.keywords):  # PIL Image.save(fp), ...
            return None if any(self._in_memory(a) for a in list(node.args) + [k.value for k in node.keywords]) \
                else "save"
        if name in ("shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree"):
            return name
        if attr == "touch":
            return "touch"
        if last == "FileHandler" and name in ("logging.FileHandler", "FileHandler"):
            return "logging.FileHandler"
        if last == "save_hparams_to_yaml":  # Lightning's YAML writer: a path, no stream
            return "save_hparams_to_yaml"
        return None


def scan_file(path: Path, root: Path) -> List[Write]:
    rel = path.relative_to(root).as_posix()
    scanner = _Scanner(rel)
    scanner.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return scanner.found


def scan(root, folders=("stir", "bench"), skip=("stir/atomic.py",)) -> List[Write]:
    """Every direct file write in the ``*.py`` files of ``folders`` under ``root`` (paths relative to ``root``).

    A folder ``root`` lacks is skipped; ``folders=()`` scans all of ``root``.
    """
    root = Path(root)
    found: List[Write] = []
    paths = [p for f in folders for p in (root / f).rglob("*.py")] if folders else list(root.rglob("*.py"))
    for path in sorted(paths):
        rel = path.relative_to(root).as_posix()
        if rel in skip or any(part.startswith(".") or part == "__pycache__" for part in path.relative_to(root).parts):
            continue
        found.extend(scan_file(path, root))
    return found
