"""The command line of an entry point, checked against its typed schema before Hydra sees it.

Hydra reports a mistyped key (``inversion.step=50``) in seven lines with the advice to append it
(``+inversion.step=50``, which the schema then refuses anyway), and a mistyped preset with the list
of every preset. ``check_overrides`` reads the overrides of ``sys.argv`` first and raises one
``ConfigError`` per command, naming the key or value and the fix:

* a key the schema does not declare: the close matches among the schema's keys ("did you mean
  inversion.steps?"), or, for a key that moved in a redesign, where it is now ("moved to
  execution.batch_size");
* a group choice (``experiment=seed``, ``model=resnet99``) that is no YAML file of the group: the
  close matches among its choices;
* a group of keys given a plain value (``layers=all``): the keys of that group.

The schema is a tree of dataclasses (``schema_tree``); ``Any`` and ``Dict`` fields are open (any key
below them passes here and is checked where it is read). Hydra's own keys (``hydra.*``,
``hydra/launcher=...``) and flags (``-m``, ``--cfg job`` ...) are left to Hydra, except what would
run code (``refuse_code``): a ``_target_`` in a key or value, and ``hydra.callbacks``.
"""
from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from stir.config.validate import ConfigError

OPEN = object()  # a node below which any key is accepted (Any, Dict[...] fields)
# Hydra's flags that take a value as the next word (``--cfg job``) and those that change which config
# is composed (then no check applies: the schema below may not be the one composed).
_FLAGS_WITH_VALUE = {"--cfg", "-c", "--package", "-p", "--config-path", "-cp", "--config-name", "-cn",
                     "--config-dir", "-cd", "--shell-completion", "-sc", "--experimental-rerun"}
_INFO_VALUES = {"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"}
_OTHER_CONFIG = {"--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd", "--experimental-rerun"}


@dataclass(frozen=True)
class Override:
    """One ``[+|++|~]key[=value]`` of the command line."""

    raw: str
    prefix: str  # "" | "+" | "++" | "~"
    key: str
    value: Optional[str]  # None for ``~key``


@dataclass(frozen=True)
class CommandLine:
    """The command line split into Hydra's flags and the overrides."""

    flags: Tuple[str, ...]
    overrides: Tuple[Override, ...]

    @property
    def multirun(self) -> bool:
        return "-m" in self.flags or "--multirun" in self.flags

    @property
    def other_config(self) -> bool:
        """A flag that makes Hydra compose another config than the entry point's own."""
        return any(f.split("=", 1)[0] in _OTHER_CONFIG for f in self.flags)

    @property
    def wants_help(self) -> bool:
        return "--help" in self.flags or "-h" in self.flags

    @property
    def introspection(self) -> bool:
        """--cfg, --info, --help ...: Hydra prints and exits, nothing runs."""
        return any(f.split("=", 1)[0] in {"--cfg", "-c", "--info", "-i", "--help", "-h", "--hydra-help", "--version",
                                          "--shell-completion", "-sc"} for f in self.flags)


def parse(argv: Sequence[str]) -> CommandLine:
    """Split ``argv`` (without the program name) into flags and overrides, as Hydra's parser reads them."""
    flags: List[str] = []
    overrides: List[Override] = []
    words = list(argv)
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("-") and not word.startswith("~"):
            flags.append(word)
            name = word.split("=", 1)[0]
            takes = name in _FLAGS_WITH_VALUE or (name in ("--info", "-i") and i + 1 < len(words)
                                                   and words[i + 1] in _INFO_VALUES)
            if takes and "=" not in word and i + 1 < len(words):
                flags.append(words[i + 1])
                i += 1
        else:
            overrides.append(_override(word))
        i += 1
    return CommandLine(tuple(flags), tuple(overrides))


def _override(word: str) -> Override:
    prefix = "++" if word.startswith("++") else word[0] if word[:1] in ("+", "~") else ""
    body = word[len(prefix):]
    key, sep, value = body.partition("=")
    return Override(word, prefix, key.strip(), value if sep else None)


def schema_tree(schema: type) -> Dict[str, Any]:
    """{field: subtree | OPEN | None (a leaf)} of a dataclass, nested dataclasses as subtrees."""
    hints = typing.get_type_hints(schema)
    out: Dict[str, Any] = {}
    for f in dataclasses.fields(schema):
        out[f.name] = _node(hints.get(f.name, Any))
    return out


