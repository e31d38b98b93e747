"""``robustbench:MODEL_NAME``: RobustBench's robust model zoo (optional extra ``.[robustbench]``).

The architecture and the loading are RobustBench's own (``robustbench.utils.load_model``, with the
model definitions of ``robustbench.model_zoo``); its models take images in [0, 1] and normalise
inside, so no normalisation is added. Weights are read from RobustBench's layout,
``<model_dir>/<dataset>/<threat_model>/<MODEL_NAME>.pt``; RobustBench downloads a missing file,
which is allowed only with ``options.download`` (``download_weights=true``): otherwise a missing
file is an error naming the path. Names the model zoo serves through timm's hub are refused
without downloads too.

robustbench 1.1.1 (the PyPI release) imports ``autoattack``, a module its dependency
``pyautoattack`` installs under the name ``pyautoattack``; when only the latter exists it is
registered under the former before the import (``_autoattack_alias``). It also imports
``pkg_resources`` (setuptools < 81), which the extra pins.
"""
from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path

from stir.models.sources import SOURCES
from stir.models.sources.base import LoadedModel, SourceError, SourceOptions, wrap

log = logging.getLogger(__name__)

# docs/models.md's sources table, read by docs/hooks/registries.py (torch-free): what it loads, its input
# normalisation, where the weights come from.
LOADS = ("RobustBench's own architecture and loader (`robustbench.utils.load_model`), for "
         "`robustbench.dataset` (cifar10) and `robustbench.threat_model` (L2); extra `.[robustbench]`")
NORMALISATION = "inside RobustBench's models"
WEIGHTS = ("`<robustbench.model_dir>/<dataset>/<threat_model>/<NAME>.pt` (RobustBench's layout); a missing file "
           "is an error naming the path, unless `download_weights=true` lets RobustBench download it")

EXTRA = 'pip install -e ".[robustbench]"'
# The names RobustBench's model zoo holds for a benchmark (its leaderboard: robustbench.utils.list_available_models).
LIST_COMMAND = ("python -c \"from robustbench.model_zoo import model_dicts as m; "
                "from robustbench.model_zoo.enums import BenchmarkDataset as D, ThreatModel as T; "
                "print(sorted(m[D('{dataset}')][T('{threat}')]))\" (or robustbench.utils.list_available_models)")


def _autoattack_alias() -> None:
    """Make ``import autoattack`` find pyautoattack when that is how it was installed (see module doc)."""
    if importlib.util.find_spec("autoattack") is not None or importlib.util.find_spec("pyautoattack") is None:
        return
    import pyautoattack
    import pyautoattack.state

    log.debug("robustbench: using pyautoattack as autoattack")
    sys.modules.setdefault("autoattack", pyautoattack)
    sys.modules.setdefault("autoattack.state", pyautoattack.state)


def installed() -> bool:
    """Whether the robustbench distribution is installed. A ``robustbench`` folder alone is not enough:
    torchattacks' wheel ships a top-level ``robustbench/`` of its own, which ``import robustbench`` finds."""
    from importlib import metadata

    try:
        metadata.distribution("robustbench")
    except metadata.PackageNotFoundError:
        return False
    return True


def _import():
    if not installed():
        found = importlib.util.find_spec("robustbench")
        copy = (f" (the robustbench folder at {Path(found.origin).parent} is torchattacks' copy, not the package)"
                if found is not None and found.origin else "")
        raise SourceError(f"robustbench models need the robustbench extra, which is not installed{copy}: {EXTRA}")
    _autoattack_alias()
    try:
        from robustbench.model_zoo import model_dicts
        from robustbench.model_zoo.enums import BenchmarkDataset, ThreatModel
        from robustbench.utils import load_model
    except ImportError as err:
        raise SourceError(f"robustbench is installed but cannot be imported ({err}); reinstall the extra: {EXTRA}") from err
    return model_dicts, BenchmarkDataset, ThreatModel, load_model


@SOURCES.register("robustbench")
def load(name: str, options: SourceOptions) -> LoadedModel:
    spec = f"robustbench:{name}"
    model_dicts, BenchmarkDataset, ThreatModel, load_model = _import()
    rb = options.robustbench
    try:
        dataset, threat = BenchmarkDataset(rb.dataset), ThreatModel(rb.threat_model)
    except ValueError as err:
        raise SourceError(f"{spec}: {err}; robustbench.dataset is one of {[d.value for d in BenchmarkDataset]}, "
                          f"robustbench.threat_model one of {[t.value for t in ThreatModel]}") from None
    models = model_dicts[dataset].get(threat, {})
    if name not in models:
        raise SourceError(f"unknown RobustBench model {name!r} for {dataset.value}/{threat.value}; list the names with "
                          f"{LIST_COMMAND.format(dataset=dataset.value, threat=threat.value)}; e.g. {sorted(models)[:6]}")
    entry = models[name]
    folder = Path(rb.model_dir) / dataset.value / threat.value
    files = ([folder / f"{name}.pt_m{i}.pt" for i in range(len(entry["gdrive_id"]))]
             if isinstance(entry.get("gdrive_id"), list) else [folder / f"{name}.pt"])
    import timm

    hub_name = f"{name.lower().replace('-', '_')}_{dataset.value.lower()}_{threat.value.lower()}"
    if timm.is_model(hub_name) and not options.download:
        raise SourceError(f"{spec}: RobustBench serves this model through timm's hub ({hub_name}), which needs a "
                          "download; pass download_weights=true")
    missing = [f for f in files if not f.is_file()]
    if missing and not options.download:
        raise SourceError(
            f"{spec}: no weights at {missing[0]} (RobustBench's layout <robustbench.model_dir>/<dataset>/<threat_model>/"
            f"<name>.pt under robustbench.model_dir={rb.model_dir}); downloads are off: pass download_weights=true to let "
            "RobustBench download them, or put the file there"
        )
    log.info("%s: loading %s with robustbench.utils.load_model", spec, ", ".join(map(str, files)))
    net = load_model(name, model_dir=rb.model_dir, dataset=dataset, threat_model=threat)
    record = {"source": "robustbench", "name": name, "dataset": dataset.value, "threat_model": threat.value,
              "weights": [str(f) for f in files], "robustbench": _version()}
    return wrap(net, options, None, None, spec, record)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("robustbench")
    except PackageNotFoundError:
        return "unknown"
