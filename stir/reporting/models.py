"""What a report says about its models: where each came from, its recipe, its accuracy, its dtype.

A STIR value between two barely trained networks is not a statement about trained ones (3-epoch
ResNets at 0.37 test accuracy gave STIR 0.79 where the shipped 15-epoch pair gives 0.51), so every
report names its models (``models`` table in README.md and ``record.json``) and flags a model whose
clean test accuracy is under ``BARELY_TRAINED`` of its data set.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from stir.reporting.report import Table

# Clean test accuracy under which a model of that data set is flagged in every report. CIFAR-10:
# the shipped laptop models reach 0.85 (vanilla) and 0.68 (AT); the 3-epoch profile=cpu ones 0.37-0.39.
BARELY_TRAINED: Dict[str, float] = {"cifar10": 0.6}
REPO = Path(__file__).resolve().parents[2]  # shipped entries are named relative to the repository
TRAINING_SET = {"cifar10": 50_000, "cifar100": 50_000}  # images in the training split, before the holdout
FLAG = "barely trained: read with care"


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None


def _dtype(model: Any) -> str:
    """The dtype the network runs in, and the stored one where a shipped file keeps another."""
    params = list(model.module.parameters())
    running = str(params[0].dtype).replace("torch.", "") if params else "-"
    stored = _stored_dtype(model.record)
    return running if stored in (None, running) else f"{running} (stored {stored})"


def _stored_dtype(record: Dict[str, Any]) -> Optional[str]:
    """The dtype a shipped weights file is stored in (its entry's ``dtype``; float16 and int8 files
    are cast up on loading), None for other models or an unreadable entry."""
    entry = record.get("shipped_entry")
    if not entry:
        return None
    path = Path(entry) if Path(entry).is_absolute() else REPO / entry
    try:
        return str(json.loads(path.read_text(encoding="utf-8")).get("dtype") or "") or None
    except (OSError, ValueError, AttributeError):
        return None


def _source(model: Any) -> str:
    record = model.record
    source = record.get("source", "?")
    if source == "shipped":
        return f"shipped ({record.get('shipped_file', '?')})"
    if source == "zoo":
        return f"trained here ({record.get('run_dir', '?')})"
    if source == "checkpoint":
        return f"checkpoint ({record.get('path', '?')})"
    return str(source)


def model_row(model: Any) -> Dict[str, Any]:
    """One model: label, source, recipe (loss, epochs, width, training images), clean and robust test
    accuracy (NaN when unknown), dtype, and ``flag`` (``FLAG`` or "") (``model``: a ``stir.zoo.Model``)."""
    train = model.train
    clean, robust = _number(model.metrics.get("test/acc")), _number(model.metrics.get("test/robust_acc"))
    record = model.record
    if clean is None and _number(record.get("accuracy_jpeg")) is not None:  # a real network: its catalogue entry
        clean = _number(record["accuracy_jpeg"])
    row: Dict[str, Any] = {"model": model.label, "source": _source(model)}
    if train is not None:
        data = train.data
        whole = TRAINING_SET.get(data.name)
        images = (data.train_size if data.train_size is not None
                  else whole - data.holdout_size if whole is not None else f"all but {data.holdout_size} held out")
        row.update(loss=train.loss.name, epochs=train.trainer.max_epochs, arch=train.model.arch,
                   width=train.model.width, training_images=images, data=data.name)
        attack = train.eval_attack
        row["robust_attack"] = f"PGD-{attack.norm} eps {attack.eps:g}, {attack.steps} steps"
    else:
        attacks = record.get("robust_accuracy") or {}
        if robust is None and len(attacks) == 1:  # a real network's one stated attack, named below
            (attack, value), = attacks.items()
            robust = _number(value)
        row.update(loss=str(record.get("training") or "-"), epochs="-", arch=str(record.get("arch") or "-"),
                   width=record.get("width", "-"), training_images="-", data=model.data.name,
                   robust_attack=next(iter(attacks)) if robust is not None and len(attacks) == 1 else "-")
    floor = BARELY_TRAINED.get(row["data"])
    row.update(clean_accuracy=math.nan if clean is None else clean, robust_accuracy=math.nan if robust is None else robust,
               dtype=_dtype(model), flag=FLAG if clean is not None and floor is not None and clean < floor else "")
    return row


def models_table(models: Iterable[Any]) -> Table:
    """The ``models`` table of a report, in label order; its display shows accuracies to 3 digits,
    "not measured" where this project has no test accuracy of the model (other sources)."""
    rows: List[Dict[str, Any]] = [model_row(m) for m in sorted(models, key=lambda m: m.label)]
    display = []
    for row in rows:
        shown = {k: v for k, v in row.items() if k not in ("arch", "data", "robust_attack")}
        shown["model"] = f"{row['model']} ({row['arch']})" if row["arch"] != "-" else row["model"]
        for key in ("clean_accuracy", "robust_accuracy"):
            shown[key] = "not measured" if math.isnan(row[key]) else f"{row[key]:.3f}"
        if row["robust_attack"] != "-" and not math.isnan(row["robust_accuracy"]):
            shown["robust_accuracy"] += f" ({row['robust_attack']})"
        display.append(shown)
    return Table(rows, display=display)


def flagged(models: Iterable[Any]) -> List[str]:
    """Report notes for the models under their data set's ``BARELY_TRAINED`` accuracy."""
    notes = []
    for row in (model_row(m) for m in sorted(models, key=lambda m: m.label)):
        if row["flag"]:
            notes.append(f"model {row['model']}: test accuracy {row['clean_accuracy']:.3f} is under "
                         f"{BARELY_TRAINED[row['data']]} on {row['data']}: {FLAG} (STIR between barely trained networks "
                         "is not a statement about trained ones; the shipped zoo's models are trained: README.md)")
    return notes


def barely_trained_line(data: str, test_acc: float) -> Optional[str]:
    """A training's last line when its model is barely trained (clean test accuracy under the level at
    which every report flags it, ``BARELY_TRAINED``); None for a trained one or an unflagged data set."""
    level = BARELY_TRAINED.get(data)
    if level is None or not test_acc < level:
        return None
    return (f"this model is barely trained (test accuracy {test_acc:.2f} < {level} on {data}): fine for trying a "
            f"change end to end, not for results; profile=laptop trains models of real accuracy (docs/training.md)")
