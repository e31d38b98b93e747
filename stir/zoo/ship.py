"""Ship a finished run folder into the repository's zoo (``stir.zoo.shipped``):

    python -m stir.zoo.ship runs/cifar10/resnet18-w16/vanilla-fast/seed0 --name vanilla --profile laptop

The run must be finished (``RunFolder.verify``), have its test metrics and training curve, and hold
exactly the recipe the zoo name resolves to at that profile (with ``--override KEY=VALUE``: the
evaluation's ``zoo.overrides``; the data is the run's own, by content). The exported state dict must
give the run's logits on a probe batch. With ``--dtype float16`` the weights are stored at half
precision (half the bytes), with ``--dtype int8`` as per-channel int8 weights (a quarter of the bytes:
``stir.zoo.quantize``): the stored model then computes slightly other logits than the run, so its
test and robust accuracy are measured again, as the run measured its own (``remeasure``: the recipe's
test split, robust subset, attack and precision, through Lightning's ``Trainer.test``), and the entry
records those (``test``) beside the run's (``test_of_run``); a stored model whose accuracy drops by more
than ``--max-acc-drop`` is refused. Nothing is overwritten: a file that exists is refused. A bad input
is one line and exit status 2.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io
import json
import logging
import shlex
import tempfile
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence

import torch

from stir import atomic
from stir.cli import EXPECTED_ERRORS, one_line_errors
from stir.config.schema import DataConfig, ModelConfig, TrainConfig
from stir.models import build, channel_stats
from stir.models.finite import probe_images
from stir.models.weights import load_state
from stir.provenance import library_versions
from stir.training.runs import FINISHED, RunFolder, load_state_dict, recipe_differences, recipe_of
from stir.zoo import checkpoints
from stir.zoo.recipes import Recipes
from stir.zoo.quantize import dequantize
from stir import manifest
from stir.zoo.shipped import (DEFAULT_DIR, DTYPES, ENTRIES, REPO, WEIGHTS, ShippedModel, entry_stem, export_state, now,
                              recipe_identity, relative, same_logits, training_curve, training_wall_s)

log = logging.getLogger(__name__)
PROBE = (8, 3, 32, 32)  # the probe batch the exported weights must reproduce the run's logits on


def ship(run_dir: Path, name: str, profile: str, folder: Path = DEFAULT_DIR,
         zoo_file: Path = REPO / "configs/zoo.yaml", overrides: Sequence[str] = (), dtype: str = "float32",
         max_acc_drop: float = 0.005) -> ShippedModel:
    """Add the finished run ``run_dir`` to the shipped zoo under ``folder`` as zoo model ``name`` at
    ``profile``, its weights stored as ``dtype`` (DTYPES); returns its entry. Raises ValueError (one
    line) for anything that is not shippable."""
    if dtype not in DTYPES:
        raise ValueError(f"--dtype {dtype!r} is not one of {sorted(DTYPES)}; float32 keeps the trained weights exactly")
    run = RunFolder(Path(run_dir))
    state, why = run.verify()
    if state != FINISHED:
        raise ValueError(f"{run.path} is not a finished run ({why}); finish it with `{run.finish_command()}`")
    metrics = json.loads(run.metrics.read_text())
    test = {k: float(v) for k, v in metrics.items() if k.startswith("test/")}
    if "test/acc" not in test:
        raise ValueError(f"{run.metrics} has no test/acc: a shipped model states its accuracy")
    curve = training_curve(run.path)
    if not curve:
        raise ValueError(f"{run.path} has no training curve (csv/version_*/metrics.csv with epoch metrics)")
    stored = run.stored_recipe()
    if stored is None:
        raise ValueError(f"{run.path} has neither recipe.json nor config.yaml: its recipe is unknown")

    recipes = Recipes(Path(zoo_file), REPO / "configs", profile=profile, overrides=list(overrides))
    if name in recipes.recipes and recipes.recipes[name].init_from is not None:
        raise ValueError(f"zoo model {name!r} is warm-started (init_from): shipping warm-started models is not supported")
    cfg = recipes.train_config(name)
    expected = recipe_of(cfg)
    if cfg.data.source is None and "data.source" in stored:
        expected["data.source"] = stored["data.source"]  # the run's own data, by content
    changes = recipe_differences(stored, expected)
    if changes:
        raise ValueError(f"{run.path} holds another recipe than zoo model {name!r} at profile={profile} ({changes}); "
                         "ship it under the zoo name of its recipe, or give the evaluation's zoo.overrides as --override")

    data = export_state(load_state_dict(str(run.path)), dtype)
    sha = hashlib.sha256(data).hexdigest()
    stem = entry_stem(name, profile, sha)
    weights, entry = Path(folder) / WEIGHTS / f"{stem}.pt", Path(folder) / ENTRIES / f"{stem}.json"
    for existing in (weights, entry):
        if existing.exists():
            raise ValueError(f"{existing} exists: shipped files are never rewritten (this model is shipped already)")

    model = ModelConfig(arch=cfg.model.arch, width=cfg.model.width)
    shipped_net = build(model, cfg.data.num_classes, *channel_stats(cfg.data.name))
    load_state(shipped_net, dequantize(torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)),
               source=str(weights), arch=f"{model.arch} (width {model.width})")
    differs = same_logits(checkpoints.network(run.path, cfg), shipped_net, probe_images(torch.device("cpu"), PROBE))
    stored_as: Dict[str, Any] = {}
    if dtype == "float32" and differs:
        raise ValueError(f"the exported weights of {run.path} do not reproduce its logits on a probe batch ({differs})")
    if dtype != "float32":  # the stored model is another function than the run's: measure it again
        run_data = (metrics.get("config") or {}).get("data") or {}
        cfg = dataclasses.replace(cfg, data=DataConfig(**{k: v for k, v in run_data.items()
                                                          if k in {f.name for f in dataclasses.fields(DataConfig)}}))
        again = remeasure(cfg, shipped_net)
        drop = test["test/acc"] - again["test/acc"]
        if drop > max_acc_drop:
            raise ValueError(f"{run.path} stored as {dtype} loses {drop:.4f} test accuracy ({test['test/acc']:.4f} -> "
                             f"{again['test/acc']:.4f}), more than --max-acc-drop {max_acc_drop}; ship it as float32")
        stored_as = {"test_of_run": test, "probe_logits": differs or "identical",
                     "remeasured": f"the stored {dtype} weights, loaded into float32 parameters"
                                   + (" (dequantized: stir.zoo.quantize)" if dtype == "int8" else "")
                                   + ", measured again as the run measured its own (stir.zoo.ship.remeasure)"}
        test = again

    atomic.write_bytes(weights, data)
    record = {
        "name": name, "profile": profile, "file": f"{WEIGHTS}/{weights.name}", "sha256": sha, "bytes": len(data),
        "dtype": dtype, "parameters": sum(p.numel() for p in shipped_net.parameters()),
        "model": {"arch": model.arch, "width": model.width},
        "data": {"name": cfg.data.name, "num_classes": cfg.data.num_classes},
        "recipe": stored, "recipe_sha256": recipe_identity(stored),
        "command": "python train.py " + " ".join(shlex.quote(o) for o in recipes.overrides(name)),
        "zoo_overrides": list(overrides),
        "trained_on": (metrics.get("config") or {}).get("data", {}).get("source"),
        "test": test, **stored_as,
        "robust_attack": {**((metrics.get("config") or {}).get("eval_attack") or {}),
                          "images": (metrics.get("config") or {}).get("trainer", {}).get("robust_test_size")},
        "epochs": metrics.get("epochs"), "train_wall_s": training_wall_s(run.path), "curve": curve,
        "trained_with": metrics.get("versions", {}), "shipped_with": library_versions(),
        "source_run": str(run.path.resolve()), "shipped_at": now(),
    }
    atomic.write_json(entry, record)
    manifest.pin(folder, [entry])  # the new entry is served only pinned (stir.manifest)
    shipped = ShippedModel.read(entry)
    shipped.state_dict()  # the file on disk has the sha256 the entry records
    log.info("shipped %s (profile=%s) as %s: test/acc %.4f, %d bytes", name, profile, relative(weights),
             test["test/acc"], len(data))
    return shipped


def remeasure(cfg: TrainConfig, network: torch.nn.Module) -> Dict[str, float]:
    """``network``'s test metrics as a run of ``cfg`` measured its own at the end of training: the
    recipe's LightningModule (``build_system``) around it, its test split and robust test subset, its
    evaluation attack and precision, through Lightning's ``Trainer.test``."""
    from stir.data import StirDataModule
    from stir.training.pipeline import build_system
    from stir.training.trainer import build_trainer

    data = StirDataModule(cfg.data, shuffle_seed=cfg.seed)
    with tempfile.TemporaryDirectory() as tmp:  # Trainer.test writes no checkpoint; the folder is its default root
        trainer = build_trainer(dataclasses.replace(cfg.trainer, enable_progress_bar=False), [], Path(tmp))
        (metrics,) = trainer.test(build_system(cfg, network), datamodule=data, verbose=False)
    return {k: float(v) for k, v in _plain(metrics).items()}


