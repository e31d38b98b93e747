"""The command line is checked against the typed schema before Hydra: one line, exit 2, the fix named;
``--help`` is generated from the schema and names real groups, presets, keys and documentation pages."""
import dataclasses
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO, load_entry_point, refused
from stir.config.argv import parse
from stir.config.loss_specs import loss_names


@pytest.mark.parametrize("script, args, message", [
    ("train", ["trainer.max_epoch=1"], "unknown config key trainer.max_epoch (did you mean trainer.max_epochs?)"),
    ("train", ["+trainer.max_epoch=1"], "unknown config key trainer.max_epoch (did you mean trainer.max_epochs?)"),
    ("train", ["sed=1"], "unknown config key sed (did you mean seed?)"),
    ("train", ["model=resnet99"], "model=resnet99 is not a choice of model: did you mean model=resnet34 or model=resnet18?"),
    ("train", ["loss=fgsm"], f"loss=fgsm is not a choice of loss: choose one of {', '.join(loss_names())}"),
    ("train", ["seed=abc"], "Error merging override seed=abc: Value 'abc' of type 'str' could not be converted to Integer"),
    ("evaluate", ["inversion.step=50"], "unknown config key inversion.step (did you mean inversion.steps or"),
    ("evaluate", ["inversion.stpes=50"], "unknown config key inversion.stpes (did you mean inversion.steps"),
    ("evaluate", ["experiment=seed"], "experiment=seed is not a choice of experiment: did you mean experiment=seeds?"),
    ("evaluate", ["profile=gpu"], "profile=gpu is not a choice of profile: choose one of cpu, full"),
    ("evaluate", ["layers=all"], "layers=all: layers is a group of keys (layers.taps, layers.reduce, layers.count), "
                                 "not one value; e.g. layers.taps=all"),
    ("evaluate", ["k=abc"], "Error merging override k=abc: Value 'abc' of type 'str' could not be converted to Integer"),
    ("evaluate", ["experiment=stitching", "experiment.epoch=2"], "unknown config key experiment.epoch (did you mean "
                                                                 "experiment.epochs?)"),
    ("evaluate", ["experiment.epochs=2"], "unknown config key experiment.epochs"),  # pair has no epochs
])
def test_a_mistyped_key_or_preset_is_one_line_with_the_close_match(script, args, message, monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert refused(script, args, monkeypatch, capsys).startswith(message)
    assert list(tmp_path.iterdir()) == []  # refused before any work: no folder


MOVED = ["batch_size", "memory_gb", "compile", "keep_cpu_memory", "channels_last", "cache_dir", "progress", "warn_below",
         "eval_batch"]


@pytest.mark.parametrize("old, new", [
    *[(f"inversion.{k}", f"execution.{k}") for k in MOVED],
    ("inversion.min_fraction_iri", "min_fraction_iri"),
    ("stitching.epochs", "experiment.epochs"), ("grounding.n_probe", "experiment.n_probe"),
    ("layer_matching.measures", "experiment.measures"), ("invariance.transforms", "experiment.transforms"),
    ("tap1", "tap_ref"), ("tap2", "tap_target"), ("weights1", "weights_ref"), ("weights2", "weights_target"),
])
def test_a_key_that_moved_in_the_redesign_says_where_it_is(old, new, monkeypatch, capsys):
    message = refused("evaluate", [f"{old}=1"], monkeypatch, capsys)
    assert message.startswith(f"{old} moved to {new}: use {new}=1"), message


def test_refused_as_a_process_too(tmp_path):
    """The real process: exit status 2, the message and the traceback hint, nothing else, nothing written."""
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    done = subprocess.run([sys.executable, str(REPO / "evaluate.py"), "inversion.step=50"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.splitlines()[0].startswith("error: unknown config key inversion.step (did you mean inversion.steps")
    assert len(done.stderr.strip().splitlines()) == 2 and not done.stdout.strip()
    assert list(tmp_path.iterdir()) == []


def test_flags_and_sweeps_are_left_to_hydra():
    line = parse(["-m", "seed=0,1", "--cfg", "job", "+a.b=1", "~c", "hydra/launcher=slurm", "--info", "defaults"])
    assert line.multirun and line.introspection and not line.other_config
    assert [(o.prefix, o.key, o.value) for o in line.overrides] == [
        ("", "seed", "0,1"), ("+", "a.b", "1"), ("~", "c", None), ("", "hydra/launcher", "slurm")]
    assert parse(["--config-name", "other"]).other_config


def test_a_sweep_checks_every_choice(monkeypatch, capsys):
    message = refused("train", ["-m", "loss=vanilla,atx"], monkeypatch, capsys)
    assert message.startswith("loss=atx is not a choice of loss: did you mean loss=at?")


def _help(name: str, monkeypatch, capsys) -> str:
    module = load_entry_point(name)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", "--help"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        module.main()
    assert done.value.code == 0
    return capsys.readouterr().out


def _headings(page) -> set:
    """MkDocs' anchors of a Markdown page (its toc extension's slugs)."""
    out = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = re.sub(r"[`*]", "", line.lstrip("#").strip()).lower()
            out.add(re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", title)).strip("-"))
    return out


@pytest.mark.parametrize("name, schema_path, groups", [
    ("train", "stir.config.schema:TrainConfig", ["data", "model", "loss", "profile"]),
    ("evaluate", "stir.experiments.config:EvaluateConfig", ["experiment", "profile", "data"]),
])
def test_help_lists_every_group_preset_and_key_with_a_page_that_exists(name, schema_path, groups, monkeypatch, capsys):
    import importlib

    module, attr = schema_path.split(":")
    schema = getattr(importlib.import_module(module), attr)
    text = _help(name, monkeypatch, capsys)
    config_dir = REPO / "configs" if name == "train" else REPO / "configs" / "evaluate"
    for group in groups:
        choices = sorted(p.stem for p in (config_dir / group).glob("*.yaml"))
        assert re.search(rf"^  {group}=", text, re.M), group
        assert all(c in text for c in choices), (group, choices)
    if name == "evaluate":  # every preset on a line of its own
        for preset in (config_dir / "experiment").glob("*.yaml"):
            assert re.search(rf"^  {preset.stem}\s", text, re.M), preset.stem
    for f in dataclasses.fields(schema):
        assert re.search(rf"^  {f.name}(=|\.\*)", text, re.M), f.name
    assert "layers=penultimate" not in text  # issue 22: a form that fails was advertised
    pages = set(re.findall(r"\((docs/[\w/.-]+\.md)(?:#([\w-]+))?\)", text.replace("\n", " ")))
    assert pages
    for page, anchor in pages:
        assert (REPO / page).is_file(), page
        if anchor:
            assert anchor in _headings(REPO / page), f"{page}#{anchor}"


_IMPORTS_OF = """
import runpy, sys
sys.argv = {argv!r}
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as stop:
    code = stop.code
heavy = sorted(m for m in ("torch", "lightning", "torchvision", "numpy", "stir.measure.plan", "stir.zoo") if m in sys.modules)
print("HEAVY", code, heavy)
"""


@pytest.mark.parametrize("argv", [["evaluate.py", "inversion.step=10"], ["evaluate.py", "--help"],
                                  ["evaluate.py", "experiment=stitching", "experiment.epoch=2"],
                                  ["evaluate.py", "k=abc"], ["train.py", "model.wdth=3"], ["train.py", "--help"]])
def test_the_command_line_is_checked_before_torch_and_lightning_are_imported(argv):
    """A typo or --help costs the schema's dataclasses, Hydra and OmegaConf only (about a second, not 13 s of CPU)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    env.pop("HYDRA_FULL_ERROR", None)
    done = subprocess.run([sys.executable, "-c", _IMPORTS_OF.format(argv=argv)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    last = done.stdout.strip().splitlines()[-1]
    code = 0 if "--help" in argv else 2
    assert last == f"HEAVY {code} []", (last, done.stderr[-2000:])


def test_evaluate_help_lists_every_model_name_with_where_its_weights_come_from(monkeypatch, capsys):
    """Every name of configs/zoo.yaml (shipped, recipes to train, real networks, RobustBench) is in
    --help, under the section that says where its weights come from (issue 55: r20 was missing)."""
    from omegaconf import OmegaConf

    text = _help("evaluate", monkeypatch, capsys)
    names = list(OmegaConf.to_container(OmegaConf.load(REPO / "configs" / "zoo.yaml")))
    assert "r20" in names and "c100_at" in names
    listed = set(re.findall(r"^  (\S+)\s", text, re.M))
    assert not set(names) - listed, sorted(set(names) - listed)
    sections = text.split("\n\n")
    section_of = {name: next(s.splitlines()[0] for s in sections if re.search(rf"^  {re.escape(name)}\s", s, re.M))
                  for name in ("vanilla", "c100_at", "r20", "rb_rice2020")}
    assert section_of["vanilla"].startswith("Shipped zoo models")
    assert section_of["c100_at"].startswith("Zoo recipes not shipped") and "train_missing=true" in text
    assert section_of["r20"].startswith("Models of other sources")
    assert re.search(r"^  r20\s+realnet:resnet20-akamaster: weights under zoo.weights_root", text, re.M)


def test_evaluate_help_lists_each_shipped_zoo_model_on_one_line(monkeypatch, capsys):
    import json

    text = _help("evaluate", monkeypatch, capsys)
    names = sorted(json.loads(p.read_text())["name"] for p in (REPO / "zoo" / "models").glob("*.json"))
    assert names
    for name in names:
        line = re.search(rf"^  {re.escape(name)}\s+profile=(\w+) .*accuracy 0\.\d+.*$", text, re.M)
        assert line, name
        after = text[line.end() + 1:].splitlines()[0]
        assert not after.startswith("   "), (name, after)  # no continuation line


def test_the_schema_names_each_registered_kind_s_config():
    """stir.experiments.schema.KIND_CONFIGS (what the command line is checked against) is the registry's."""
    from stir.experiments.registry import get, kinds
    from stir.experiments.schema import KIND_CONFIGS

    assert sorted(KIND_CONFIGS) == kinds()
    assert all(KIND_CONFIGS[k] is get(k).config for k in kinds())


def _paragraphs(page) -> dict:
    """{`profile=NAME`: its paragraph, whitespace collapsed} of the Profiles section of a page."""
    text = page.read_text().split("## Profiles", 1)[1].split("\n## ", 1)[0]
    out = {}
    for para in text.split("\n\n"):
        found = re.match(r"`profile=(\w+)`", para.strip())
        if found:
            out[found.group(1)] = " ".join(para.split())
    return out


def test_each_profile_size_is_read_from_the_config_by_the_help_and_the_docs_state_the_same(monkeypatch, capsys):
    """Issue 32: the sizes of a profile live in its YAML; --help reads them from the composed config and
    docs/presets.md states the same numbers."""
    from stir.config.store import compose_train
    from stir.experiments.config import compose_evaluate

    train_help = " ".join(_help("train", monkeypatch, capsys).split())
    evaluate_help = " ".join(_help("evaluate", monkeypatch, capsys).split())
    docs = _paragraphs(REPO / "docs" / "presets.md")
    profiles = sorted(p.stem for p in (REPO / "configs" / "evaluate" / "profile").glob("*.yaml"))
    assert sorted(docs) == profiles
    for name in sorted(p.stem for p in (REPO / "configs" / "profile").glob("*.yaml")):
        cfg = compose_train(REPO / "configs", [f"profile={name}"])
        images = "all training images" if cfg.data.train_size is None else f"{cfg.data.train_size:,} training images"
        sizes = f"recipe {cfg.recipe_name}, width {cfg.model.width}, {images}, {cfg.trainer.max_epochs} epochs"
        assert re.search(rf"{name} \([^()]*: {re.escape(sizes)}\)", train_help), (name, sizes)
    for name in profiles:
        cfg, _ = compose_evaluate(REPO / "configs" / "evaluate", [f"profile={name}"])
        steps, walk = cfg.inversion.steps, cfg.difficulty.steps  # integers: resolved once by evaluate_config
        assert isinstance(steps, int) and isinstance(walk, int)
        stated = f"n={cfg.n}, k={cfg.k}, {steps} {cfg.inversion.mode} inversion steps, walks of {walk}; zoo models of " \
                 f"train.py profile={cfg.zoo.profile}"
        assert stated in evaluate_help, (name, stated)
        zoo = compose_train(REPO / "configs", [f"profile={cfg.zoo.profile}"])
        page = docs[name]
        epochs = f"{zoo.trainer.max_epochs} epoch{'s' if zoo.trainer.max_epochs != 1 else ''}"
        for fact in (f"n = {cfg.n}", f"k = {cfg.k}", f"{steps} faithful steps", f"width {zoo.model.width}",
                     epochs if name != "laptop" else f"for {epochs}"):
            assert fact in page, (name, fact)
        if steps != 1000:  # a shorter inversion than the published: the walk's steps said
            assert f"walks of {walk} steps" in page, (name, walk)


def test_no_profile_comment_restates_a_size():
    """A profile's YAML comments say what it is for; its numbers are its keys (times and cores are not keys)."""
    for path in [*(REPO / "configs" / "profile").glob("*.yaml"), *(REPO / "configs" / "evaluate" / "profile").glob("*.yaml")]:
        comments = " ".join(line for line in path.read_text().splitlines() if line.startswith("#") and "@package" not in line)
        rest = re.sub(r"\b(about |~)?\d+(-\d+)? (min|CPU cores?)\b|ResNet18", "", comments)
        assert not re.search(r"\d", rest), (path.name, rest)


def test_zoo_profile_choices_are_the_train_profiles():
    from stir.config import ConfigError
    from stir.experiments.config import compose_evaluate

    with pytest.raises(ConfigError) as err:
        compose_evaluate(REPO / "configs" / "evaluate", ["zoo.profile=gpu"])
    choices = sorted(p.stem for p in (REPO / "configs" / "profile").glob("*.yaml"))
    assert str(err.value) == f"zoo.profile='gpu' is not a valid choice; choose one of {choices}"


@pytest.mark.parametrize("key", ["batch_size", "eval_batch_size", "augment", "crop_padding", "padding_mode", "flip",
                                 "device_resident"])
def test_a_training_only_data_key_given_to_evaluate_names_the_key_and_the_fix(key, monkeypatch, capsys):
    """Issue 32: evaluate.py's data group holds only what selects images; train.py's batching and
    augmentation keys are refused in one line (exit 2) with where they go: the zoo's recipes."""
    from stir.experiments.commands import TRAINING_DATA_KEYS

    assert key in TRAINING_DATA_KEYS
    message = refused("evaluate", [f"data.{key}=1"], monkeypatch, capsys)
    assert message.startswith(f"data.{key} is a training key (train.py): evaluate.py's data group only selects images")
    assert message.endswith(f"""give it in zoo.overrides: 'zoo.overrides=["data.{key}=1"]'""")


def test_the_laptop_profile_names_the_shipped_results_interval_reading_and_its_reports_say_so():
    """Issue 53: jackknife_corrected is the default interval; profile=laptop names half_sampling, the reading
    every shipped result (zoo/store) was measured under, and a report made under it carries a note."""
    from types import SimpleNamespace

    from stir.experiments import estimator_notes
    from stir.experiments.config import compose_evaluate
    from stir.measure.plan import Estimator

    readings = {}
    for name in sorted(p.stem for p in (REPO / "configs" / "evaluate" / "profile").glob("*.yaml")):
        cfg, _ = compose_evaluate(REPO / "configs" / "evaluate", [f"profile={name}"])
        notes = estimator_notes(SimpleNamespace(estimator=Estimator.of(cfg)))
        readings[name] = (cfg.calibration.interval, any(n.startswith("intervals: calibration.interval=half_sampling")
                                                        for n in notes))
    assert readings == {"cpu": ("jackknife_corrected", False), "full": ("jackknife_corrected", False),
                        "laptop": ("half_sampling", True), "tiny": ("jackknife_corrected", False)}
    shipped = {json.loads(f.read_text())["record"]["config"]["calibration"]["interval"]
               for kind in ("direction", "similarity") for f in (REPO / "zoo" / "store" / kind).glob("*.json")}
    assert shipped == {"half_sampling"}  # what the laptop profile names, so the shipped zoo is served
