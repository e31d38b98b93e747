"""docs/architecture.md's "Adding things" stays true: in a scratch copy of the repository, a throwaway
experiment kind takes 4 files, a model source 2 (``python evaluate.py --help`` and the docs table list it
from its module), a similarity measure 3, an architecture 2 (no hand-kept list of names: the torch-free
check of model.arch reads them) and a training loss 3 (its
module, its configs/loss YAML, its test: the check of loss.name, --help and the docs table read its
declaration), and the registries' suites (the tests parametrised over each registry, the docs tables'
readers, the layer guard) pass on the copy with nothing else edited.

The files are written here exactly as the page says a contributor writes them; the test fails when a
registry needs one more file (a list to add a name to, a fixture to regenerate, a test pinning the
exact set) or when the page and this test disagree on the files.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO / "docs" / "architecture.md"

# ---------------------------------------------------------------------------------- the throwaway kind
KIND = {
    "stir/experiments/scratch_kind.py": '''
        """Experiment kind ``scratch_kind``: a throwaway (tests/test_adding_things.py); reports its models."""
        from stir.experiments.registry import Kind, register
        from stir.experiments.scratch_kind_config import ScratchKindConfig
        from stir.reporting import Report


        def run(ctx, cfg: ScratchKindConfig) -> Report:
            return Report(title=cfg.name, notes=list(cfg.models))


        def units(ctx, cfg: ScratchKindConfig) -> list:
            return []


        register(Kind("scratch_kind", ScratchKindConfig, run, units))
        ''',
    # its config beside it: a dataclass declared for the kind (torch-free: the command line reads it)
    "stir/experiments/scratch_kind_config.py": '''
        """The config of experiment kind ``scratch_kind`` (``stir.experiments.scratch_kind``), torch-free."""
        from __future__ import annotations

        from dataclasses import dataclass, field
        from typing import Any, List

        from stir.experiments.schema import ExperimentConfig, kind_config, once


        @kind_config("scratch_kind")
        @dataclass
        class ScratchKindConfig(ExperimentConfig):
            """experiment kind ``scratch_kind``: a throwaway that reports ``models``."""

            models: List[str] = field(default_factory=list)

            def model_names(self, common: Any = None) -> List[str]:
                return once(self.models)
        ''',
    "configs/evaluate/experiment/scratch_kind.yaml": '''
        # @package _global_
        defaults:
          - /experiment_schema/scratch_kind@experiment
        experiment:
          name: scratch_kind
          kind: scratch_kind
          description: "a throwaway kind (tests/test_adding_things.py)"
          models: [vanilla, at]
          compute: "full: nothing is measured; profile=cpu: the same"
        ''',
    "tests/experiments/test_scratch_kind.py": '''
        from pathlib import Path

        from stir.experiments import registry
        from stir.experiments.config import compose_evaluate

        CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "evaluate"


        def test_the_preset_composes_and_the_kind_names_its_models():
            common, experiment = compose_evaluate(CONFIGS, ["experiment=scratch_kind", "experiment.models=[at]"])
            kind = registry.get("scratch_kind")
            assert kind.models(experiment, common) == ["at"] and kind.run(None, experiment).notes == ["at"]
        ''',
}


def test_a_new_kind_edits_no_existing_file():
    """The kind's 4 files are all new: its config sits beside its module (stir/experiments/<module>_config.py),
    so stir/experiments/schema.py, a list or another kind's file is never edited to add one."""
    assert len(KIND) <= 4
    assert not [rel for rel in KIND if (REPO / rel).exists()]
    assert "stir/experiments/schema.py" not in KIND

