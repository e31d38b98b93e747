"""``evaluate.py``'s command line: its schema tree (with the chosen preset's kind), groups, moved keys
and ``--help`` (``stir.cli.check_command_line``). Read without torch or Lightning: the schema's
dataclasses (``stir.experiments.schema``), the presets' YAML, the zoo's YAML and JSON files."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from omegaconf import OmegaConf

from stir import manifest
from stir.config.argv import OPEN, Command, group_choices, schema_tree
from stir.config.commands import launchers, profile_sizes, profiles_text
from stir.config.help import Group, preset_descriptions, render
from stir.config.model_names import source_usages
from stir.config.schema import DataConfig, ImagesConfig
from stir.experiments.schema import KIND_CONFIGS, EvaluateConfig, ZooConfig
from stir.inversion.config import resolved_budgets

EVALUATE_GROUPS = ("experiment", "profile", "data")
EXECUTION_KEYS = ("batch_size", "memory_gb", "compile", "keep_cpu_memory", "channels_last", "cache_dir", "progress",
                  "warn_below", "eval_batch")
# Keys that moved in the redesign of the evaluation (issue 19): old key (or prefix) -> where it is now.
MOVED: Dict[str, str] = {
    **{f"inversion.{k}": f"execution.{k}" for k in EXECUTION_KEYS},
    "inversion.min_fraction_iri": "min_fraction_iri",
    **{f"{kind}.": f"experiment.|with experiment={kind}" for kind in ("stitching", "grounding", "layer_matching",
                                                                       "invariance")},
    # One spelling of the two roles (issue 32): ref / target, as the models are named on the command line
    # and in every result; m1 / m2 only in the paper's equations.
    "tap1": "tap_ref|the roles are spelled ref / target", "tap2": "tap_target|the roles are spelled ref / target",
    "weights1": "weights_ref|the roles are spelled ref / target",
    "weights2": "weights_target|the roles are spelled ref / target",
}
# The training-only keys of train.py's data group: evaluate.py's data group selects images only.
TRAINING_DATA_KEYS = tuple(f.name for f in dataclasses.fields(DataConfig) if f.name not in
                           {g.name for g in dataclasses.fields(ImagesConfig)})
REFUSED: Dict[str, str] = {
    f"data.{key}": "is a training key (train.py): evaluate.py's data group only selects images (" +
    ", ".join(f"data.{g.name}" for g in dataclasses.fields(ImagesConfig)) + "); to train the zoo's models "
    "with it, give it in zoo.overrides: 'zoo.overrides=[\"{override}\"]'" for key in TRAINING_DATA_KEYS
}
# The documentation page of each group, group of keys and main key.
EVALUATE_PAGES = {
    "experiment": "docs/presets.md", "profile": "docs/presets.md#profiles", "data": "docs/models.md#images",
    "hydra/launcher": "docs/evaluation.md#several-processes-or-gpus",
    "ref": "docs/evaluation.md#models", "target": "docs/evaluation.md#models",
    **{key: "docs/models.md#models-of-other-sources" for key in ("tap_ref", "tap_target", "weights_ref", "weights_target")},
    "download_weights": "docs/models.md#models-of-other-sources", "robustbench": "docs/models.md#models-of-other-sources",
    "zoo": "docs/evaluation.md#the-zoo", "train_missing": "docs/evaluation.md#the-zoo",
    "inversion": "docs/estimator.md", "difficulty": "docs/estimator.md#controversial-stimulus-difficulty",
    "min_fraction_iri": "docs/estimator.md#failed-inversions", "calibration": "docs/estimator.md#calibration",
    "layers": "docs/evaluation.md#layers", "execution": "docs/estimator.md#execution",
    "shard": "docs/evaluation.md#several-processes-or-gpus", "shards": "docs/evaluation.md#several-processes-or-gpus",
    "out_dir": "docs/evaluation.md#outputs", "logger": "docs/evaluation.md#outputs",
    "iri_grid_images": "docs/evaluation.md#outputs",
    "kind stitching": "docs/stitching.md", "kind layer_matching": "docs/judging.md#layer-matching",
    "kind grounding": "docs/judging.md#grounding", "kind invariance": "docs/judging.md#g-eed",
}


def chosen_kind(config_dir: Path, preset: Optional[str]) -> Optional[str]:
    """The experiment kind of a preset (its YAML's ``experiment.kind``), None when there is no such preset."""
    path = Path(config_dir) / "experiment" / f"{preset or 'pair'}.yaml"
    if not path.is_file():
        return None
    raw = OmegaConf.to_container(OmegaConf.load(path))
    return str(((raw or {}).get("experiment") or {}).get("kind") or "pair")


def shipped_zoo(repo: Path) -> List[Tuple[str, str]]:
    """(zoo name, one line) of each shipped zoo model (``zoo/models/*.json``, ``stir.zoo.shipped``): its
    profile, architecture and test accuracy, read as JSON, no torch. The recipe (configs/zoo.yaml's
    overrides) is left to that file: with it, ablation arms' lines wrapped past the help's width."""
    defaults = ZooConfig()
    out = []
    folder = repo / str(defaults.shipped_dir)
    try:
        pins = manifest.read(folder) or {}
    except manifest.ManifestError:
        pins = {}
    for entry in sorted((folder / "models").glob("*.json")):
        data = entry.read_bytes()
        if pins.get(f"models/{entry.name}") != hashlib.sha256(data).hexdigest():
            out.append((entry.stem, f"not served: not the file {folder.name}/{manifest.MANIFEST} pins "
                                    f"(python -m stir.zoo.manifest says why)"))
            continue  # an edited accuracy is never shown as the model's
        try:
            e = json.loads(data.decode("utf-8"))
            name, model, test = str(e["name"]), e.get("model") or {}, e.get("test") or {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # an unreadable entry is reported where it is loaded (stir.zoo.shipped)
        accuracy = f", accuracy {test['test/acc']:.3f}" if isinstance(test.get("test/acc"), (int, float)) else ""
        robust = f" (PGD-l2 {test['test/robust_acc']:.3f})" if isinstance(test.get("test/robust_acc"), (int, float)) else ""
        out.append((name, f"profile={e.get('profile')} {model.get('arch', '?')} width {model.get('width', '?')}"
                          f"{accuracy}{robust}"))
    return out


def zoo_names(repo: Path) -> Tuple[List[Tuple[str, str]], List[Tuple[str, str]]]:
    """Every other name of configs/zoo.yaml, read as YAML (no torch), each with where its weights come
    from: ([(recipe name, its train.py overrides)] of the recipes that are not shipped (trained with
    train_missing=true), [(name, its source and where that source's weights are)] of the models of
    other sources: real networks under zoo.weights_root, RobustBench under robustbench.model_dir)."""
    defaults = ZooConfig()
    shipped = {name for name, _ in shipped_zoo(repo)}
    try:
        raw = OmegaConf.to_container(OmegaConf.load(repo / defaults.file)) or {}
    except (OSError, ValueError):
        return [], []  # an unreadable zoo file is reported where it is loaded (stir.zoo.recipes)
    recipes, sourced = [], []
    for name, entry in raw.items():
        if isinstance(entry, dict) and "source" in entry:
            source = str(entry["source"])
            where = {"realnet": "weights under zoo.weights_root (default $STIR_REALNETS, else ../shared/realnets)",
                     "robustbench": "weights under robustbench.model_dir (download_weights=true fetches them)"}
            sourced.append((name, f"{source}: {where.get(source.split(':', 1)[0], 'its source (docs/models.md)')}"))
        elif name not in shipped:
            train = entry.get("train", []) if isinstance(entry, dict) else entry or []
            warm = f", warm-started from {entry['init_from']}" if isinstance(entry, dict) and entry.get("init_from") else ""
            recipes.append((name, (" ".join(str(o) for o in train) or "train.py defaults") + warm))
    return recipes, sourced


def evaluate_profile_sizes(config_dir: Path) -> Dict[str, str]:
    """{profile: its sizes} of ``python evaluate.py profile=NAME``, read from the composed config (n, k,
    the inversion's and the difficulty walk's steps, the zoo's train.py profile and its sizes)."""
    from stir.config.store import compose
    from stir.experiments.schema import register_evaluate_configs

    register_evaluate_configs()
    train = profile_sizes(Path(config_dir).parent)
    out = {}
    for name in group_choices(config_dir, ("profile",))["profile"]:
        cfg = compose(config_dir, "evaluate", [f"profile={name}"])
        settled = resolved_budgets(dataclasses.replace(OmegaConf.to_object(cfg), experiment=None))  # as evaluate_config
        zoo = settled.zoo.profile
        out[name] = (f"n={settled.n}, k={settled.k}, {settled.inversion.steps} {settled.inversion.mode} inversion "
                     f"steps, walks of {settled.difficulty.steps}; zoo models of train.py profile={zoo}: "
                     f"{train.get(zoo, '?')}")
    return out


def model_sections(repo: Path) -> List[Tuple[str, List[Tuple[str, str]]]]:
    """--help's model names: every name ref= and target= take, grouped by where its weights come from; the
    last line writes each registered source's names as its module's docstring does (``source_usages``,
    read from the sources' registrations: a new source is listed with no edit here)."""
    zoo = ZooConfig()
    recipes, sourced = zoo_names(repo)
    return [(f"Shipped zoo models (ref=NAME target=NAME with their profile, profile=laptop: weights in {zoo.shipped_dir}/, "
             "no training; at another profile they train with train_missing=true):", shipped_zoo(repo)),
            (f"Zoo recipes not shipped ({zoo.file}; weights from runs/ once trained: add train_missing=true, or run "
             "train.py with the overrides shown and the profile's):", recipes),
            ("Models of other sources (never trained here; docs/models.md):", sourced),
            ("Any other model: a run folder or checkpoint path, or SOURCE:NAME (" + ", ".join(source_usages().values())
             + "; docs/models.md#models-of-other-sources).", [])]


def evaluate_command(config_dir: Path):
    """The ``Command`` (``stir.config.argv``) of ``python evaluate.py`` (configs/evaluate as ``config_dir``)."""
    config_dir = Path(config_dir)
    groups = group_choices(config_dir, EVALUATE_GROUPS)

    def tree(line: Any) -> Mapping[str, Any]:
        out = dict(schema_tree(EvaluateConfig))
        presets = [o.value for o in line.overrides if o.key == "experiment" and o.value]
        kind = chosen_kind(config_dir, presets[-1] if presets else None)
        out["experiment"] = schema_tree(KIND_CONFIGS[kind]) if kind in KIND_CONFIGS else OPEN
        return out

    def text() -> str:
        listed = [
            Group("experiment", groups["experiment"], "the preset: what is measured (below)", EVALUATE_PAGES["experiment"]),
            Group("profile", groups["profile"], "the compute size: " + profiles_text(
                config_dir, "profile", evaluate_profile_sizes(config_dir)), EVALUATE_PAGES["profile"]),
            Group("data", groups["data"], "the images of models without training data of their own", EVALUATE_PAGES["data"]),
            Group("hydra/launcher", launchers(config_dir), "run the shards of a sweep (-m) as SLURM jobs or local "
                  "processes", EVALUATE_PAGES["hydra/launcher"]),
        ]
        return render(
            "python evaluate.py ref=NAME target=NAME [key=value ...] | experiment=PRESET [profile=cpu]",
            "Directional STIR (both ways, with floor, ceiling and interval), STIR_adv, plain similarity, agreement "
            "and controversial-stimulus difficulty between zoo models (configs/zoo.yaml), run folders, checkpoints "
            "or models of other sources; presets run the paper's experiments. Results: out_dir/store/ (reused on "
            "rerun) and out_dir/<name>-<settings hash>/ (out_dir/<name>[@<profile>] links the latest). The tour: README.md; "
            "every page: docs/index.md.",
            listed, preset_descriptions(config_dir / "experiment"), EvaluateConfig, EVALUATE_PAGES,
            "docs/evaluation.md", kind_fields=("experiment", {f"kind {k}": KIND_CONFIGS[k] for k in sorted(KIND_CONFIGS)}),
            sections=model_sections(config_dir.parent.parent),
            footer="Every key and its value: python evaluate.py --cfg job (with experiment=PRESET: that preset's). "
                   "Keys that moved: inversion.batch_size and the other run settings are execution.*, "
                   "stitching.* / grounding.* / layer_matching.* / invariance.* are experiment.*. A mistyped key "
                   "names its close match; the traceback of any error: HYDRA_FULL_ERROR=1.")

    return Command(config_dir, "evaluate", tree, groups, text, MOVED, REFUSED)
