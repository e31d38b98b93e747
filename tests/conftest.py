"""Shared fixtures: tiny data sets in the real CIFAR layout, and the real entry points in-process."""
import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from stir.data import synthetic

REPO = Path(__file__).resolve().parents[1]


def host() -> dict:
    """What decides whether float results of a training can be reproduced bit for bit: the CPU (its
    model and vector extensions: oneDNN and MKL pick kernels and cache blocking by them), torch,
    numpy, Lightning and the platform. Pinned values of tiny trainings are host-specific: on another
    CPU with the same code and versions, 6 SGD steps moved weight statistics by up to 40% and a
    golden set's discrete counts flipped (measured 2026-12-01: fixtures written on an unrecorded host, rerun on an AMD EPYC)."""
    import platform

    import lightning
    import numpy

    model, flags = "unknown", ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and model == "unknown":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = " ".join(sorted(f for f in line.split(":", 1)[1].split() if f.startswith(("avx512", "amx"))))
    except OSError:
        pass
    return {"torch": torch.__version__, "numpy": numpy.__version__, "lightning": lightning.__version__,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "cpu": model, "cpu_flags": flags,
            "machine": platform.machine(), "python": platform.python_version()}


def other_host_reason(recorded: dict, what: str, command: str) -> str:
    """The skip reason of a host-specific pin written on another host (``host``)."""
    ours = host()
    differs = {k: (recorded.get(k), ours[k]) for k in ours if recorded.get(k) != ours[k]}
    return (f"{what} was written on another host ({differs}): kernel rounding of another CPU or library moves "
            f"tiny trainings beyond any useful tolerance. Write it on this host from the base commit before a change "
            f"({command}), then compare after it")


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    # Test networks are tiny: one thread is several times faster than two fighting over small ops.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def load_entry_point(name: str):
    """Import train.py / evaluate.py from the repository root as a module."""
    spec = importlib.util.spec_from_file_location(f"stir_entry_{name}", REPO / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wandb_dirs(tmp_path: Path) -> dict:
    """Environment variables that keep a child's W&B folders under the test's, silent (an offline run
    writes nothing outside them and its report)."""
    return {"WANDB_SILENT": "true", "WANDB_DATA_DIR": str(tmp_path / "wandb_data"),
            "WANDB_CACHE_DIR": str(tmp_path / "wandb_cache"), "WANDB_CONFIG_DIR": str(tmp_path / "wandb_config")}


def run_entry_point(name: str, args, monkeypatch) -> None:
    """Run ``python <name>.py *args`` in this process (the real Hydra main, the real pipeline)."""
    module = load_entry_point(name)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")  # let exceptions through instead of sys.exit(1)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *args])
    module.main()


@pytest.fixture(scope="session")
def cifar10_root(tmp_path_factory) -> Path:
    """A tiny CIFAR-10 in the official python layout: 160 train, 40 test images."""
    root = tmp_path_factory.mktemp("cifar10")
    synthetic.write_cifar10_python(root, n_train=160, n_test=40, seed=0)
    return root


@pytest.fixture(scope="session")
def cifar100_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cifar100")
    synthetic.write_cifar100_python(root, n_train=200, n_test=40, seed=0)
    return root


def tiny_recipe() -> list:
    """train.py's ``profile=tiny`` (configs/profile/tiny.yaml, the one place that recipe is written) as
    key overrides, so that a test can shrink any profile's recipe with it (a second ``profile=`` would
    replace the first), on the test's own tiny data set: all of its training images (the profile's 120
    are for real CIFAR)."""
    from omegaconf import OmegaConf

    def flat(node, prefix=""):
        for key, value in node.items():
            if isinstance(value, dict):
                yield from flat(value, f"{prefix}{key}.")
            else:
                yield f"{prefix}{key}={'null' if value is None else value}"

    tiny = OmegaConf.to_container(OmegaConf.load(REPO / "configs" / "profile" / "tiny.yaml"))
    return [o for o in flat(tiny) if not o.startswith("data.train_size=")] + ["data.train_size=null"]


def tiny_train_args(data_root: Path, runs_dir: Path, *extra: str) -> list:
    """Overrides that shrink a real recipe to seconds: ``tiny_recipe`` (width 4, 1 epoch, 2-step attacks)
    on the tiny data set at ``data_root``, no progress bar, no W&B."""
    return [
        *tiny_recipe(), f"data.root={data_root}", "data.download=false",
        "trainer.enable_progress_bar=false", "logger.wandb.mode=disabled", f"runs_dir={runs_dir}", *extra,
    ]


def tiny_run_test_logits(run: Path, data_root: Path):
    """(logits (n, 10) float32, labels (n,)): a finished tiny run's saved weights (weights.pt, a width-4
    ResNet18) on the test split of ``data_root`` as ``tiny_train_args`` splits it, eval mode, no gradient."""
    from stir.config.schema import DataConfig, ModelConfig
    from stir.data import StirDataModule, to_float
    from stir.models import build, channel_stats
    from stir.training.runs import load_state_dict

    data = StirDataModule(DataConfig(root=str(data_root), download=False, holdout_size=40))
    data.setup()
    images, labels = data.split_tensors("test")
    net = build(ModelConfig(width=4), 10, *channel_stats("cifar10"))
    net.load_state_dict(load_state_dict(str(run)))
    with torch.no_grad():
        return net.eval()(to_float(images)), labels


def refused(name: str, args, monkeypatch, capsys) -> str:
    """Run ``python <name>.py *args`` in this process as a user would (no HYDRA_FULL_ERROR); assert that it
    refuses the command with exit status 2, and return its one-line message (without ``error: ``)."""
    module = load_entry_point(name)
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *args])
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        module.main()
    err = capsys.readouterr().err.strip().splitlines()
    assert done.value.code == 2, err
    assert err and err[0].startswith("error: ") and len(err) == 2, err  # the message, then how to see the traceback
    return err[0][len("error: "):]
