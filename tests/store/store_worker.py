"""Measurements into a results store from a second process (run by tests/store/test_store.py).

``python tests/store/store_worker.py direction STORE_ROOT`` measures one direction and prints
``hits misses`` of its store. ``python tests/store/store_worker.py race STORE_ROOT RENDEZVOUS N``
announces itself in RENDEZVOUS, then asks the store for one entry whose computation first waits
until all N racers have announced themselves (so no racer can finish before every one has started)
and appends a line to RENDEZVOUS/computed; it prints the value it got.
"""
import logging
import os
import sys
import time
from pathlib import Path

import torch
from torch import nn

from stir.inversion import InversionConfig
from stir.measure import CalibrationConfig, Estimator, evaluate_direction
from stir.store import ResultStore

FAST = Estimator(k=2, iri="arbitrary", inversion=InversionConfig(mode="fast", steps=20, lr=0.05, seed=0),
                 calibration=CalibrationConfig(permutations=2, resamples=20))


def models_and_images():
    nets = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        nets.append(nn.Sequential(nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(48, 4)).eval())
    images = torch.rand(8, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    return nets[0], nets[1], images


def measure(store: ResultStore):
    m1, m2, images = models_and_images()
    return evaluate_direction(m1, m2, images, "2", estimator=FAST, names=("a", "b"), store=store)


class Value:
    def __init__(self, value: float):
        self.value = value

    def to_dict(self):
        return {"value": self.value, "pid": os.getpid()}


def race(store: ResultStore, rendezvous: Path, racers: int) -> float:
    (rendezvous / f"started-{os.getpid()}").touch()

    def compute() -> Value:
        while len(list(rendezvous.glob("started-*"))) < racers:  # every racer has started before any finishes
            time.sleep(0.01)
        with open(rendezvous / "computed", "a") as f:
            f.write(f"{os.getpid()}\n")
        return Value(float(os.getpid()))

    return store.cached("race", {"what": "one entry"}, compute, lambda d: Value(d["value"])).value


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    store = ResultStore(sys.argv[2])
    if sys.argv[1] == "race":
        print(race(store, Path(sys.argv[3]), int(sys.argv[4])))
    else:
        measure(store)
        print(store.hits, store.misses)
