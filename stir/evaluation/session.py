"""What one ``evaluate.py`` run works with: the zoo, loaded models, the images X, the store.

A model name is a zoo name or run folder / checkpoint path (``zoo:NAME`` too), a zoo entry naming
another source, or a source string itself (``robustbench:NAME``, ``torchvision:ARCH``,
``timm:ARCH``, ``python:module:factory``; ``stir.models.sources``). Models of other sources have
no training data of their own: their images X come from ``cfg.data``.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import torch
from omegaconf import OmegaConf
from torch import Tensor, nn

from stir.config.evaluate_schema import EvaluateConfig
from stir.config.schema import DataConfig
from stir.config.validate import ConfigError
from stir.data import StirDataModule, to_float
from stir.evaluation.report_index import report_dir, report_settings
from stir.evaluation.store import ResultStore
from stir.evaluation.zoo import Zoo, ZooModel, load_model
from stir.models import sources
from stir.models.sources import LoadedModel, RobustBenchOptions, SourceError, SourceOptions

ZOO_PREFIX = sources.ZOO + ":"

log = logging.getLogger(__name__)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={name!r} but CUDA is not available here; use device=cpu or device=auto")
    return device


@dataclass
class SourcedModel:
    """A resolved model of another source (``stir.models.sources``): what the experiments read."""

    name: str
    loaded: LoadedModel
    config = None  # no training recipe

    @property
    def identity(self) -> str:
        """Content hash of weights, normalisation and named taps (``stir.models.sources.content_identity``)."""
        return self.loaded.identity

    def metrics(self) -> Dict[str, float]:
        return {}  # no test metrics of this project's training


Resolved = Union[ZooModel, SourcedModel]


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
    _resolved: Dict[str, Resolved] = field(default_factory=dict)
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
            name = "pair_" + "_vs_".join(Path(m).name.replace(" ", "_").replace(":", "-") for m in (cfg.ref, cfg.target))
        # One folder per name and settings (results/<name>-<hash>/, results/<name> -> the latest).
        settings = report_settings(cfg)
        return cls(cfg=cfg, zoo=zoo, store=ResultStore(root / "store"), device=pick_device(cfg.device),
                   out=report_dir(root, name, settings), name=name, settings=settings)

    def model(self, name: str) -> Resolved:
        """The finished run of a zoo name / path (trained first when train_missing=true), or a model
        of another source, loaded."""
        if name not in self._resolved:
            source = self._source(name)
            if source is not None:
                spec, options = source
                log.info("model %s: %s", name, spec)
                self._resolved[name] = SourcedModel(name, sources.load(spec, self._options(name, options)))
            else:
                self._refuse_source_keys(name)
                zoo_name = name[len(ZOO_PREFIX):] if name.startswith(ZOO_PREFIX) else name
                self._resolved[name] = self.zoo.ensure(zoo_name, train_missing=self.cfg.train_missing)
        return self._resolved[name]

    def network(self, name: str) -> nn.Module:
        if name not in self._models:
            model = self.model(name)
            net = model.loaded.module if isinstance(model, SourcedModel) else load_model(model)
            self._models[name] = net.to(self.device)
        return self._models[name]

    def _source(self, name: str) -> Optional[Tuple[str, Mapping[str, Any]]]:
        """(source string, zoo-entry options) for a model of another source; None for the zoo."""
        if name in self.zoo.sourced:
            entry = self.zoo.sourced[name]
            return entry.source, entry.options
        if sources.is_sourced(name):
            return name, {}
        prefix, _ = sources.split_spec(name)
        if prefix and prefix != sources.ZOO and name not in self.zoo.recipes and not Path(name).exists():
            raise SourceError(f"unknown model source {prefix!r} in {name!r}; sources: {sources.names()} "
                              f"(zoo:NAME or a bare zoo name for this project's models)")
        return None

    def _per_model(self, name: str) -> Dict[str, Any]:
        """tap1/weights1 (for ref) and tap2/weights2 (for target) that are set."""
        cfg, out = self.cfg, {}
        for key, first, second in (("tap", cfg.tap1, cfg.tap2), ("weights", cfg.weights1, cfg.weights2)):
            if name == cfg.ref == cfg.target and first != second:
                raise ConfigError(f"ref and target are both {name!r} but {key}1={first!r} differs from {key}2={second!r}: "
                                  "name two zoo entries instead")
            value = first if name == cfg.ref else second if name == cfg.target else None
            if value is not None:
                out[key] = value
        return out

    def _refuse_source_keys(self, name: str) -> None:
        given = self._per_model(name)
        if given:
            which = "1" if name == self.cfg.ref else "2"
            raise ConfigError(
                f"{', '.join(k + which for k in given)} given for {name!r}, a zoo model: these keys are for models of "
                f"other sources ({sources.names()[1:]}); read zoo models at other taps with layers.taps=[...], and give "
                "other weights as ref=PATH"
            )

    def _options(self, name: str, entry: Mapping[str, Any]) -> SourceOptions:
        """SourceOptions of a model: its zoo entry, then tap1/weights1 or tap2/weights2, then global keys."""
        cfg, options = self.cfg, {**entry, **self._per_model(name)}
        robustbench = {**dataclasses.asdict(cfg.robustbench), **(options.pop("robustbench", None) or {})}
        for key in ("mean", "std"):
            if options.get(key) is not None:
                options[key] = tuple(float(v) for v in options[key])
        try:
            return SourceOptions(**options, download=cfg.download_weights, robustbench=RobustBenchOptions(**robustbench))
        except TypeError as err:
            raise ConfigError(f"model {name!r}: {err}") from err

    def foreign_data(self) -> DataConfig:
        """The data set of models of other sources: ``data``, its source defaulting to ``zoo.data_source``."""
        return dataclasses.replace(self.cfg.data, source=self.cfg.data.source or self.cfg.zoo.data_source)

    def data_config(self, name: str) -> DataConfig:
        """The data set a model was trained on (its recipe, or config.yaml beside a checkpoint); for
        models of other sources, ``data``."""
        model = self.model(name)
        if isinstance(model, SourcedModel):
            return self.foreign_data()
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

    def images(self, name: str, offset: int = 0) -> Tensor:
        """X: ``n`` images of ``split`` of model ``name``'s data set, chosen by ``image_seed + offset``;
        (n, 3, h, w) in [0, 1]."""
        data_cfg = self.data_config(name)
        seed = self.cfg.image_seed + offset
        key = (dataclasses.astuple(data_cfg), self.cfg.split, self.cfg.n, seed)
        if key not in self._images:
            data = StirDataModule(data_cfg)
            data.setup()
            images, _ = data.sample_images(self.cfg.split, self.cfg.n, seed)
            self._images[key] = to_float(images).to(self.device)
        return self._images[key]

    def stir_images(self, name: str) -> Union[Tensor, List[Tensor]]:
        """The X of every STIR draw: ``images(name)`` for all k (default), or with
        ``resample_images=true`` one set per draw j, chosen by ``image_seed + j`` (eq. 6 literally)."""
        if not self.cfg.resample_images:
            return self.images(name)
        return [self.images(name, offset=j) for j in range(self.cfg.k)]

    def describe(self, name: str) -> Dict[str, Any]:
        """A model's provenance: its run folder and train command, or its source's record."""
        model = self.model(name)
        if isinstance(model, SourcedModel):
            return model.loaded.record
        return {"run_dir": str(model.run_dir), "sha256": model.identity, "command": model.command}

    def images_origin(self, name: str) -> Dict[str, Any]:
        """Where the images X of model ``name`` come from (data set, local copy or torchvision, root)."""
        data = self.data_config(name)
        return {"data": data.name, "source": data.source or f"torchvision {data.name} under {data.root}",
                "chosen_by": "data= (a model of another source)" if isinstance(self.model(name), SourcedModel)
                else f"the training data of {name}"}

    def model_references(self) -> Dict[str, Dict[str, Any]]:
        """Every model this session resolved: its recipe (train.py command), weights hash and W&B artifact."""
        from stir.training.runs import model_artifact_name, recipe_of

        out = {}
        for name, model in self._resolved.items():
            if isinstance(model, SourcedModel):  # not trained here: its source's record
                out[name] = dict(model.loaded.record)
                continue
            out[name] = {"command": model.command, "sha256": model.identity, "run_dir": str(model.run_dir),
                         "artifact": f"{model_artifact_name(recipe_of(model.config))}:latest" if model.config else None}
        return out

    def record(self, *names: str) -> Dict[str, Any]:
        """Provenance stored beside every result: resolved config, models, images (X: the first model's)."""
        return {
            "config": OmegaConf.to_container(OmegaConf.structured(self.cfg)),
            "models": {n: self.describe(n) for n in names},
            "images": {"split": self.cfg.split, "n": self.cfg.n, "seed": self.cfg.image_seed,
                       "resampled_per_draw": self.cfg.resample_images,
                       **(self.images_origin(names[0]) if names else {})},
        }
