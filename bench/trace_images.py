"""Where the images of one pair evaluation go: every function of ``stir`` that receives X.

    python bench/trace_images.py            # a tiny pair (2 conv nets, 8 images, 5 steps), counts per file

A profile hook (``sys.setprofile``) sees each call of a function defined under ``stir/``; a call
"receives X" when one of its arguments is the images tensor itself, or a list or tuple holding it
(the k draws of a fixed X), or an object that carries it (a ``Plan``, a ``Call``). Reported: the calls per file and in all, the files they touch. It
measures how many places one fact passes through, not time: issue 32's before/after of
``evaluate_pair``.
"""
from __future__ import annotations

import argparse
import collections
import json
import logging
import sys
from pathlib import Path

import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from stir.inversion import ExecutionConfig, InversionConfig  # noqa: E402
from stir.measure import CalibrationConfig, Estimator, evaluate_pair  # noqa: E402

log = logging.getLogger("trace_images")
STIR = str(REPO / "stir")


def net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                         nn.Linear(16, 3))


def holds(value, images) -> bool:
    """X itself, a list or tuple holding it, or an object carrying it (a ``Plan``, a ``Call``)."""
    if value is images or (isinstance(value, (list, tuple)) and any(v is images for v in value)):
        return True
    carried = getattr(value, "plan", value)
    return getattr(carried, "images", None) is images


def trace() -> collections.Counter:
    images = torch.rand(8, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    est = Estimator(k=2, inversion=InversionConfig(mode="fast", steps=5, lr=0.05),
                    calibration=CalibrationConfig(permutations=4, resamples=10))
    calls: collections.Counter = collections.Counter()

    def hook(frame, event, _arg):
        if event != "call" or not frame.f_code.co_filename.startswith(STIR):
            return
        code = frame.f_code
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        args = [frame.f_locals.get(name) for name in names if name != "self"]  # a Plan's own properties are not stays
        if any(holds(a, images) for a in args):
            calls[f"{Path(code.co_filename).relative_to(REPO)}:{code.co_name}"] += 1

    sys.setprofile(hook)
    try:
        evaluate_pair(net(0), net(1), images, "3", "3", est, run=ExecutionConfig(warn_below=0.0, progress=False))
    finally:
        sys.setprofile(None)
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    calls = trace()
    files = collections.Counter()
    for where, count in calls.items():
        files[where.split(":")[0]] += count
    if args.json:
        sys.stdout.write(json.dumps({"calls": sum(calls.values()), "files": dict(files), "functions": dict(calls)},
                                    indent=1) + "\n")
        return
    for where, count in sorted(calls.items()):
        log.info("%3d  %s", count, where)
    log.info("X received %d times by %d functions in %d files: %s", sum(calls.values()), len(calls), len(files),
             ", ".join(f"{f} {c}" for f, c in sorted(files.items())))


if __name__ == "__main__":
    main()
