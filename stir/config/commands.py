"""``train.py``'s command line: its schema tree, groups and ``--help`` (``stir.cli.check_command_line``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Mapping

from stir.config.argv import Command, group_choices, schema_tree
from stir.config.help import Group, group_description, render
from stir.config.loss_specs import loss_names
from stir.config.schema import TrainConfig

TRAIN_GROUPS = ("data", "model", "loss", "recipe", "profile")
# The documentation page of each group and group of keys (docs/; the site: mkdocs serve).
TRAIN_PAGES = {
    "data": "docs/training.md#data", "model": "docs/models.md", "loss": "docs/training.md#objectives",
    "attack": "docs/training.md#objectives", "eval_attack": "docs/training.md#robust-accuracy",
    "profile": "docs/presets.md#profiles", "recipe": "docs/training.md#the-fast-recipe", "optim": "docs/training.md#the-recipe",
    "trainer": "docs/training.md#trainer-and-devices", "logger": "docs/training.md#wb",
    "init_from": "docs/training.md#run-folders", "retrain": "docs/training.md#run-folders",
    "run_dir": "docs/training.md#run-folders", "runs_dir": "docs/training.md#run-folders",
    "hydra/launcher": "docs/training.md#sweeps-on-a-cluster",
}
_WHAT = {"data": "the data set", "model": "the architecture", "loss": "the objective",
         "recipe": "the training recipe: paper (the STIR paper's, the default) | fast (a short schedule to real "
                   "accuracy: label smoothing, one-cycle lr, bf16, few-step AT)",
         "hydra/launcher": "run a sweep (-m) as SLURM jobs or local processes"}


def train_command(config_dir: Path):
    """The ``Command`` (``stir.config.argv``) of ``python train.py`` (configs/ as ``config_dir``)."""

    config_dir = Path(config_dir)
    groups = group_choices(config_dir, TRAIN_GROUPS)
    # loss=: the registered losses (read from their source, no torch); each has its configs/loss/<name>.yaml
    # (tests/training/test_loss_registry.py), so these are also the choices Hydra can compose.
    groups["loss"] = list(loss_names())

    def tree(line: Any) -> Mapping[str, Any]:
        return schema_tree(TrainConfig)

    def text() -> str:
        what = {**_WHAT, "profile": "the compute size: " + profiles_text(config_dir, "profile", profile_sizes(config_dir))}
        listed = [Group(g, groups[g], what[g], TRAIN_PAGES[g]) for g in TRAIN_GROUPS]
        listed.append(Group("hydra/launcher", launchers(config_dir), _WHAT["hydra/launcher"], TRAIN_PAGES["hydra/launcher"]))
        return render(
            "python train.py [group=choice ...] [key=value ...]   (-m: a sweep, e.g. seed=0,1,2)",
            "Trains one recipe into runs/<data>/<arch>[-w<width>]/<loss>[...]/seed<seed>/; a finished run of the "
            "same recipe is reused, a killed one resumed, another recipe in that folder refused. The tour: "
            "README.md; every page: docs/index.md.",
            listed, [], TrainConfig, TRAIN_PAGES, "docs/training.md",
            footer="Every key and its value: python train.py --cfg job. A mistyped key names its close match; "
                   "the traceback of any error: HYDRA_FULL_ERROR=1.")

    return Command(config_dir, "train", tree, groups, text)


def launchers(config_dir: Path) -> list:
    """hydra/launcher choices: the project's YAML files and the submitit plugin's own."""
    own = sorted(p.stem for p in (Path(config_dir) / "hydra" / "launcher").glob("*.yaml"))
    return own + ["submitit_slurm", "submitit_local"]



def profile_sizes(config_dir: Path) -> Dict[str, str]:
    """{profile: its sizes} of ``python train.py profile=NAME``, read from the composed config (recipe,
    width, training images, epochs): the YAML states them once, the help reads them."""
    from stir.config.store import compose, register_configs  # Hydra's compose: no torch

    register_configs()
    out = {}
    for name in group_choices(config_dir, ("profile",))["profile"]:
        cfg = compose(config_dir, "train", [f"profile={name}"])
        images = "all training images" if cfg.data.train_size is None else f"{cfg.data.train_size:,} training images"
        out[name] = f"recipe {cfg.recipe_name}, width {cfg.model.width}, {images}, {cfg.trainer.max_epochs} epochs"
    return out


def profiles_text(config_dir: Path, group: str, sizes: Mapping[str, str]) -> str:
    """``name (what it is for: its sizes) | ...``: what each is for from the first comment of its YAML."""
    return " | ".join(f"{name} ({_lower_first(group_description(Path(config_dir) / group / f'{name}.yaml'))}: {size})"
                      for name, size in sizes.items())


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]
