"""Any way of naming a model -> one ``Model``: the only place an evaluation turns names into networks.

A name is, in this order: a zoo entry that names a model of another source (``{source: ...}`` in the
zoo file); a source string (``robustbench:NAME``, ``torchvision:ARCH``, ``timm:ARCH``,
``python:module:factory``, ``stir.models.sources``); a zoo name (``zoo:NAME`` too), resolved to the
run folder its recipe trains (trained first with ``train_missing``); an existing run folder or
checkpoint file. A zoo name whose recipe has no finished run folder resolves to a shipped model of
the same name, profile and recipe identity when there is one (``stir.zoo.shipped``: the repository's
``zoo/``); a finished local run of the recipe wins, and with neither the name is trained
(``train_missing``) or refused. ``tap`` and ``weights`` (evaluate.py's tap_ref/weights_ref, tap_target/weights_target) are options of
models of other sources; a zoo model is read at other taps with ``layers.taps`` and other weights
are named by their path.

Every model is checked when it is loaded: its weights and buffers finite, its outputs on a probe
batch finite (``stir.models.finite``); one that is not is refused (``NonFiniteModelError`` naming the
model and its first bad tensor) unless ``allow_nonfinite``, and then its record says why and every
number measured on it is NaN (``stir.measure.undefined``). A run folder of this project that has not
finished (``stir.training.runs.RunFolder.verify``) is refused with the command that finishes it
(``UnfinishedRunError``) unless ``allow_unfinished``; its record then names the checkpoint used.

Labels are unique within one ``Zoo``: a second model that would get a label already given to
another is told apart (more of its path, or a ``-2`` suffix), so tables, legends and file names
never mix two models. Two checkpoints of one factory are two models.
"""
from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

import torch

from stir.config.model_names import unknown_model_message, unknown_source_message
from stir.config.schema import ImagesConfig
from stir.config.validate import ConfigError
from stir.models import build, channel_stats, sources
from stir.models.finite import PROBE_SHAPE, nonfinite_reason, probe_images
from stir.models.identity import content_identity
from stir.models.sources import RobustBenchOptions, SourceError, SourceOptions
from stir.models.weights import load_state
from stir.training.runs import FINISHED, UNFINISHED, RunFolder, resolve_weights_file
from stir.zoo import checkpoints
from stir.zoo.model import Model
from stir.zoo.recipes import MissingModelError, Recipes, UnknownModelError
from stir.zoo.shipped import ShippedZoo, relative

log = logging.getLogger(__name__)

ZOO_PREFIX = sources.ZOO + ":"
Request = Tuple[str, Optional[str], Optional[str]]  # (name, tap, weights)


class NonFiniteModelError(ValueError):
    """A model has a NaN or an infinity in a weight, a buffer or its outputs."""


class UnfinishedRunError(ValueError):
    """A run folder (or its checkpoint) named for evaluation holds a training that has not finished, or a corrupt one."""


