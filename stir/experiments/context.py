"""What the experiment kinds share in one evaluate.py run, each part doing one job.

``Context`` holds: the ``Zoo`` (names -> ``Model``s), the results store, the ``Estimator`` (what a
STIR number means), the ``ExecutionConfig`` (how work runs), the layers to read, the images X
(``images``: one sampler for every kind, cached) and the provenance of a result (``record``).
It is built once from the checked configs (``open_context``) and changes no config.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from omegaconf import OmegaConf
from torch import Tensor

from stir.config.validate import ConfigError
from stir.data import StirDataModule, to_float
from stir.experiments.config import EvaluateConfig, ExperimentConfig, LayersConfig, ZooConfig
from stir.experiments.schema import ImagesSpec
from stir.inversion import ExecutionConfig
from stir.measure import (
    DEFAULT_TAP, DirectionResult, Estimator, LayerwiseResult, PairResult, SimilarityResult, evaluate_direction,
    evaluate_layers, evaluate_pair, evaluate_similarity,
)
from stir.measure.call import behaviour_id, run_batch
from stir.measure.plan import Images
from stir.models.taps import LOGITS
from stir.store import ResultStore, UnsafeStoreFolder
from stir.zoo import Model, Recipes, Zoo
from stir.zoo.shipped import ShippedZoo

log = logging.getLogger(__name__)


def pick_device(name: str) -> torch.device:
    """The device of ``device=`` (auto: CUDA when there is one); ConfigError (one line) for a name
    torch does not know or a device this machine does not have, before anything is loaded."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError, TypeError):
        raise ConfigError(f"device={name!r} is not a device; use device=cpu, cuda, cuda:N or auto") from None
    if device.type == "cpu" and device.index not in (None, 0):
        raise ConfigError(f"device={name!r}: the CPU takes no index; use device=cpu")
    available = {"cpu": True, "cuda": torch.cuda.is_available(),
                 "mps": bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())}
    if not available.get(device.type, False):
        raise ConfigError(f"device={name!r} but {device.type.upper()} is not available here; use device=cpu or "
                          "device=auto")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ConfigError(f"device={name!r} but this machine has {torch.cuda.device_count()} CUDA device(s); use "
                          "device=cuda:0 or device=auto")
    return device


