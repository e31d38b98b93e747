"""Claim 10 as the paper states it: a CIFAR-10 model against a CIFAR-100 model, layer by layer.

Nanda et al., ICML 2022, section 5.1 "Datasets" and Figures 3 and 7: "For the same architecture
(ResNet18) trained on different datasets (CIFAR10 and CIFAR100), we evaluate the shared invariances
between each of the corresponding layers"; section 5: "All evaluations of STIR in this section are
performed using the CIFAR10 dataset". So each pair of the claim is one CIFAR-10 model and one CIFAR-100
model of one training recipe, and X comes from CIFAR-10.

The paper preset says so in ``layer_settings`` (``configs/evaluate/experiment/paper.yaml``): under the
key ``CLAIM10_SETTING`` the pairs ``[vanilla, c100]`` and ``[at, c100_at]`` (the fast recipe on both
sides, as the c100 models are trained: the data set is the one difference). The layer-wise measurement
is the ``pairs`` kind's (``Context.layerwise``), which reads X from the data set of a pair's FIRST
model; hence the two readings, chosen by the order of the pair:

    [vanilla, c100]   X from CIFAR-10 (the default: section 5)
    [c100, vanilla]   X from CIFAR-100

Nothing in the measurement ties the two models to one data set: the taps are layer-wise feature maps
(the same architecture, so the same tap names at the same depths), never logits, and each model
normalises its input with its own data set's statistics. What does not carry over is the prediction
agreement stored beside each direction: argmax over 10 classes against argmax over 100 is no agreement;
claim 10 does not read it. Without a CIFAR-100 copy (``zoo.sources.cifar100=PATH``) the c100 models
cannot be trained here and the claim is not testable.
"""
from __future__ import annotations

from typing import Callable, Dict, Mapping, Optional, Sequence, Tuple

CLAIM10_SETTING = "cifar100 resnet18"  # the layer_settings key claim 10's slopes are read under ("cifar100")

DataName = Callable[[str], Optional[str]]  # zoo name -> the data set it trains on (``Recipes.data_name``)


def cross_dataset_pairs(layer_settings: Mapping[str, Mapping[str, Sequence[str]]],
                        data_name: DataName) -> Dict[str, Tuple[str, str]]:
    """{family: (m1, m2)} of ``CLAIM10_SETTING``'s pairs whose two models train on different data sets
    (claim 10's pairs); a setting of seed pairs on one data set gives none."""
    families = layer_settings.get(CLAIM10_SETTING, {})
    return {family: (pair[0], pair[1]) for family, pair in families.items()
            if len(pair) == 2 and data_name(pair[0]) != data_name(pair[1])}


def images_reading(pair: Tuple[str, str], data_name: DataName) -> str:
    """Which data set X of a layer-wise pair comes from, in words (m1's: ``Context.layerwise``)."""
    first, second = data_name(pair[0]), data_name(pair[1])
    if first == second:
        return f"X from {first} (both models trained on it)"
    return f"X from {first} (m1's data set; m2 trained on {second})"