# -------------------------------------------------------------------------------- the throwaway source
SOURCE = {
    "stir/models/sources/scratch_source.py": '''
        """``scratch:NAME``: a throwaway source (tests/test_adding_things.py), a two-layer network."""
        from torch import nn

        from stir.models.sources import SOURCES
        from stir.models.sources.base import LoadedModel, SourceOptions, wrap

        # docs/models.md's sources table (--help lists ``scratch:NAME`` from the docstring's first line)
        LOADS = "a two-layer network of random weights"
        NORMALISATION = "none"
        WEIGHTS = "none: random weights"


        @SOURCES.register("scratch")
        def load(name: str, options: SourceOptions) -> LoadedModel:
            net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 16), nn.ReLU(), nn.Linear(16, 10))
            return wrap(net, options, None, None, f"scratch:{name}", {"source": "scratch", "name": name})
        ''',
    "tests/models/test_scratch_source.py": '''
        import torch

        from stir.models.sources import load
        from stir.models.taps import representation


        def test_the_source_loads_a_model_with_its_penultimate_tap():
            m = load("scratch:tiny")
            assert representation(m.module, torch.rand(2, 3, 32, 32), "penultimate").shape == (2, 16)
        ''',
}

# ------------------------------------------------------------------------------- the throwaway measure
MEASURE = {
    "stir/similarity/scratch_measure.py": '''
        """A throwaway measure (tests/test_adding_things.py): linear CKA under another name."""
        from torch import Tensor

        from .cka import linear_cka_named
        from .spec import RIGID, measure


        @measure(family="scratch", symmetric=True, distance=False, range=(0, 1), identity=1.0, invariances=RIGID,
                 reference="scratch reference (tests/test_adding_things.py)")
        def scratch_cka(x: Tensor, y: Tensor) -> Tensor:
            """Linear CKA (Kornblith et al. 2019) of x (n, d1) and y (n, d2), a 0-d float64 tensor; errors name it."""
            return linear_cka_named(x, y, "auto", "scratch_cka")
        ''',
    "tests/similarity/test_scratch_measure.py": '''
        import torch

        import stir.similarity as sim


        def test_it_is_linear_cka():
            x, y = torch.randn(20, 5, dtype=torch.float64), torch.randn(20, 7, dtype=torch.float64)
            assert torch.allclose(sim.get("scratch_cka")(x, y), sim.linear_cka(x, y))
            assert "scratch_cka" not in sim.names("judging")  # a new measure opts in to the judging defaults
        ''',
    # its reference fixture: one value in the fixture of public implementations (written below)
    "tests/similarity/fixtures/reference_values.json": None,
}

# --------------------------------------------------------------------------- the throwaway architecture
ARCH = {
    "stir/models/scratch_arch.py": '''
        """A throwaway architecture (tests/test_adding_things.py): one hidden layer, its two taps."""
        from torch import Tensor, nn

        from stir.config.schema import ModelConfig
        from stir.models.normalize import Normalize
        from stir.models.registry import Network, Tap, register


        class ScratchNet(Network):
            def __init__(self, width: int, num_classes: int, mean, std):
                super().__init__()
                self.normalize, self.flatten = Normalize(mean, std), nn.Flatten()
                self.hidden, self.relu, self.out = nn.Linear(3 * 32 * 32, width), nn.ReLU(), nn.Linear(width, num_classes)
                self.taps = (Tap("penultimate", "relu", width, 0), Tap("logits", "out", num_classes, 0))

            def forward(self, x: Tensor) -> Tensor:  # (b, 3, 32, 32) in [0, 1] -> (b, num_classes)
                return self.out(self.relu(self.hidden(self.flatten(self.normalize(x)))))


        @register("scratch_net")
        def scratch_net(cfg: ModelConfig, num_classes: int, mean, std) -> ScratchNet:
            return ScratchNet(cfg.width, num_classes, mean, std)
        ''',
    "tests/models/test_scratch_arch.py": '''
        from stir.config.schema import TrainConfig
        from stir.config.validate import validate_train
        from stir.models import build, channel_stats


        def test_the_architecture_builds_and_the_command_line_check_takes_its_name():
            cfg = TrainConfig()
            cfg.model.arch = "scratch_net"
            validate_train(cfg)  # no list of names edited
            assert build(cfg.model, 10, *channel_stats("cifar10")).taps[-1].name == "logits"
        ''',
}

