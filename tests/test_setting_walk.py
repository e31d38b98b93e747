"""Settings resolved once and carried whole (issue 56): following ``inversion.steps`` from the command line
to the descent loop passes through at most 8 files that handle it, computed from the source
(``tests/setting_walk.py``), and docs/architecture.md's "The walk of inversion.steps" lists those files; no
record is written into once it is checked."""
from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path
from typing import List

import pytest

from setting_walk import _decorator, walk_files

REPO = Path(__file__).resolve().parents[1]
MOST_FILES = 8
ENTRY = ("evaluate", "evaluate")  # evaluate.py's evaluate(cfg: DictConfig): the command line's config
VALUE = ("stir.inversion.config", "InversionConfig")
SINK = ("stir.descent.loop", "descend")


def kind_runner(kind: str):
    """The registry's dispatch of ``Kind`` fields: ``kind.run(ctx, cfg)`` runs the function registered
    for ``kind`` (``register(Kind(name, Config, run, units, ...))``)."""

    def dispatch(walker, cls, attr):
        if cls.node.name != "Kind":
            return None
        fields = [n.target.id for n in cls.node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
        if attr not in fields:
            return None
        for module in walker.p.modules.values():
            for call in ast.walk(module.tree):
                if (isinstance(call, ast.Call) and _decorator(call.func) == "Kind" and call.args
                        and isinstance(call.args[0], ast.Constant) and call.args[0].value == kind):
                    i = fields.index(attr)
                    arg = call.args[i] if i < len(call.args) else next(
                        (k.value for k in call.keywords if k.arg == attr), None)
                    return walker.p.resolve(module, arg.id) if isinstance(arg, ast.Name) else None
        return None

    return dispatch


def steps_walk(root: Path = REPO):
    files = sorted((root / "stir").rglob("*.py")) + [root / "evaluate.py"]
    return walk_files(root, files, ENTRY, VALUE, SINK, kind_runner("pair"))


def check_walk(files: List[str]) -> None:
    assert len(files) <= MOST_FILES, (f"inversion.steps passes through {len(files)} files that handle it on its way "
                                      f"from the command line to the descent loop (at most {MOST_FILES}): {files}")


def documented(which: str) -> List[str]:
    """The files of the "Before" or "After" item of docs/architecture.md's walk of inversion.steps."""
    text = (REPO / "docs" / "architecture.md").read_text().split("### The walk of `inversion.steps`", 1)[1]
    item = re.search(rf"^- {which}[^\n]*(?:\n  [^\n]*)*", text.split("\n## ", 1)[0], re.M).group(0)
    count = int(re.search(r"(\d+) files:", item).group(1))
    handled = re.split(r";\s+\d+ with ", item)[0]  # the files that handle it, before those that only carry it
    return count, re.findall(r"`((?:stir/[\w/]+|evaluate)\.py)`", handled)


def test_inversion_steps_reaches_the_descent_loop_through_at_most_8_files_as_the_page_lists_them():
    walk, project = steps_walk()
    files = walk.files(project)
    check_walk(files)
    count, listed = documented("After")
    assert sorted(listed) == files and count == len(files), (listed, files)
    count, before = documented("Before")
    assert count == len(before) > MOST_FILES  # the page's record of the walk before issue 56
    # the chain really is the pair's: through the kind's runner, the context, both directions, the engine
    spine = [f"{project.modules[d.module].path}:{d.qualname}" for d in walk.spine]
    for hop in ("evaluate.py:evaluate", "stir/experiments/pairs.py:run", "stir/experiments/context.py:Context.pair",
                "stir/measure/direction.py:measure_direction", "stir/inversion/engine.py:solve"):
        assert hop in spine, spine
    sides = {f"{project.modules[d.module].path}:{d.qualname}" for d in walk.side_trips}
    assert {"stir/experiments/config.py:evaluate_config", "stir/inversion/config.py:resolved_budgets",
            "stir/experiments/context.py:open_context", "stir/measure/plan.py:make_plan"} <= sides, sides
    assert len(walk.carriers(project)) <= 14  # with the files that carry it unopened (docs: 15 before issue 56)


# ----------------------------------------------------------------- the walk itself, on synthetic chains
def _chain(root: Path, hops: int, opened: bool) -> None:
    """A package ``app`` whose entry reads the config into an InversionConfig and hands it through
    ``hops`` modules to ``descend``: each hop names it (``opened``) or carries it in a ``Box`` unopened."""
    pkg = root / "app"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "config.py").write_text(textwrap.dedent('''
        from dataclasses import dataclass
        from typing import Optional


        @dataclass(frozen=True)
        class InversionConfig:
            steps: Optional[int] = None


        @dataclass(frozen=True)
        class Box:
            inversion: InversionConfig


        def read(cfg: DictConfig) -> InversionConfig:
            return InversionConfig(steps=cfg.steps or 1000)
        '''))
    (pkg / "loop.py").write_text("def descend(objective, origin, geometry, steps: int):\n    return steps\n")
    for i in range(hops):
        last = i == hops - 1
        call = "descend(None, None, None, cfg.steps)" if last else f"hop{i + 1}({'cfg' if opened else 'box'})"
        if opened:
            body = f"def hop{i}(cfg: InversionConfig):\n    return {call}\n"
        elif last:
            body = f"def hop{i}(box: Box):\n    cfg = box.inversion\n    return {call}\n"
        else:
            body = f"def hop{i}(box: Box):\n    return {call}\n"
        imports = "from app.config import Box, InversionConfig\nfrom app.loop import descend\n"
        imports += "" if last else f"from app.hop{i + 1} import hop{i + 1}\n"
        (pkg / f"hop{i}.py").write_text(imports + "\n\n" + body)
    start = "hop0(inv)" if opened else "hop0(Box(inv))"
    (pkg / "main.py").write_text(textwrap.dedent(f'''
        from app.config import Box, InversionConfig, read
        from app.hop0 import hop0


        def main(cfg: DictConfig):
            inv = read(cfg)
            return {start}
        '''))