@dataclass
class Context:
    zoo: Zoo
    store: ResultStore
    estimator: Estimator
    run: ExecutionConfig
    layers: LayersConfig
    images_spec: ImagesSpec
    device: torch.device
    config: Dict[str, Any]  # the resolved config (common settings and the kind's), for records
    roles: Dict[str, Tuple[str, Optional[str], Optional[str]]]  # ref / target: (name, tap, weights)
    iri_grid_images: int = 8
    _images: Dict[Any, Tuple[Tensor, Tensor]] = field(default_factory=dict)

    def model(self, name: str) -> Model:
        """The model ``name`` names; the tap/weights options of ref (tap_ref/weights_ref) or target
        (tap_target/weights_target) apply to the name given as ref or target."""
        for role in ("ref", "target"):
            given, tap, weights = self.roles[role]
            if name == given:
                return self._admit(self.zoo.model(name, tap, weights))
        return self._admit(self.zoo.model(name))

    def role(self, role: str) -> Model:
        """The model of ``ref`` or ``target`` with its own options (a pair of one factory with two
        weights files is two models)."""
        return self._admit(self.zoo.model(*self.roles[role]))

    def _admit(self, model: Model) -> Model:
        """A model that is not finite (allow_nonfinite=true) only where every number goes through
        ``stir.measure``, which makes them all NaN; the other kinds would compute on NaN tensors."""
        from stir.experiments.registry import get, kinds  # the kinds' modules import this one

        kind = self.config.get("experiment", {}).get("kind")
        if "nonfinite" in model.record and not get(kind).nonfinite:
            able = ", ".join(k for k in kinds() if get(k).nonfinite)
            raise ConfigError(f"model {model.label} is not finite ({model.record['nonfinite']}); experiment kind "
                              f"{kind!r} cannot report it (allow_nonfinite=true is for kinds {able})")
        return model

    def identity(self, model: Model, tap: str = LOGITS) -> str:
        """What the store keys ``model`` by in the kinds that key by it themselves (layer matching,
        stitching, grounding, G-EED): its identity while it computes what that identity computed when
        first probed, else its behaviour variant's (``stir.measure.call.behaviour_id``, one line says so)."""
        images = self.images(model)
        batch = run_batch(self.run, images.shape[0] * self.estimator.k, images.shape[0])
        return behaviour_id(model.module, model.label, model.identity, images, tap, self.store.fingerprints(), batch)

    def labelled_images(self, model: Model, split: Optional[str] = None, n: Optional[int] = None,
                        offset: int = 0) -> Tuple[Tensor, Tensor]:
        """n images of a split of ``model``'s data set, chosen by ``seed + offset``, with their labels:
        ((n, 3, h, w) in [0, 1] on the device, (n,) int64 on the CPU)."""
        spec = self.images_spec
        split, n = split or spec.split, n or spec.n
        key = (dataclasses.astuple(model.data), split, n, spec.seed + offset)
        if key not in self._images:
            data = StirDataModule(model.data)
            data.setup()
            images, labels = data.sample_images(split, n, spec.seed + offset)
            self._images[key] = (to_float(images).to(self.device), labels)
        return self._images[key]

    def images(self, model: Model) -> Tensor:
        """X: the ``n`` images of ``split`` of ``model``'s data set, (n, 3, h, w) in [0, 1]."""
        return self.labelled_images(model)[0]

    def stir_images(self, model: Model) -> Union[Tensor, List[Tensor]]:
        """The X of every STIR draw: ``images(model)`` for all k (default), or with
        ``resample_images=true`` one set per draw j, chosen by ``image_seed + j`` (eq. 6 literally)."""
        if not self.images_spec.resample:
            return self.images(model)
        return [self.labelled_images(model, offset=j)[0] for j in range(self.estimator.k)]

    # -------------------------------------------------------------- measurements through the store
    def pair(self, m1: Model, m2: Model, tap1: str = DEFAULT_TAP, tap2: Optional[str] = None,
             images: Optional[Images] = None) -> PairResult:
        """Both directions and the similarity of (m1, m2) at one tap pair (X: m1's images by default)."""
        return evaluate_pair(m1.module, m2.module, self.stir_images(m1) if images is None else images, tap1, tap2,
                             self.estimator, run=self.run, names=(m1.label, m2.label), ids=(m1.identity, m2.identity),
                             store=self.store, record=self.record(m1, m2))

    def direction(self, ref: Model, target: Model, tap_ref: str = DEFAULT_TAP, tap_target: Optional[str] = None,
                  images: Optional[Images] = None, iri: Optional[str] = None) -> DirectionResult:
        """STIR(target|ref) and the rest of one direction (``iri`` overrides the estimator's kinds)."""
        estimator = self.estimator if iri is None else dataclasses.replace(self.estimator, iri=iri)
        return evaluate_direction(ref.module, target.module, self.stir_images(ref) if images is None else images,
                                  tap_ref, tap_target, estimator, run=self.run, names=(ref.label, target.label),
                                  ids=(ref.identity, target.identity), store=self.store, record=self.record(ref, target))

    def similarity(self, m1: Model, m2: Model, images: Tensor, tap1: str = DEFAULT_TAP,
                   tap2: Optional[str] = None, measure: Optional[str] = None) -> SimilarityResult:
        """S_r(m1(X), m2(X)) at one tap pair, through the store (``measure``, a registered similarity
        measure, overrides the estimator's, as ``iri`` does in ``direction``)."""
        return evaluate_similarity(m1.module, m2.module, images, tap1, tap2, measure or self.estimator.measure, run=self.run,
                                   names=(m1.label, m2.label), ids=(m1.identity, m2.identity), store=self.store,
                                   record=self.record(m1, m2))

    def layerwise(self, m1: Model, m2: Model) -> LayerwiseResult:
        """The pair at every corresponding tap of ``layers`` (all | original | a list), with slopes over depth."""
        layers = self.layers
        return evaluate_layers(m1.module, m2.module, self.stir_images(m1), self.estimator, taps=layers.spec(),
                               reduce=layers.reduce, count=layers.count, run=self.run, names=(m1.label, m2.label),
                               ids=(m1.identity, m2.identity), store=self.store, record=self.record(m1, m2))

    def record(self, *models: Model) -> Dict[str, Any]:
        """Provenance stored beside every result: resolved config, models, images (X: the first model's)."""
        spec = self.images_spec
        images: Dict[str, Any] = {"split": spec.split, "n": spec.n, "seed": spec.seed, "resampled_per_draw": spec.resample}
        if models:
            data = models[0].data
            own = models[0].record.get("source") in ("zoo", "shipped", "checkpoint")
            images.update(data=data.name, source=data.source or f"torchvision {data.name} under {data.root}",
                          chosen_by=f"the training data of {models[0].label}" if own else "data= (a model of another source)")
        return {"config": self.config, "models": {m.label: m.record for m in models}, "images": images}


# What a run on profile=tiny's zoo says first: its numbers are a smoke test of the code path.
TINY_NOTE = ("profile=tiny: the zoo models are tiny (width 4, 120 training images, 3 SGD steps) and the inversion "
             "short: this run tries the code path end to end; its numbers are not results")