# ---------------------------------------------------------------------------------- the throwaway loss
LOSS = {
    "stir/training/losses/scratch_loss.py": '''
        """A throwaway loss (tests/test_adding_things.py): cross-entropy on Gaussian-noised images."""
        from typing import Optional

        import torch
        import torch.nn.functional as F
        from torch import Tensor, nn

        from stir.config.schema import AttackConfig, LossConfig
        from stir.training.losses import LossOutput, register


        @register("scratch_loss", attack=("eps",))
        def scratch_loss(
            model: nn.Module, x: Tensor, y: Tensor, loss_cfg: LossConfig, attack_cfg: AttackConfig,
            generator: Optional[torch.Generator] = None, attack_model: Optional[nn.Module] = None,
        ) -> LossOutput:
            """Noise training: CE(f(x + eps * n / sqrt(d)), y), n ~ N(0, I) of x's shape (b, 3, h, w)."""
            n = torch.randn(x.shape, generator=generator).to(x)
            logits = model((x + attack_cfg.eps * n / x[0].numel() ** 0.5).clamp(0, 1))  # (b, C)
            ce = F.cross_entropy(logits, y, label_smoothing=loss_cfg.label_smoothing)
            return LossOutput(ce, logits_clean=logits, extra={"ce_noise": ce.detach()})
        ''',
    "configs/loss/scratch_loss.yaml": '''
        # A throwaway loss (tests/test_adding_things.py): cross-entropy on noised images, attack.eps the noise norm
        name: scratch_loss
        ''',
    "tests/training/test_scratch_loss.py": '''
        from pathlib import Path

        import torch
        from torch import nn

        from stir.config.store import compose_train
        from stir.training.losses import get_loss
        from stir.training.runs import recipe_dir

        CONFIGS = Path(__file__).resolve().parents[2] / "configs"


        def test_the_loss_trains_and_its_run_folder_names_eps_only():
            cfg = compose_train(CONFIGS, ["loss=scratch_loss", "attack.eps=0.5", "attack.steps=2"])  # checked
            assert recipe_dir(cfg).parent.name == "scratch_loss-eps0.5"
            model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10))
            out = get_loss("scratch_loss")(model, torch.rand(4, 3, 8, 8), torch.arange(4), cfg.loss, cfg.attack)
            out.loss.backward()
            assert all(p.grad is not None for p in model.parameters())
        ''',
}

# The registries' suites, run on the copy: every test of these files except the heavy per-preset and
# per-measure property tests, which run for the new preset and the new measure only.
SUITES = [
    "tests/experiments/test_experiment_registry.py", "tests/experiments/test_presets.py",
    "tests/config/test_command_line.py::test_the_schema_names_each_registered_kind_s_config",
    "tests/models/test_model_sources.py", "tests/similarity/test_similarity_registry.py",
    "tests/similarity/test_similarity_registry_flags.py", "tests/similarity/test_similarity_references.py",
    "tests/similarity/test_similarity_docs.py", "tests/similarity/test_similarity_properties.py",
    "tests/test_package_layers.py", "tests/models/test_models.py", "tests/config/test_arch_names.py",
    "tests/training/test_loss_registry.py", "tests/training/test_losses.py",
    "tests/config/test_config_errors.py::test_invalid_values_name_key_and_choices",
    "tests/config/test_command_line.py::test_a_mistyped_key_or_preset_is_one_line_with_the_close_match",
    *(p for p in {**KIND, **SOURCE, **MEASURE, **ARCH, **LOSS} if "/test_scratch" in p),
]
SELECT = ("(not test_presets or scratch_kind) and (not test_similarity_properties or scratch_cka) "
          "and (not test_model_sources or registered or listed or bad_sources) "
          "and (not test_models or scratch_net or every_registered_architecture)")


