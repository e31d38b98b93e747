"""What one ``evaluate.py`` run works with: the zoo, loaded models, the images X, the store."""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict

import torch
from omegaconf import OmegaConf
from torch import Tensor, nn

from stir.config.evaluate_schema import EvaluateConfig
from stir.config.schema import DataConfig
from stir.data import StirDataModule, to_float
from stir.evaluation.report_index import report_dir, report_settings
from stir.evaluation.store import ResultStore
from stir.evaluation.zoo import Zoo, ZooModel, load_model

log = logging.getLogger(__name__)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={name!r} but CUDA is not available here; use device=cpu or device=auto")
    return device


@dataclass
class Session:
    cfg: EvaluateConfig
    zoo: Zoo
    store: ResultStore
    device: torch.device
    out: Path  # results/<name>-<settings hash>/ (stir.evaluation.report_index)
    name: str = ""  # the report's name: the experiment, or pair_<ref>_vs_<target>
    settings: Dict[str, Any] = field(default_factory=dict)  # what the report's folder name hashes
    _models: Dict[str, nn.Module] = field(default_factory=dict)
    _resolved: Dict[str, ZooModel] = field(default_factory=dict)
    _images: Dict[Any, Tensor] = field(default_factory=dict)

    @classmethod
    def open(cls, cfg: EvaluateConfig, repo: Path) -> "Session":
        zoo_file = Path(cfg.zoo.file)
        zoo = Zoo(zoo_file if zoo_file.is_absolute() else repo / zoo_file, repo / "configs",
                  profile=cfg.zoo.profile, runs_dir=cfg.zoo.runs_dir,
                  overrides=[*cfg.zoo.overrides, *([f"data.source={cfg.zoo.data_source}"] if cfg.zoo.data_source else [])])
        root = Path(cfg.out_dir)
        if cfg.inversion.cache_dir is None:  # one inversion per (reference, seed) across every target
            cfg.inversion.cache_dir = str(root / "inversion-cache")
        name = cfg.experiment.name
        if cfg.experiment.kind == "pair":  # one folder per pair, named after it
            name = "pair_" + "_vs_".join(Path(m).name.replace(" ", "_") for m in (cfg.ref, cfg.target))
        # One folder per name and settings (results/<name>-<hash>/, results/<name> -> the latest).
        settings = report_settings(cfg)
        return cls(cfg=cfg, zoo=zoo, store=ResultStore(root / "store"), device=pick_device(cfg.device),
                   out=report_dir(root, name, settings), name=name, settings=settings)

    def model(self, name: str) -> ZooModel:
        """The finished run of a zoo name / path (trained first when train_missing=true)."""
        if name not in self._resolved:
            self._resolved[name] = self.zoo.ensure(name, train_missing=self.cfg.train_missing)
        return self._resolved[name]

    def network(self, name: str) -> nn.Module:
        if name not in self._models:
            self._models[name] = load_model(self.model(name)).to(self.device)
        return self._models[name]

    def data_config(self, name: str) -> DataConfig:
        """The data set a model was trained on (its recipe, or config.yaml beside a checkpoint)."""
        model = self.model(name)
        if model.config is not None:
            return model.config.data
        config = (model.run_dir if model.run_dir.is_dir() else model.run_dir.parent) / "config.yaml"
        if config.is_file():
            return DataConfig(**OmegaConf.to_container(OmegaConf.load(config))["data"])
        if self.cfg.zoo.data_source:  # a bare checkpoint: the evaluation's local data set
            log.info("%s has no config.yaml: taking images from zoo.data_source=%s", name, self.cfg.zoo.data_source)
            base = OmegaConf.structured(DataConfig(source=self.cfg.zoo.data_source, **self._checkpoint_data(model)))
            # zoo.overrides' data.* keys (e.g. data.holdout_size=10 for a small set) apply as to every recipe.
            extra = OmegaConf.from_dotlist([o[len("data."):] for o in self.cfg.zoo.overrides if o.startswith("data.")])
            return OmegaConf.to_object(OmegaConf.merge(base, extra))
        log.warning("%s has no config.yaml: taking images from the default data config "
                    "(zoo.data_source=PATH for a local data set)", name)
        return DataConfig(**self._checkpoint_data(model))

    @staticmethod
    def _checkpoint_data(model: ZooModel) -> Dict[str, Any]:
        """The data set name and class count a weights.pt records (empty for other checkpoints)."""
        from stir.training.runs import resolve_weights_file

        blob = torch.load(resolve_weights_file(str(model.run_dir)), map_location="cpu", weights_only=True)
        if isinstance(blob, dict) and "num_classes" in blob and "data" in blob:
            return {"name": blob["data"], "num_classes": blob["num_classes"]}
        return {}

    def images(self, name: str) -> Tensor:
        """X: ``n`` images of ``split`` of model ``name``'s data set, chosen by ``image_seed``; (n, 3, h, w) in [0, 1]."""
        data_cfg = self.data_config(name)
        key = (dataclasses.astuple(data_cfg), self.cfg.split, self.cfg.n, self.cfg.image_seed)
        if key not in self._images:
            data = StirDataModule(data_cfg)
            data.setup()
            images, _ = data.sample_images(self.cfg.split, self.cfg.n, self.cfg.image_seed)
            self._images[key] = to_float(images).to(self.device)
        return self._images[key]

    def model_references(self) -> Dict[str, Dict[str, Any]]:
        """Every model this session resolved: its recipe (train.py command), weights hash and W&B artifact."""
        from stir.training.runs import model_artifact_name, recipe_of

        out = {}
        for name, model in self._resolved.items():
            out[name] = {"command": model.command, "sha256": model.identity, "run_dir": str(model.run_dir),
                         "artifact": f"{model_artifact_name(recipe_of(model.config))}:latest" if model.config else None}
        return out

    def record(self, *names: str) -> Dict[str, Any]:
        """Provenance stored beside every result: resolved config, models, images."""
        return {
            "config": OmegaConf.to_container(OmegaConf.structured(self.cfg)),
            "models": {n: {"run_dir": str(self.model(n).run_dir), "sha256": self.model(n).identity,
                           "command": self.model(n).command} for n in names},
            "images": {"split": self.cfg.split, "n": self.cfg.n, "seed": self.cfg.image_seed},
        }
