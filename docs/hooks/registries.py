"""MkDocs hook: the tables of the registries, read from the declarations when the site is built.

``<!-- kinds-table -->`` becomes every experiment kind (its config dataclass, declared with
``@kind_config(name)`` in stir/experiments/<module>_config.py; the module that registers it; its presets),
``<!-- sources-table -->`` every model source (``@SOURCES.register(prefix)`` in stir/models/sources/,
with its module's ``LOADS``, ``NORMALISATION`` and ``WEIGHTS``; its names written as --help writes
them), ``<!-- measures-table -->`` every similarity measure with its flags (``@measure(...)`` /
``declare(...)`` in stir/similarity/) and the timings of the committed
``bench/results/bench_similarity_new.json``, ``<!-- losses-table -->`` every training objective
with what it uses (``@register(name, ...)`` in stir/training/losses/, read by
stir/config/loss_specs.py). So a page cannot list other kinds, sources, measures or losses than the
code declares, and a new one needs no edit of a page.

The documentation's environment has no torch (docs/requirements.txt), so the declarations are read
from the source (``ast``; literal values, the named constants of the module and of
stir/similarity/spec.py, ``math.pi``, ``math.sqrt``, f-strings), never imported;
tests/similarity/test_similarity_docs.py checks that this reading equals the registries'.

    python docs/hooks/registries.py measures     # the table a page would get, printed
"""
from __future__ import annotations

import ast
import json
import math
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

REPO = Path(__file__).resolve().parents[2]
STIR = REPO / "stir"
PRESETS = REPO / "configs" / "evaluate" / "experiment"
BENCH = REPO / "bench" / "results" / "bench_similarity_new.json"  # the committed run of bench_similarity.py --new
MARKERS = {"kinds": "<!-- kinds-table -->", "sources": "<!-- sources-table -->", "measures": "<!-- measures-table -->",
           "losses": "<!-- losses-table -->"}
SHORT = {"orthogonal": "O", "isotropic_scaling": "S", "translation": "T", "permutation": "P", "invertible_linear": "L"}
# The modules of stir/similarity that declare no measure (as stir/similarity/spec.py's MEASURES skips them).
NOT_MEASURES = ("registry", "spec", "pairwise")


class NotLiteral(ValueError):
    """An expression this reader does not evaluate."""