def _scratch_copy(dest: Path) -> None:
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "paper_report", "*.png", ".pytest_cache")
    for folder in ("stir", "tests", "configs", "docs"):
        shutil.copytree(REPO / folder, dest / folder, ignore=skip)
    for file in ("pyproject.toml", "train.py", "evaluate.py"):  # the entry points: the command-line tests run them
        shutil.copy2(REPO / file, dest / file)
    (dest / "bench" / "results").mkdir(parents=True)


def _write(dest: Path, files: dict) -> None:
    for rel, text in files.items():
        path = dest / rel
        if text is None:
            continue
        body = textwrap.dedent(text).lstrip("\n")
        if path.exists():  # a file the extension point shares: its part is added at the end
            path.write_text(path.read_text() + textwrap.dedent(text))
        else:
            path.write_text(body)


def _add_reference_value(dest: Path) -> None:
    """The measure's reference fixture: its value on case A, as a public implementation would give it
    (here linear CKA's, which it is)."""
    import torch

    import stir.similarity as sim

    path = dest / "tests/similarity/fixtures/reference_values.json"
    fixture = json.loads(path.read_text())
    x, y = (torch.tensor(fixture["cases"]["A"][k], dtype=torch.float64) for k in ("x", "y"))
    fixture["values"].append({"measure": "scratch_cka", "options": {}, "case": "A",
                              "value": float(sim.linear_cka(x, y)), "reference": "scratch reference"})
    path.write_text(json.dumps(fixture, indent=1))


def test_the_page_lists_the_files_this_test_adds():
    """The counts of "Adding things" are the files written below: 4 for a kind, 2 a source, 3 a measure,
    2 an architecture, 3 a loss."""
    text = ARCHITECTURE.read_text().split("## Adding things", 1)[1]
    for what, files in (("experiment kind", KIND), ("model source", SOURCE), ("similarity measure", MEASURE),
                        ("architecture", ARCH), ("loss", LOSS)):
        match = re.search(rf"A new {what} \((\d) files\)", text)
        assert match and int(match.group(1)) == len(files), what
    assert (len(KIND), len(SOURCE), len(MEASURE), len(ARCH), len(LOSS)) == (4, 2, 3, 2, 3)


def test_a_new_kind_source_measure_architecture_and_loss_take_4_2_3_2_and_3_files_and_nothing_else_fails(tmp_path):
    dest = tmp_path / "repo"
    _scratch_copy(dest)
    for files in (KIND, SOURCE, MEASURE, ARCH, LOSS):
        _write(dest, files)
    _add_reference_value(dest)
    env = {**os.environ, "PYTHONPATH": str(dest), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-m", "not slow", "-k", SELECT,
                          *SUITES], cwd=dest, env=env, capture_output=True, text=True, timeout=900)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-6000:]
    assert f"{dest}/stir/__init__.py" in subprocess.run(
        [sys.executable, "-c", "import stir; print(stir.__file__)"], cwd=dest, env=env, capture_output=True,
        text=True).stdout  # the copy was tested, not this checkout
    passed = set(re.findall(r"^(\S+) PASSED", out, re.M))
    for new in ("[scratch_kind]", "[scratch]", "[scratch_cka]", "[scratch_kind-full]", "[scratch_kind-cpu]", "scratch_net]",
                "test_every_loss_trains_and_reports_its_logits[scratch_loss]",
                "test_loss_equals_name_composes_and_passes_the_check[scratch_loss]"):
        assert any(new in test for test in passed), (new, sorted(passed)[:20])
    for test in ("test_scratch_kind.py", "test_scratch_source.py", "test_scratch_measure.py", "test_scratch_arch.py",
                 "test_scratch_loss.py", "test_the_config_check_names_every_registered_architecture",
                 "test_the_torch_free_reading_of_the_declarations_is_the_registry",
                 "test_each_loss_has_its_yaml_and_each_yaml_is_a_loss", "test_the_docs_table_lists_every_loss",
                 "test_every_registered_source_is_in_evaluate_help_and_the_docs_table[scratch]"):
        assert any(test in p for p in passed), test