def _plain(metrics: Mapping[str, Any]) -> Dict[str, Any]:
    return {k: (v.item() if isinstance(v, torch.Tensor) else v) for k, v in metrics.items()}


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m stir.zoo.ship", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a finished run folder of train.py")
    parser.add_argument("--name", required=True, help="its zoo name (configs/zoo.yaml)")
    parser.add_argument("--profile", required=True, help="the train.py profile it was trained at (laptop, cpu, full)")
    parser.add_argument("--zoo-dir", type=Path, default=DEFAULT_DIR, help="the shipped zoo folder (default: zoo/)")
    parser.add_argument("--zoo-file", type=Path, default=REPO / "configs/zoo.yaml")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a zoo.overrides element the evaluation gives (repeatable)")
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES),
                        help="the weights file's type (float16: half the bytes; int8: weights quantized per output "
                             "channel, a quarter; accuracy measured again)")
    parser.add_argument("--max-acc-drop", type=float, default=0.005,
                        help="refuse a reduced-precision model whose test accuracy drops by more than this")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with one_line_errors(*EXPECTED_ERRORS):
        ship(args.run_dir, args.name, args.profile, args.zoo_dir, args.zoo_file, args.override, args.dtype,
             args.max_acc_drop)


if __name__ == "__main__":
    main()