def _node(hint: Any) -> Any:
    hint = unoptional(hint)
    if dataclasses.is_dataclass(hint):
        return schema_tree(hint)
    if hint is Any or typing.get_origin(hint) in (dict, Dict, Mapping) or hint in (dict, Dict):
        return OPEN
    return None


def unoptional(hint: Any) -> Any:
    if typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def flat_keys(tree: Mapping[str, Any], prefix: str = "") -> List[str]:
    """Every key of the tree as a dotted path (groups of keys too)."""
    out = []
    for name, sub in tree.items():
        out.append(prefix + name)
        if isinstance(sub, dict):
            out += flat_keys(sub, f"{prefix}{name}.")
    return out


def group_choices(config_dir: Path, groups: Sequence[str]) -> Dict[str, List[str]]:
    """{group: the names of its YAML files} for the config groups of ``config_dir``."""
    out = {}
    for group in groups:
        folder = Path(config_dir) / group
        out[group] = sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []
    return out


def close(word: str, choices: Sequence[str], n: int = 2) -> List[str]:
    """The nearest of ``choices`` (difflib), at most ``n``: by the whole dotted path, else by its last
    part among the keys of the same group (``inversion.stpes`` -> ``inversion.steps``)."""
    near = difflib.get_close_matches(word, list(choices), n=n, cutoff=0.8)
    if not near:
        parent, _, last = word.rpartition(".")
        siblings = {c.rpartition(".")[2]: c for c in choices if c.rpartition(".")[0] == parent}
        near = [siblings[m] for m in difflib.get_close_matches(last, list(siblings), n=n, cutoff=0.7)]
    return near


def _did_you_mean(near: Sequence[str]) -> str:
    return f" (did you mean {' or '.join(near)}?)" if near else ""


def moved_to(key: str, moved: Mapping[str, str]) -> Optional[Tuple[str, str]]:
    """(where ``key`` lives now, a note): ``moved`` maps an old key, or an old prefix ending in ".", to
    the new one, optionally followed by ``|`` and a note (``"experiment.|with experiment=stitching"``)."""
    for old, target in moved.items():
        new, _, note = target.partition("|")
        if key == old:
            return new, note
        if old.endswith(".") and key.startswith(old):
            return new + key[len(old):], note
    return None


# What makes Hydra (or an instantiate) call a named callable: a ``_target_`` anywhere in a key or a
# value, and the run's callbacks (``hydra.callbacks.NAME._target_=builtins.open`` truncated a file).
_CODE_KEYS = ("hydra.callbacks", "hydra/callbacks")


def refuse_code(line: CommandLine) -> None:
    """Raise ``ConfigError`` for an override that would name code to run: a ``_target_`` (in its key or
    its value) or a Hydra callback. A command line sets values; it never runs a callable it names."""
    _refuse_code_in_config_dirs(line)
    for o in line.overrides:
        key = o.key.replace("/", ".")
        if "_target_" in o.key.split(".") or "_target_" in (o.value or "") or key.startswith(_CODE_KEYS[0]):
            what = "a Hydra callback" if key.startswith(_CODE_KEYS[0]) else "a _target_ (a callable to instantiate)"
            raise ConfigError(f"{o.raw}: the command line names {what}, and a command line runs no code it names; "
                              "remove it (a model of your own code is ref=python:your_module:make_net)")


def flag_values(line: CommandLine, names: Sequence[str]) -> List[str]:
    """The values given to the flags ``names`` (``--config-dir DIR`` or ``--config-dir=DIR``)."""
    values, flags = [], list(line.flags)
    for i, flag in enumerate(flags):
        name, eq, value = flag.partition("=")
        if name in names:
            values.append(value if eq else (flags[i + 1] if i + 1 < len(flags) else ""))
    return values


def _refuse_code_in_config_dirs(line: CommandLine) -> None:
    """Raise ``ConfigError`` where a flag would make Hydra run code from a file: ``--experimental-rerun``
    (it unpickles a file), or a YAML under ``--config-dir`` / ``--config-path`` naming a ``_target_`` or
    ``hydra.callbacks`` (Hydra calls them when the config is composed and the run starts)."""
    if flag_values(line, ("--experimental-rerun",)):
        raise ConfigError("--experimental-rerun unpickles a file, and a pickle can run any code; rerun with the "
                          "overrides of the earlier run's .hydra/overrides.yaml instead")
    for folder in flag_values(line, ("--config-dir", "-cd", "--config-path", "-cp")):
        root = Path(folder).expanduser()
        files = sorted(root.rglob("*.yaml")) + sorted(root.rglob("*.yml")) if root.is_dir() else []
        for file in files:
            try:
                text = file.read_text(errors="replace")
            except OSError:
                continue
            callbacks = re.search(r"^\s*callbacks\s*:", text, re.M) and re.search(r"^\s*hydra\s*:", text, re.M)
            if "_target_" in text or callbacks or re.search(r"^\s*(-\s*)?(override\s+)?hydra/callbacks\b", text, re.M):
                what = "a _target_ (a callable to instantiate)" if "_target_" in text else "Hydra callbacks"
                raise ConfigError(f"{file} (under {folder}) names {what}, and a config file runs no code it names; "
                                  "remove it from the file (a model of your own code is ref=python:your_module:make_net "
                                  "with zoo.allow_code=true)")