def value(node: ast.AST, env: Dict[str, Any]) -> Any:
    """The value of a declaration's expression: literals, names of ``env``, sets, f-strings, arithmetic,
    ``math.pi`` / ``math.inf`` / ``math.sqrt(c)``, ``frozenset(...)``; NotLiteral for anything else."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise NotLiteral(node.id)
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(value(e, env) for e in node.elts)
    if isinstance(node, ast.Set):
        return frozenset(value(e, env) for e in node.elts)
    if isinstance(node, ast.Dict):
        return {value(k, env): value(v, env) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -value(node.operand, env)
    if isinstance(node, ast.BinOp):
        ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
               ast.Div: lambda a, b: a / b, ast.BitOr: lambda a, b: a | b, ast.BitAnd: lambda a, b: a & b}
        if type(node.op) in ops:
            return ops[type(node.op)](value(node.left, env), value(node.right, env))
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "math":
        if node.attr in ("pi", "inf"):
            return getattr(math, node.attr)
    if isinstance(node, ast.Call) and not node.keywords:
        name = ast.unparse(node.func)
        if name == "math.sqrt" and len(node.args) == 1:
            return math.sqrt(value(node.args[0], env))
        if name in ("frozenset", "set"):
            return frozenset(value(node.args[0], env)) if node.args else frozenset()
    if isinstance(node, ast.JoinedStr):
        return "".join(str(value(v.value, env)) if isinstance(v, ast.FormattedValue) else str(v.value)
                       for v in node.values)
    raise NotLiteral(ast.unparse(node))


def constants(tree: ast.Module, env: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """``env`` plus the module-level ``NAME = <literal>`` assignments of ``tree`` that evaluate."""
    out = dict(env or {})
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and getattr(node, "value", None) is not None:
            try:
                out[targets[0].id] = value(node.value, out)
            except (NotLiteral, TypeError, ZeroDivisionError):
                pass
    return out


def _modules(package: Path, skip=()) -> List[Path]:
    """The modules of ``package`` that its registry imports (stir.registry.import_package), by name."""
    return sorted(p for p in package.glob("*.py") if not p.stem.startswith("_") and p.stem not in skip)


# ------------------------------------------------------------------------------------------ measures


def measures() -> List[Dict[str, Any]]:
    """Every declared measure: name, the flags of the table, its module; sorted by name."""
    spec = constants(ast.parse((STIR / "similarity" / "spec.py").read_text()))
    out = []
    for path in _modules(STIR / "similarity", NOT_MEASURES):
        tree = ast.parse(path.read_text())
        env = constants(tree, spec)
        for node in ast.walk(tree):
            calls = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                calls = [(d, node.name) for d in node.decorator_list
                         if isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "measure"]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "declare":
                calls = [(node, value(node.args[0], env))]
            for call, name in calls:
                flags = {k.arg: value(k.value, env) for k in call.keywords}
                out.append({"name": flags.pop("name", name), "module": path.stem, **flags})
    return sorted(out, key=lambda e: e["name"])


def _num(v: float) -> str:
    if v == math.inf:
        return "inf"
    if v == -math.inf:
        return "-inf"
    for name, c in (("pi/2", math.pi / 2), ("pi", math.pi), ("sqrt2", math.sqrt(2))):
        if v == c:
            return name
    return f"{v:g}"


def _timings() -> Dict[str, tuple]:
    if not BENCH.exists():
        return {}
    out = {}
    for r in json.loads(BENCH.read_text())["results"]:
        ours = r["ours"]
        o = f"{ours['seconds']:.2f}" if "seconds" in ours else "error"
        timed = {k: v for k, v in r["references"].items() if "seconds" in v}
        if timed:
            label = min(timed, key=lambda k: timed[k]["seconds"])
            ref = f"{timed[label]['seconds']:.2f} ({label})"
            ratio = f"{ours['seconds'] / timed[label]['seconds']:.2f}" if "seconds" in ours else "-"
        elif r["references"]:
            ref = "; ".join(f"{k}: > {v['timeout']:.0f} s" if "timeout" in v else f"{k}: error"
                            for k, v in r["references"].items())
            ratio = "-"
        else:
            ref, ratio = "-", "-"
        out[r["measure"]] = (o, ref, ratio)
    return out


def measures_table() -> str:
    timings = _timings()
    invariances = constants(ast.parse((STIR / "similarity" / "spec.py").read_text()))["INVARIANCES"]
    rows = ["| measure | family | kind | range | identity | symmetric | metric | invariant to | reference "
            "implementation | judging default | ours n=10k (s) | reference n=10k (s) | ours / ref |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in measures():
        inv = "".join(SHORT[k] for k in invariances if k in e["invariances"]) or "-"
        opts = ", ".join(f"{k}={v}" for k, v in (e.get("options") or {}).items())
        label = f"`{e['name']}`" + (f" ({opts})" if opts else "")
        o, ref, ratio = timings.get(e["name"], ("see docs/benchmarks/similarity.md", "-", "-"))
        lo, hi = e["range"]
        rows.append(f"| {label} | {e['family']} | {'distance' if e['distance'] else 'similarity'} | "
                    f"[{_num(lo)}, {_num(hi)}] | {'-' if e['identity'] is None else _num(e['identity'])} | "
                    f"{'yes' if e['symmetric'] else 'no'} | {'yes' if e.get('metric') else 'no'} | {inv} | "
                    f"{e['reference']} | {'yes' if e.get('judging_default') else 'no'} | {o} | {ref} | {ratio} |")
    return "\n".join(rows) + "\n"


# ------------------------------------------------------------------------------------------- sources


# The columns of the sources table past the source: each source module's constant of that name (a literal).
SOURCE_COLUMNS = {"LOADS": "what it loads", "NORMALISATION": "normalisation", "WEIGHTS": "weights"}
ZOO_ROW = {"usage": "`zoo:NAME`, `NAME`, `PATH`", "module": "`stir.zoo`", "LOADS": "this project's zoo and run folders",
           "NORMALISATION": "inside the network (CIFAR statistics)", "WEIGHTS": "run folders"}


def _model_names() -> Any:
    """``stir.config.model_names`` (torch-free, standard library only) loaded from its file: no import of stir."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("stir_model_names", STIR / "config" / "model_names.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sources() -> List[Dict[str, str]]:
    """Every registered model source: prefix, how its names are written (``stir.config.model_names.source_usages``,
    as --help writes them), module, and its constants ``LOADS``, ``NORMALISATION``, ``WEIGHTS`` ("-" when
    absent; tests/models/test_model_sources.py asks each source for them); by prefix."""
    usages = _model_names().source_usages()
    out = []
    for path in _modules(STIR / "models" / "sources", ("base",)):
        tree = ast.parse(path.read_text())
        env = constants(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in node.decorator_list:
                    if isinstance(d, ast.Call) and ast.unparse(d.func) == "SOURCES.register":
                        prefix = value(d.args[0], env)
                        out.append({"prefix": prefix, "usage": f"`{usages[prefix]}`", "module": path.stem,
                                    **{k: str(env.get(k, "-")) for k in SOURCE_COLUMNS}})
    return sorted(out, key=lambda e: e["prefix"])


def sources_table() -> str:
    rows = ["| source | " + " | ".join(SOURCE_COLUMNS.values()) + " | module |",
            "|---" * (len(SOURCE_COLUMNS) + 2) + "|"]
    for e in [ZOO_ROW, *({**e, "module": f"`stir.models.sources.{e['module']}`"} for e in sources())]:
        cells = [e["usage"], *(e[k].replace("|", chr(92) + "|") for k in SOURCE_COLUMNS), e["module"]]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


# --------------------------------------------------------------------------------------------- kinds


def kinds() -> List[Dict[str, Any]]:
    """Every experiment kind: name, config class, its docstring's first line, its module, the registering
    module, presets."""
    configs = {}
    for path in sorted((STIR / "experiments").glob("*_config.py")):  # each kind's config, beside its code
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                for d in node.decorator_list:
                    if isinstance(d, ast.Call) and ast.unparse(d.func) == "kind_config":
                        doc = (ast.get_docstring(node) or "").strip().splitlines()
                        configs[value(d.args[0], {})] = (node.name, doc[0] if doc else "", path.stem)
    modules: Dict[str, str] = {}
    for path in sorted((STIR / "experiments").rglob("*.py")):  # a kind's module may sit in a subpackage
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "register" \
                    and node.args and isinstance(node.args[0], ast.Call) and ast.unparse(node.args[0].func) == "Kind":
                dotted = ".".join(path.relative_to(STIR / "experiments").with_suffix("").parts)
                modules[value(node.args[0].args[0], {})] = dotted.removesuffix(".__init__")
    presets: Dict[str, List[str]] = {}
    for path in sorted(PRESETS.glob("*.yaml")):
        kind = ((yaml.safe_load(path.read_text()) or {}).get("experiment") or {}).get("kind")
        presets.setdefault(kind, []).append(path.stem)
    return [{"name": k, "config": configs[k][0], "doc": configs[k][1], "config_module": configs[k][2],
             "module": modules.get(k, "-"), "presets": presets.get(k, [])} for k in sorted(configs)]


def kinds_table() -> str:
    rows = ["| kind | config (`stir.experiments.<module>_config`, torch-free) | module | presets |", "|---|---|---|---|"]
    for e in kinds():
        presets = ", ".join(f"`{p}`" for p in e["presets"]) or "-"
        rows.append(f"| `{e['name']}` | `{e['config_module']}.{e['config']}`: {e['doc'].replace('|', chr(92) + '|')} | "
                    f"`stir.experiments.{e['module']}` | {presets} |")
    return "\n".join(rows) + "\n"


# -------------------------------------------------------------------------------------------- losses


def losses() -> List[Dict[str, Any]]:
    """Every registered loss with what it uses: ``stir.config.loss_specs`` (the torch-free reading of the
    ``@register`` declarations that the command-line check uses), loaded from its file: no stir import."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("stir_loss_specs", STIR / "config" / "loss_specs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    folder = STIR / "training" / "losses"
    where = {s.name: path.stem for path in _modules(folder) for s in module.declared_in(path)}
    return [{"name": name, "module": where[name], "adversarial": s.adversarial, "attack": s.attack, "beta": s.beta,
             "summary": s.summary} for name, s in module.loss_specs(folder).items()]


def losses_table() -> str:
    parts = {"eps": "`-eps`", "steps": "`-it`"}  # the run folder's parts (stir.training.runs.recipe_dir)
    rows = ["| loss | objective | attacks the network | reads | its run folder names (off the default) | module |",
            "|---|---|---|---|---|---|"]
    for e in losses():
        reads = [f"`attack.{a}`" for a in e["attack"]] + (["`loss.beta`"] if e["beta"] else [])
        named = (["`-b`"] if e["beta"] else []) + [parts[a] for a in e["attack"]]
        rows.append(f"| `{e['name']}` | {e['summary'].replace('|', chr(92) + '|')} | {'yes' if e['adversarial'] else 'no'} "
                    f"| {', '.join(reads) or '-'} | {', '.join(named) or '-'} | "
                    f"`stir.training.losses.{e['module']}` |")
    return "\n".join(rows) + "\n"


TABLES = {"kinds": kinds_table, "sources": sources_table, "measures": measures_table, "losses": losses_table}


def on_page_markdown(markdown: str, page: Any = None, config: Any = None, files: Any = None) -> str:
    for name, marker in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, TABLES[name]())
    return markdown


if __name__ == "__main__":
    sys.stdout.write(TABLES[sys.argv[1] if len(sys.argv) > 1 else "measures"]())