class Zoo:
    """Resolve model names to ``Model``s on one device; each request is resolved (and loaded) once.

    Args:
        recipes: the zoo file's recipes (``stir.zoo.recipes.Recipes``).
        data: the data set of models of other sources (their images X), ``data=`` of evaluate.py (an
            ``ImagesConfig``: what selects images; their ``Model.data`` is its ``DataConfig``).
        local_source: ``data.source`` (or the deprecated ``zoo.data_source``), the local data set of bare checkpoints and, by default,
            of models of other sources.
        data_overrides: the data.* keys of ``zoo.overrides`` (applied to bare checkpoints too).
        robustbench: RobustBench's coordinates.  download: let libraries download missing weights.
        weights_root: the folder of the real networks (``realnet:`` sources; None: their default).
        train_missing: train zoo models that have no finished run.  device: where models live.
        allow_nonfinite: measure models that are not finite (every number of theirs NaN) instead of refusing them.
        allow_unfinished: evaluate an unfinished run from its last checkpoint instead of refusing it.
        allow_code: load zoo file entries that name code (``python:`` sources or taps); refused otherwise.
        shipped: the shipped models (``zoo.shipped_dir``) that serve zoo names without a finished run
            folder; None: none.
    """

    def __init__(self, recipes: Recipes, *, data: ImagesConfig, local_source: Optional[str] = None,
                 data_overrides: Optional[Mapping[str, Any]] = None, robustbench: Optional[Mapping[str, Any]] = None,
                 download: bool = False, weights_root: Optional[str] = None, train_missing: bool = False,
                 device: torch.device = torch.device("cpu"), allow_nonfinite: bool = False,
                 allow_unfinished: bool = False, shipped: Optional[ShippedZoo] = None, allow_code: bool = False):
        self.recipes = recipes
        self.shipped = shipped
        self.data = dataclasses.replace(data.for_loading(), source=data.source or local_source)
        self.local_source = local_source
        self.data_overrides = dict(data_overrides or {})
        self.robustbench = dict(robustbench or {})
        self.download, self.train_missing, self.device = download, train_missing, device
        self.weights_root = weights_root
        self.allow_nonfinite, self.allow_unfinished = allow_nonfinite, allow_unfinished
        self.allow_code = allow_code
        self._models: Dict[Request, Model] = {}
        self._labels: Dict[str, Request] = {}

    def model(self, name: str, tap: Optional[str] = None, weights: Optional[str] = None) -> Model:
        """The model ``name`` names (module docstring), loaded on the device."""
        request = (name, tap, weights)
        if request not in self._models:
            model = self._resolve(name, tap, weights)
            model.module = model.module.to(self.device)
            model.label = self._unique(model.label, request, name)
            self._check_finite(model, name)
            self._models[request] = model
        return self._models[request]

    def _check_finite(self, model: Model, name: str) -> None:
        """Refuse a model whose tensors or probe outputs are not finite, or (allow_nonfinite) record why."""
        # the logits and the penultimate tap: finite logits over a NaN representation are no measurement either
        reason = nonfinite_reason(model.module, probe_images(self.device, (2, *PROBE_SHAPE[1:])), ("penultimate",))
        if reason is None:
            return
        if not self.allow_nonfinite:
            raise NonFiniteModelError(
                f"model {model.label} ({name}) is not finite: {reason}; retrain or replace it, or pass "
                "allow_nonfinite=true to report every number of it as NaN")
        log.warning("model %s is not finite (%s): every number measured on it is NaN (allow_nonfinite=true)",
                    model.label, reason)
        model.record["nonfinite"] = reason
        model.metrics = {k: float("nan") for k in model.metrics}  # its run's accuracy is not this module's

    def _check_code(self, name: str, source: str, options: Mapping[str, Any]) -> None:
        """A zoo file is data: an entry naming code (a ``python:`` source or tap) is refused, before any
        import, unless ``zoo.allow_code=true`` (the user's own file, opted in)."""
        named = [str(v) for v in (source, options.get("tap")) if str(v).startswith("python:")]
        if named and not self.allow_code:
            raise ConfigError(f"zoo entry {name!r} of {self.recipes.zoo_file} names code ({named[0]}): a zoo file runs "
                              "no code unless zoo.allow_code=true (give it for a zoo file you wrote)")

    def resolved(self) -> Dict[str, Model]:
        """Every model resolved so far, by label."""
        return {m.label: m for m in self._models.values()}

    def _resolve(self, name: str, tap: Optional[str], weights: Optional[str]) -> Model:
        if name in self.recipes.sourced:
            entry = self.recipes.sourced[name]
            self._check_code(name, entry.source, entry.options)
            return self._sourced(entry.source, {**entry.options, **_given(tap, weights)}, label=name)
        prefix, _ = sources.split_spec(name)
        if sources.is_sourced(name):
            return self._sourced(name, _given(tap, weights), label=None)
        zoo_name = name[len(ZOO_PREFIX):] if name.startswith(ZOO_PREFIX) else name
        if prefix and prefix != sources.ZOO and zoo_name not in self.recipes.recipes and not Path(name).exists():
            raise SourceError(unknown_source_message(prefix, name))
        if tap is not None or weights is not None:
            given = ", ".join(k for k, v in (("tap", tap), ("weights", weights)) if v is not None)
            raise ConfigError(
                f"{given} given for {name!r}, a model of this project: these options are for models of other "
                f"sources ({sources.names()[1:]}); read zoo models at other taps with layers.taps=[...], and give "
                "other weights as ref=PATH")
        if zoo_name in self.recipes.recipes:
            return self._zoo(zoo_name)
        if Path(name).exists():
            return self._checkpoint(Path(name))
        raise UnknownModelError(unknown_model_message(name, zoo_name, self.recipes.recipes, self.recipes.zoo_file))

    def _zoo(self, name: str) -> Model:
        from stir.training.runs import model_artifact_name, recipe_of

        shipped, why_not = self._shipped(name)
        if shipped is not None:
            return shipped
        try:
            run = self.recipes.ensure(name, train_missing=self.train_missing, allow_unfinished=self.allow_unfinished)
        except MissingModelError as err:
            if why_not:
                raise MissingModelError(f"{err}\n(no shipped model fits: {why_not})") from None
            raise
        unfinished = self._unfinished(run.run_dir, f"zoo model {name!r}", run.command)
        module = checkpoints.network(run.run_dir, run.config)
        identity = content_identity(module)
        record = {"source": "zoo", "command": run.command, "run_dir": str(run.run_dir), "sha256": identity,
                  "artifact": f"{model_artifact_name(recipe_of(run.config))}:latest", **unfinished}
        return Model(label=name, module=module, identity=identity, record=record, data=run.config.data,
                     train=run.config, metrics=_metrics(run.run_dir))

    def _shipped(self, name: str) -> Tuple[Optional[Model], str]:
        """(the shipped model of zoo name ``name``, "") when its recipe has no finished run folder and an
        entry of the same name, profile and recipe identity is shipped; else (None, why no entry fits:
        empty when none is shipped under that name, or a local run wins)."""
        from stir.training.runs import model_artifact_name, recipe_of

        if self.shipped is None or self.recipes.recipes[name].init_from is not None:
            return None, ""  # warm-started recipes name their parent's run folder: not shipped
        run = self.recipes.resolve(name)
        if RunFolder(run.run_dir).finished:
            return None, ""  # a finished local run of the same recipe wins
        recipe = recipe_of(run.config)
        entry = self.shipped.find(name, self.recipes.profile, recipe)
        if entry is None:
            return None, self.shipped.why_none(name, self.recipes.profile, recipe)
        cfg = run.config
        net = build(cfg.model, cfg.data.num_classes, *channel_stats(cfg.data.name))
        load_state(net, entry.state_dict(), source=str(entry.weights), arch=f"{cfg.model.arch} (width {cfg.model.width})")
        module = net.eval()
        identity = content_identity(module)
        log.info("zoo model %s: the shipped %s (sha256 %s...; no finished run in %s)", name, relative(entry.weights),
                 entry.sha256[:12], run.run_dir)
        record = {"source": "shipped", "shipped_file": relative(entry.weights), "shipped_sha256": entry.sha256,
                  "shipped_entry": relative(entry.entry), "recipe_sha256": entry.recipe_sha256,
                  "command": run.command, "sha256": identity,
                  "artifact": f"{model_artifact_name(recipe)}:latest"}
        return Model(label=name, module=module, identity=identity, record=record, data=cfg.data, train=cfg,
                     metrics=dict(entry.metrics)), ""

    def _checkpoint(self, path: Path) -> Model:
        unfinished = self._unfinished(path, str(path), None)
        module = checkpoints.network(path)
        identity = content_identity(module)
        data = checkpoints.data_of(path, self.local_source, self.data_overrides)
        record = {"source": "checkpoint", "path": str(path.resolve()), "sha256": identity, **unfinished}
        return Model(label=checkpoints.label_of(path), module=module, identity=identity, record=record, data=data,
                     metrics=_metrics(checkpoints.run_folder_of(path)))

    def _unfinished(self, path: Path, what: str, command: Optional[str]) -> Dict[str, str]:
        """{} for a finished run folder (or a file outside one); else refuse it (UnfinishedRunError with
        the command that finishes it) or, with allow_unfinished, {"unfinished": what is evaluated}."""
        folder = RunFolder(checkpoints.run_folder_of(Path(path)))
        if not (folder.config.is_file() or folder.recipe.is_file()):
            return {}  # not a run folder of this project: a bare weights file is what it is
        if Path(path).is_file() and Path(path).name not in checkpoints.WEIGHT_FILES:
            return {}  # a checkpoint file chosen by name (epoch=3.ckpt): the user's pick
        state, why = folder.verify()
        if state == FINISHED:
            return {}
        command = command or folder.finish_command()
        if state != UNFINISHED or not self.allow_unfinished:
            done = "is corrupt" if state != UNFINISHED else f"has not finished ({folder.progress()})"
            fix = "set the bad files aside and finish it" if state != UNFINISHED else "finish it"
            extra = "" if state != UNFINISHED else ", or pass allow_unfinished=true to evaluate its last checkpoint"
            prefix = "" if Path(what) == folder.path else f"{what}: "
            raise UnfinishedRunError(f"{prefix}run folder {folder.path} {done}: {why}; {fix} with `{command}`{extra}")
        used = resolve_weights_file(str(folder.path if Path(path).is_dir() else path))
        note = (f"evaluated from {used} ({folder.progress()}) of an unfinished run (allow_unfinished=true); "
                f"`{command}` finishes it")
        log.warning("%s: %s", what, note)
        return {"unfinished": note}

    def _sourced(self, spec: str, options: Dict[str, Any], label: Optional[str]) -> Model:
        log.info("model %s: %s", label or spec, spec)
        loaded = sources.load(spec, self._options(spec, options))
        return Model(label=label or _source_label(spec, options.get("weights")), module=loaded.module,
                     identity=loaded.identity, record={"source": sources.split_spec(spec)[0], **loaded.record},
                     data=self.data)

    def _options(self, spec: str, given: Mapping[str, Any]) -> SourceOptions:
        """SourceOptions of a model: its zoo entry and tap/weights, then the evaluation's global keys."""
        options = dict(given)
        robustbench = {**self.robustbench, **(options.pop("robustbench", None) or {})}
        if self.weights_root is not None and sources.split_spec(spec)[0] == "realnet":
            options.setdefault("weights_root", self.weights_root)
        for key in ("mean", "std"):
            if options.get(key) is not None:
                options[key] = tuple(float(v) for v in options[key])
        try:
            return SourceOptions(**options, download=self.download, robustbench=RobustBenchOptions(**robustbench))
        except TypeError as err:
            raise ConfigError(f"model {spec!r}: {err}") from err

    def _unique(self, label: str, request: Request, name: str) -> str:
        """``label``, or a longer one when another model already has it (more of its path, or -2, -3 ...)."""
        candidate, parts, suffix = label, 2, 1
        path = Path(name)
        while candidate in self._labels and self._labels[candidate] != request:
            if path.exists() and parts < len(checkpoints.run_folder_of(path).parts):
                parts += 1
                candidate = checkpoints.label_of(path, parts)
            else:
                suffix += 1
                candidate = f"{label}-{suffix}"
        self._labels[candidate] = request
        return candidate