def _synthetic(tmp_path: Path, hops: int, opened: bool):
    _chain(tmp_path, hops, opened)
    return walk_files(tmp_path, sorted((tmp_path / "app").rglob("*.py")), ("app.main", "main"),
                      ("app.config", "InversionConfig"), ("app.loop", "descend"))


def test_a_longer_chain_fails_the_check(tmp_path):
    walk, project = _synthetic(tmp_path, hops=7, opened=True)
    files = walk.files(project)
    # main, config (read: a side trip), 7 hops, loop
    assert files == sorted(["app/main.py", "app/config.py", "app/loop.py", *(f"app/hop{i}.py" for i in range(7))])
    with pytest.raises(AssertionError, match="10 files"):
        check_walk(files)


def test_a_record_carried_unopened_counts_as_a_carrier_only(tmp_path):
    walk, project = _synthetic(tmp_path, hops=7, opened=False)
    assert walk.files(project) == ["app/config.py", "app/hop6.py", "app/loop.py", "app/main.py"]
    assert len(walk.carriers(project)) == 10
    check_walk(walk.files(project))


def test_a_broken_chain_is_said(tmp_path):
    _chain(tmp_path, hops=3, opened=True)
    hop = tmp_path / "app" / "hop1.py"
    hop.write_text(hop.read_text().replace("hop2(cfg)", "hop2(None)"))  # the value stops here
    with pytest.raises(ValueError, match="no chain of calls passes the value"):
        walk_files(tmp_path, sorted((tmp_path / "app").rglob("*.py")), ("app.main", "main"),
                   ("app.config", "InversionConfig"), ("app.loop", "descend"))


# ------------------------------------------------------------------------- nothing writes into a record
def _stir_sources():
    for path in sorted((REPO / "stir").rglob("*.py")):
        yield path.relative_to(REPO).as_posix(), ast.parse(path.read_text(), str(path))


RUN_RECORDS = ("stir/experiments/", "stir/measure/", "stir/store.py")  # where the run's record and config travel


def _named(node: ast.expr, names=("record", "config")) -> bool:
    """``record`` / ``config`` or ``x.record`` / ``x.config``, possibly subscripted (``record["config"]``)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return (isinstance(node, ast.Name) and node.id in names) or (isinstance(node, ast.Attribute) and node.attr in names)


def test_no_object_setattr_and_no_record_patched_after_validation():
    found = []
    for rel, tree in _stir_sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "__setattr__":
                found.append(f"{rel}:{node.lineno}: __setattr__")
            if not rel.startswith("stir/inversion/config.py"):  # the one place a budget is filled in
                if (isinstance(node, ast.Call) and _decorator(node.func) == "replace"
                        and any(k.arg == "steps" for k in node.keywords)):
                    found.append(f"{rel}:{node.lineno}: steps replaced")
                if isinstance(node, (ast.Assign, ast.AugAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if any(isinstance(t, ast.Attribute) and t.attr == "steps" for t in targets):
                        found.append(f"{rel}:{node.lineno}: steps assigned")
            if not rel.startswith(RUN_RECORDS):
                continue
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, (ast.Subscript, ast.Attribute)) and _named(t.value) for t in targets):
                    found.append(f"{rel}:{node.lineno}: a record written into")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _named(node.func.value)
                    and node.func.attr in ("update", "setdefault", "pop", "clear", "__setitem__")):
                found.append(f"{rel}:{node.lineno}: a record written into")
            if isinstance(node, ast.Call) and _decorator(node.func) == "setattr" and node.args and _named(node.args[0]):
                found.append(f"{rel}:{node.lineno}: setattr on a record")
    assert not found, found


def test_the_record_check_finds_a_patch():
    """The check above fails on the patch issue 56 found (the run record's steps written after validation)."""
    tree = ast.parse("def open_context(cfg):\n    ctx.config['inversion']['steps'] = 1000\n")
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.Assign))
    assert _named(node.targets[0].value)