def check_overrides(line: CommandLine, tree: Mapping[str, Any], groups: Mapping[str, Sequence[str]],
                    moved: Mapping[str, str] = {}, help_hint: str = "--help", refused: Mapping[str, str] = {}) -> None:
    """Raise ``ConfigError`` for the first override whose key or group choice the schema does not know.

    ``tree``: ``schema_tree`` of the entry point's schema (subtrees the caller completed, e.g. the
    chosen experiment kind's fields); ``groups``: {group: choices}; ``moved``: old key -> new key;
    ``refused``: a key of another command -> why not here and the fix (``{override}`` in it: the
    override as given, key=value).
    """
    keys = flat_keys(tree)
    for o in line.overrides:
        if not o.key or o.key == "hydra" or o.key.startswith(("hydra.", "hydra/")):
            continue
        if o.key in groups and o.prefix in ("", "+", "++"):
            _check_choice(o, groups[o.key], line.multirun)
            continue
        if o.key in refused:
            given = f"{o.key}={o.value}" if o.value is not None else o.key
            raise ConfigError(f"{o.key} {refused[o.key].replace('{override}', given)}")
        found = moved_to(o.key, moved)
        if found is not None:
            new, note = found
            value = f"={o.value}" if o.value is not None else ""
            raise ConfigError(f"{o.key} moved to {new}: use {new}{value}" + (f" ({note})" if note else ""))
        node: Any = tree
        path: List[str] = []
        for part in o.key.split("."):
            if node is OPEN:
                break
            if not isinstance(node, dict) or part not in node:
                full = ".".join(path + [part])
                if not isinstance(node, dict):  # a key below a leaf: seed.x=1
                    raise ConfigError(f"{o.raw}: {'.'.join(path)} is a single value, it has no key {part!r}")
                raise ConfigError(f"unknown config key {o.key}{_did_you_mean(close(full, keys))}; "
                                  f"the keys: {help_hint}")
            node = node[part]
            path.append(part)
        if isinstance(node, dict) and o.value is not None and not o.value.lstrip().startswith("{") and o.prefix != "~":
            sub = ", ".join(f"{o.key}.{k}" for k in node)
            near = [f"{o.key}.{k}" for k in node if not isinstance(node[k], dict)][:1]
            example = f"; e.g. {near[0]}={o.value}" if near else ""
            raise ConfigError(f"{o.raw}: {o.key} is a group of keys ({sub}), not one value{example}")


def _check_choice(o: Override, choices: Sequence[str], multirun: bool) -> None:
    if o.value is None or not choices or "${" in o.value or "*" in o.value:
        return
    values = [v.strip() for v in o.value.split(",")] if multirun or "," in o.value else [o.value.strip()]
    for value in values:
        if value and value not in choices and value != "null":
            near = close(value, choices)
            hint = f"did you mean {' or '.join(f'{o.key}={n}' for n in near)}?" if near else \
                f"choose one of {', '.join(choices)}"
            raise ConfigError(f"{o.key}={value} is not a choice of {o.key}: {hint}")


@dataclass(frozen=True)
class Command:
    """What an entry point's command line is checked against before Hydra composes it.

    ``tree``: (the parsed command line) -> the schema tree (``schema_tree``), so that
    a field typed by a choice (evaluate.py's ``experiment``) gets the chosen one's fields;
    ``groups``: {group: choices}; ``moved``: old key -> where it is now; ``help``: the ``--help`` text;
    ``refused``: a key of another command -> why not here and the fix (``check_overrides``).
    """

    config_dir: Path
    config_name: str
    tree: Callable[[Any], Mapping[str, Any]]
    groups: Mapping[str, Sequence[str]]
    help: Callable[[], str]
    moved: Mapping[str, str] = field(default_factory=dict)
    refused: Mapping[str, str] = field(default_factory=dict)
