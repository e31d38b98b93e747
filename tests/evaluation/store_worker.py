"""One direction measured into a result store: run by test_eval_store as a second process.

``python tests/evaluation/store_worker.py STORE_ROOT`` prints ``hits misses`` of its store.
"""
import logging
import sys

import torch
from torch import nn

from stir.evaluation import ResultStore, evaluate_direction
from stir.inversion import InversionConfig

FAST = InversionConfig(steps=20, lr=0.05, seed=0, warn_below=0.0)


def models_and_images():
    nets = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        nets.append(nn.Sequential(nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(48, 4)).eval())
    images = torch.rand(8, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    return nets[0], nets[1], images


def measure(store: ResultStore):
    m1, m2, images = models_and_images()
    return evaluate_direction(m1, m2, images, "2", measure="linear_cka", k=2, iri="arbitrary", inversion=FAST,
                              names=("a", "b"), store=store)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    store = ResultStore(sys.argv[1])
    measure(store)
    print(store.hits, store.misses)