def _given(tap: Optional[str], weights: Optional[str]) -> Dict[str, Any]:
    return {k: v for k, v in (("tap", tap), ("weights", weights)) if v is not None}


def _source_label(spec: str, weights: Optional[str]) -> str:
    """The model name of a source string (``python:pkg.nets:make_net`` -> ``make_net``), with the
    weights file's stem when one is given (``make_net-run1``)."""
    _, rest = sources.split_spec(spec)
    name = rest.rsplit(":", 1)[-1].rsplit(".", 1)[-1] if spec.startswith("python:") else rest
    if weights and Path(str(weights)).suffix:  # a file, not a library's pretrained tag
        return f"{name}-{Path(str(weights)).stem}"
    return f"{name}-{weights}" if weights else name


def _metrics(run_dir: Path) -> Dict[str, float]:
    """Clean / robust test accuracy from a run's metrics.json (empty when there is none or it is unreadable)."""
    f = Path(run_dir) / "metrics.json"
    if not f.is_file():
        return {}
    try:
        metrics = json.loads(f.read_text())
        return {k: float(v) for k, v in metrics.items() if k.startswith("test/")}
    except (ValueError, TypeError, AttributeError) as err:
        log.warning("%s is unreadable (%s: %s): no test accuracy for this model", f, type(err).__name__, err)
        return {}
