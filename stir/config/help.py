"""``--help`` of the entry points, generated from the typed schema and the config folders.

Every group with its choices, every preset with its description, every top-level key with its
default and the comment the schema gives it, and every group of keys with its keys; each line
names the documentation page that explains it. Nothing is written by hand, so the help cannot list
a key or a preset that does not exist, nor miss one.
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import textwrap
import tokenize
import typing
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from stir.config.argv import unoptional  # one reading of Optional[X] for --help and the command-line checks

WIDTH = 100


@lru_cache(maxsize=None)
def field_docs(cls: type) -> Dict[str, str]:
    """{field: its comment in the dataclass source} (the comment on its line, else the lines above it)."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    comments: Dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    lines = source.splitlines()
    out: Dict[str, str] = {}
    body = ast.parse(source).body[0]
    for node in getattr(body, "body", []):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            line = node.lineno
            text = comments.get(node.end_lineno) or comments.get(line)
            if not text:
                above, j = [], line - 1
                while j >= 1 and lines[j - 1].strip().startswith("#"):
                    above.insert(0, comments.get(j, ""))
                    j -= 1
                text = " ".join(above)
            out[node.target.id] = text
    return out


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return "???"


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_show(v) for v in value) + "]"
    return str(value)


@dataclass(frozen=True)
class Group:
    """A config group (``group=choice``): its choices, what it selects, its page."""

    name: str
    choices: Sequence[str]
    what: str
    page: str


@dataclass(frozen=True)
class Preset:
    name: str
    description: str


def _wrap(head: str, text: str, indent: int = 2, col: int = 34) -> List[str]:
    """``head`` then ``text`` wrapped to WIDTH, continuation lines under the text column."""
    head = " " * indent + head
    if len(head) >= col - 1:
        return [head] + textwrap.wrap(text, WIDTH, initial_indent=" " * col, subsequent_indent=" " * col,
                                      break_on_hyphens=False)
    lines = textwrap.wrap(text, WIDTH - col, break_on_hyphens=False) or [""]
    return [head.ljust(col) + lines[0]] + [" " * col + line for line in lines[1:]]


def render(usage: str, about: str, groups: Sequence[Group], presets: Sequence[Preset], schema: type,
           pages: Mapping[str, str], default_page: str,
           kind_fields: Optional[Tuple[str, Mapping[str, type]]] = None, footer: str = "",
           sections: Sequence[Tuple[str, Sequence[Tuple[str, str]]]] = ()) -> str:
    """The help text of an entry point.

    ``schema``: its dataclass; ``pages``: {top-level key or group of keys: docs page}; ``kind_fields``:
    a field typed only at run time and the dataclass of each of its choices (evaluate.py's
    ``("experiment", {"kind pair": PairConfig, ...})``); ``sections``: (title, [(name, one line)]) listed
    after the presets (evaluate.py's shipped zoo models).
    """
    out = [f"usage: {usage}", ""] + textwrap.wrap(about, WIDTH, break_on_hyphens=False) + [""]
    out.append("Groups (group=choice):")
    for g in groups:
        head = f"{g.name}={'|'.join(g.choices)}"
        if len(head) > WIDTH // 2:  # many choices: they go into the text column
            head, what = f"{g.name}=CHOICE", f"{' | '.join(g.choices)}: {g.what}"
        else:
            what = g.what
        out += _wrap(head, f"{what} ({g.page})")
    if presets:
        out += ["", "Presets (experiment=NAME; configs/evaluate/experiment/NAME.yaml):"]
        for p in presets:
            out += _wrap(p.name, p.description)
    for title, lines in sections:
        out += [""] + textwrap.wrap(title, WIDTH, break_on_hyphens=False)
        col = max([len(name) for name, _ in lines] + [0]) + 5  # a short name column: one line each
        for name, text in lines:
            out += _wrap(name, text, col=col)
    hints = typing.get_type_hints(schema)
    docs = field_docs(schema)
    typed_later, choices = kind_fields or ("", {})
    scalars, nodes = [], []
    for f in dataclasses.fields(schema):
        hint = unoptional(hints.get(f.name))
        (nodes if dataclasses.is_dataclass(hint) or f.name == typed_later else scalars).append(f)
    out += ["", f"Main keys (key=default; {default_page} unless named):"]
    for f in scalars:
        page = pages.get(f.name)
        text = docs.get(f.name, "") + (f" ({page})" if page and page != default_page else "")
        out += _wrap(f"{f.name}={_show(_default(f))}", text)
    out += ["", "Groups of keys (group.key=value; the values: --cfg job):"]
    for f in nodes:
        hint = unoptional(hints.get(f.name))
        if f.name == typed_later:
            for label, cls in choices.items():
                keys = [k.name for k in dataclasses.fields(cls)]
                page = pages.get(label, pages.get(f.name, default_page))
                out += _wrap(f"{f.name}.*  ({label})", ", ".join(keys) + f" ({page})")
            continue
        keys = _keys(hint)
        out += _wrap(f"{f.name}.*", ", ".join(keys) + f" ({pages.get(f.name, default_page)})")
    if footer:
        out += [""] + textwrap.wrap(footer, WIDTH, break_on_hyphens=False)
    return "\n".join(out) + "\n"


def _keys(cls: type, prefix: str = "") -> List[str]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        sub = unoptional(hints.get(f.name))
        out += _keys(sub, f"{prefix}{f.name}.") if dataclasses.is_dataclass(sub) else [prefix + f.name]
    return out


def preset_descriptions(folder: Path) -> List[Preset]:
    """Each preset YAML of ``folder``: its name and ``experiment.description`` (or its first comment)."""
    from omegaconf import OmegaConf

    out = []
    for path in sorted(Path(folder).glob("*.yaml")):
        raw = OmegaConf.to_container(OmegaConf.load(path))
        description = (raw.get("experiment") or {}).get("description") if isinstance(raw, dict) else None
        if not description:
            comments = [line.lstrip("# ").strip() for line in path.read_text().splitlines()
                        if line.startswith("#") and "@package" not in line]
            description = comments[0] if comments else ""
        out.append(Preset(path.stem, str(description)))
    return out


def group_description(path: Path) -> str:
    """The first comment line of a group's YAML file (what a choice does)."""
    for line in Path(path).read_text().splitlines():
        if line.startswith("#") and "@package" not in line:
            return line.lstrip("# ").strip()
    return ""