def open_context(cfg: EvaluateConfig, experiment: ExperimentConfig, repo: Path) -> Context:
    """The context of one evaluate.py run (nothing is loaded yet: models and images come on demand)."""
    if cfg.zoo.profile == "tiny":
        log.warning("%s", TINY_NOTE)
    zoo_file = Path(cfg.zoo.file)
    source = zoo_source(cfg)
    # data.source is the copy of data.name's data set; zoo.sources names those of the others (CIFAR-100)
    sources = {**({cfg.data.name: source} if source else {}), **cfg.zoo.sources.named()}
    recipes = Recipes(zoo_file if zoo_file.is_absolute() else repo / zoo_file, repo / "configs",
                      profile=cfg.zoo.profile, runs_dir=cfg.zoo.runs_dir, overrides=cfg.zoo.overrides, sources=sources,
                      main_data=cfg.data.name)
    data_overrides = OmegaConf.to_container(OmegaConf.from_dotlist(
        [o[len("data."):] for o in cfg.zoo.overrides if o.startswith("data.")]))
    device = pick_device(cfg.device)
    zoo = Zoo(recipes, data=cfg.data, local_source=source, data_overrides=data_overrides,
              robustbench=dataclasses.asdict(cfg.robustbench), download=cfg.download_weights,
              weights_root=cfg.zoo.weights_root, train_missing=cfg.train_missing, device=device,
              allow_nonfinite=cfg.allow_nonfinite, allow_unfinished=cfg.allow_unfinished,
              shipped=_shipped_zoo(cfg.zoo.shipped_dir, repo), allow_code=cfg.zoo.allow_code)
    check_out_dir(Path(cfg.out_dir))
    check_not_linked(Path(cfg.out_dir), cfg.execution.cache_dir is None)
    return Context(
        zoo=zoo, store=ResultStore(Path(cfg.out_dir) / "store", shipped=_shipped_store(cfg.zoo, repo)), estimator=Estimator.of(cfg), run=cfg.run(),
        layers=cfg.layers, images_spec=cfg.images(), device=device, config=record_config(cfg, experiment),
        iri_grid_images=cfg.iri_grid_images, roles=cfg.roles(),
    )


def record_config(cfg: EvaluateConfig, experiment: ExperimentConfig) -> Dict[str, Any]:
    """The config as records, report settings and index.md name it: a plain copy of the resolved
    settings (``evaluate_config`` resolved them: 1000 inversion steps for the default run, not null) and the
    kind's, as JSON values (tuples as lists)."""
    return _plain({**{k: v for k, v in dataclasses.asdict(cfg).items() if k != "experiment"},
                   "experiment": dataclasses.asdict(experiment)})


def _plain(value: Any) -> Any:
    """``value`` with every tuple a list, recursively (as JSON and OmegaConf containers hold them)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def check_out_dir(out_dir: Path) -> None:
    """Refuse (one line) an ``out_dir`` this process cannot write (a file, a path under a file, a folder
    of /proc, a read-only or foreign one), before any model or image loads: created when missing, a
    file made and removed there. Otherwise the first result's write failed after the work."""
    why = "is a file, not a folder" if out_dir.exists() and not out_dir.is_dir() else None
    if why is None:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            handle, probe = tempfile.mkstemp(prefix=".write-check-", dir=out_dir)
            os.close(handle)
            os.unlink(probe)
        except OSError as err:
            why = f"cannot be written ({err.strerror or type(err).__name__}{f': {err.filename}' if err.filename else ''})"
    if why is not None:
        raise ConfigError(f"out_dir={out_dir} {why}: results, reports and inversions are written there; name a "
                          "folder you can write, e.g. out_dir=results")


def check_not_linked(out_dir: Path, own_cache: bool) -> None:
    """Refuse (one line) an ``out_dir/store``, a folder of it, or the default ``out_dir/inversion-cache``
    that is a symbolic link: results and inversions are never written through one (as reports are
    not: ``stir.reporting.index.check_report_dir``); a cache named by ``execution.cache_dir`` is the user's."""
    store = out_dir / "store"
    linked = [store, *(p for p in sorted(store.iterdir()) if p.is_symlink())] if store.is_dir() else [store]
    if own_cache:
        linked.append(out_dir / "inversion-cache")
    for path in linked:
        if path.is_symlink():
            raise UnsafeStoreFolder(f"{path} is a symbolic link (to {os.readlink(path)}); nothing is written through "
                                    "one: remove the link and run again (or name a cache with execution.cache_dir)")


def zoo_source(cfg: EvaluateConfig) -> Optional[str]:
    """Where the zoo's models were trained on: ``data.source``, the one key for where CIFAR lives (the
    images X and the zoo alike); ``zoo.data_source``, its older spelling, still wins where given, with a
    one-line deprecation."""
    if cfg.zoo.data_source is None:
        return cfg.data.source
    same = cfg.data.source in (None, cfg.zoo.data_source)
    log.warning("zoo.data_source is deprecated: data.source=PATH says where CIFAR lives for the images and the zoo "
                "alike%s", "" if same else f" (here the zoo reads {cfg.zoo.data_source}, other models' images "
                f"{cfg.data.source})")
    return cfg.zoo.data_source


def _shipped_store(zoo: ZooConfig, repo: Path) -> Optional[Path]:
    """The shipped results (``<zoo.shipped_dir>/store``) the results store may copy from, or None."""
    if not zoo.shipped_results or zoo.shipped_dir is None:
        return None
    path = Path(zoo.shipped_dir)
    return (path if path.is_absolute() else repo / path) / "store"


def _shipped_zoo(folder: Optional[str], repo: Path) -> Optional[ShippedZoo]:
    """The shipped models of ``zoo.shipped_dir`` (relative to the repository root), or None."""
    if folder is None:
        return None
    path = Path(folder)
    return ShippedZoo(path if path.is_absolute() else repo / path)
