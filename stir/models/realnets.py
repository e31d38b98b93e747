"""The catalogue of real pretrained CIFAR-10 networks (``shared/realnets``): which file is which network.

Each entry says which registered architecture and width a file holds, the input normalisation it
was trained with (part of the built network, as a ``Normalize`` buffer), its accuracies (published,
and measured on the JPEG q75 copy of CIFAR-10 that this project uses: all 10,000 test images), its
robust accuracies where measured, its origin and licence, its seed twin (another run of the same
training script) and the sha256 of the file (``SHA256SUMS``). Figures are those of the folder's
README; ``tests/models/test_realnets.py`` checks the hashes and measures the accuracies again.

Names are the file names without ``.pt``: ``realnet:resnet20-akamaster`` (``stir.models.sources``)
loads ``<weights root>/resnet20-akamaster.pt``. The weights root is, first found:
``weights_root(root)``'s argument (``SourceOptions.weights_root``, ``zoo.weights_root``), the
environment variable ``STIR_REALNETS``, or ``shared/realnets`` beside the repository
(``<repo>/../shared/realnets``, where this project's machines keep the shared copy).

The files were not trained here and are not redistributed by this repository: He et al.'s ResNets
come from akamaster/pytorch_resnet_cifar10 (BSD-2-Clause, Copyright (c) 2018, Yerlan Idelbayev) and
its fork Zheng-Jiakun/pytorch_resnet_cifar10 (same licence); the robust networks from
Verified-Intelligence/alpha-beta-CROWN (BSD-3-Clause, Copyright (C) 2021-2025 The alpha,beta-CROWN
Team). The folder's LICENSES.md has the full texts.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence, Tuple

from stir.config.schema import ModelConfig
from stir.models.registry import Network, build as build_architecture
from stir.models.weights import WeightsError, WeightsFile, load_weights
from stir.provenance import file_sha256

log = logging.getLogger(__name__)

ENV_VAR = "STIR_REALNETS"
REPO = Path(__file__).resolve().parents[2]
DEFAULT_ROOT = REPO.parent / "shared" / "realnets"
NUM_CLASSES = 10

# Input normalisation each training script used (images in [0, 1]).
IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))  # akamaster's script (ImageNet's constants)
ABCROWN_RESNET = ((0.4914, 0.4822, 0.4465), (0.2471, 0.2435, 0.2616))
CNN_A = (tuple(v / 255 for v in (125.3, 123.0, 113.9)), tuple(v / 255 for v in (63.0, 62.1, 66.7)))  # 0-255 scale

AKAMASTER = ("BSD-2-Clause", "Copyright (c) 2018, Yerlan Idelbayev")
ABCROWN = ("BSD-3-Clause", "Copyright (C) 2021-2025 The alpha,beta-CROWN Team")


class RealNetError(ValueError):
    """A real network cannot be found or loaded; the message names the folder or file and the fix."""


@dataclass(frozen=True)
class RealNet:
    """One file of the catalogue (module docstring)."""

    name: str  # the file name without .pt
    arch: str  # registered architecture (stir.models.names())
    width: int  # ModelConfig.width of that architecture
    mean: Tuple[float, float, float]
    std: Tuple[float, float, float]
    training: str  # how it was trained, in words
    accuracy_jpeg: float  # test accuracy on the JPEG q75 copy, all 10,000 images (shared/realnets/README.md)
    accuracy_published: Optional[float]  # as its source publishes it (original CIFAR-10 test set)
    robust_accuracy: Mapping[str, float]  # attack -> accuracy on the first 500 test images of the copy
    origin: str  # repository and path of the original file
    licence: str
    copyright: str
    sha256: str  # of the file, as SHA256SUMS lists it
    seed_twin: Optional[str] = None  # another run of the same script: other initialisation and batch order
    family: str = ""  # networks of one architecture and training set-up (runs of one recipe)
    notes: str = ""

    @property
    def file(self) -> str:
        return f"{self.name}.pt"

    @property
    def model_config(self) -> ModelConfig:
        return ModelConfig(arch=self.arch, width=self.width)

    @property
    def architecture(self) -> str:
        """The architecture in words for messages: 'cifar_resnet20 (width 16)'."""
        return f"{self.arch} (width {self.width})"


def _he(depth: int, run: str, acc: float, published: float, sha: str, twin: Optional[str] = None,
        robust: Optional[Mapping[str, float]] = None) -> RealNet:
    origin = ("akamaster/pytorch_resnet_cifar10, pretrained_models/resnet{d}-*.th" if run == "akamaster"
              else "Zheng-Jiakun/pytorch_resnet_cifar10, save_resnet{d}/model.th").format(d=depth)
    return RealNet(
        name=f"resnet{depth}-{run}", arch=f"cifar_resnet{depth}", width=16, mean=IMAGENET[0], std=IMAGENET[1],
        training="vanilla (He et al. 2016 schedule)", accuracy_jpeg=acc, accuracy_published=published,
        robust_accuracy=dict(robust or {}), origin=origin, licence=AKAMASTER[0], copyright=AKAMASTER[1], sha256=sha,
        seed_twin=twin, family=f"he2016-resnet{depth}",
        notes="" if run == "akamaster" else "a fork's second run of the same training script (same licence)",
    )


def _abcrown(name: str, arch: str, width: int, norm, acc: float, robust: Mapping[str, float], sha: str,
             training: str, origin: str, family: str) -> RealNet:
    return RealNet(
        name=name, arch=arch, width=width, mean=norm[0], std=norm[1], training=training, accuracy_jpeg=acc,
        accuracy_published=None, robust_accuracy=robust, origin=origin, licence=ABCROWN[0], copyright=ABCROWN[1],
        sha256=sha, family=family,
    )


_LINF = "pgd_linf_2/255"
_L2_025, _L2_05 = "pgd_l2_0.25", "pgd_l2_0.5"
_VNN = "Verified-Intelligence/alpha-beta-CROWN, complete_verifier/models/ (VNN-COMP 2021 cifar10_resnet)"
_CNN_A = "Verified-Intelligence/alpha-beta-CROWN, complete_verifier/models/ (CNN-A of Dathathri et al. 2020)"

_ENTRIES = (
    _he(20, "akamaster", 0.810, 0.917, "5776cdf67cb4b0cd2a5c225547ddd60859b90ec3dd671a42b0fe53f787e6f66b",
        twin="resnet20-zheng", robust={_L2_05: 0.00}),
    _he(32, "akamaster", 0.826, 0.926, "ea9cecc6a012b7e20e85d92a512150b62997f209011b74c34dfde460a5758694"),
    _he(44, "akamaster", 0.827, 0.931, "70f8d16cb663058a6b25f03510cb918869fe6c434aafa5e55be78510541cdeb5"),
    _he(56, "akamaster", 0.832, 0.934, "401bc233698cfa228a796b417086481e28ee197d4f5479eb4f0b43dbbd0d5786",
        twin="resnet56-zheng"),
    _he(20, "zheng", 0.813, 0.921, "37e828427e9043329f81dc7b70e8976445c9111bd5574d4a4391cfcffe90e558",
        twin="resnet20-akamaster"),
    _he(56, "zheng", 0.839, 0.931, "d71533884641a7f11ba1839cc68b7d8642def1bff7cf7658e28307ba0b4117c2",
        twin="resnet56-akamaster"),
    _abcrown("resnet2b-abcrown", "resnet2b", 8, ABCROWN_RESNET, 0.687, {_LINF: 0.55, _L2_025: 0.45, _L2_05: 0.23},
             "32bc5047cbc87e13c5bc0253c63308f6ed5c1743a548ed89c1ba221f8bb42111", "adversarial, l_inf 2/255",
             _VNN, "abcrown-resnet2b"),
    _abcrown("resnet4b-abcrown", "resnet4b", 16, ABCROWN_RESNET, 0.765, {_LINF: 0.60, _L2_025: 0.62, _L2_05: 0.44},
             "4d0bfc36d64d0787e033ed2b478954910033a405b70365144a8add21a1eed0de", "adversarial, l_inf 2/255",
             _VNN, "abcrown-resnet4b"),
    _abcrown("cnn_a_adv-abcrown", "cnn_a", 16, CNN_A, 0.655, {_LINF: 0.50, _L2_025: 0.50, _L2_05: 0.32},
             "98a31d2d622562a4d44541e638e9786e7467cb86906989e87eb6957a45918aac", "adversarial", _CNN_A, "cnn_a"),
    _abcrown("cnn_a_adv_alt-abcrown", "cnn_a", 16, CNN_A, 0.683, {_LINF: 0.53, _L2_025: 0.53, _L2_05: 0.36},
             "7fbdb0deae3651b37c531cbabf93c43f838684b9ef038c2f2fae26118a1b066b", "adversarial, another schedule",
             _CNN_A, "cnn_a"),
    _abcrown("cnn_a_mix-abcrown", "cnn_a", 16, CNN_A, 0.732, {_LINF: 0.54, _L2_025: 0.55, _L2_05: 0.35},
             "742d4735025b3bdf5798f3c64ec0fb0981329cf4d239ca2fc5549217668f2a2b", "mixed (adversarial and clean)",
             _CNN_A, "cnn_a"),
)
CATALOGUE: Mapping[str, RealNet] = {e.name: e for e in _ENTRIES}


def names() -> list[str]:
    """Every catalogued network, in the order of the shared README."""
    return list(CATALOGUE)


def entry(name: str) -> RealNet:
    """The catalogue entry of ``name`` (a file name with or without ``.pt``); error listing the names."""
    key = name[: -len(".pt")] if name.endswith(".pt") else name
    if key not in CATALOGUE:
        raise RealNetError(f"unknown real network {name!r}; the catalogue (stir.models.realnets) has {names()}")
    return CATALOGUE[key]


def family(name: str) -> list[str]:
    """The networks of ``name``'s family (same architecture and training set-up), itself included."""
    fam = entry(name).family
    return [e.name for e in _ENTRIES if e.family == fam]


def weights_root(root: Optional[str] = None) -> Path:
    """The folder holding the files: ``root``, else $STIR_REALNETS, else ``<repo>/../shared/realnets``.

    ``RealNetError`` (one line: the folder, where the path came from, the fix) when it is not a folder.
    """
    if root:
        path, origin = Path(root).expanduser(), "weights_root"
    elif os.environ.get(ENV_VAR):
        path, origin = Path(os.environ[ENV_VAR]).expanduser(), f"${ENV_VAR}"
    else:
        path, origin = DEFAULT_ROOT, "the default, beside the repository"
    if not path.is_dir():
        raise RealNetError(f"no real-network weights folder at {path} ({origin}); set zoo.weights_root=PATH "
                           f"(SourceOptions.weights_root) or {ENV_VAR}=PATH to a copy of shared/realnets")
    return path


def weights_file(name: str, root: Optional[str] = None) -> Path:
    """``<weights root>/<name>.pt``; ``RealNetError`` naming the folder when the file is not there."""
    net = entry(name)
    folder = weights_root(root)
    file = folder / net.file
    if not file.is_file():
        raise RealNetError(f"{net.file} is not in the real-network weights folder {folder}; copy it there from "
                           "shared/realnets, or point zoo.weights_root / $STIR_REALNETS at a folder that has it")
    return file


def build(name: str, mean: Optional[Sequence[float]] = None, std: Optional[Sequence[float]] = None) -> Network:
    """The architecture of ``name`` with its normalisation (or ``mean``/``std``), untrained."""
    net = entry(name)
    return build_architecture(net.model_config, NUM_CLASSES, tuple(mean or net.mean), tuple(std or net.std))


def load(name: str, root: Optional[str] = None, weights: Optional[str] = None,
         mean: Optional[Sequence[float]] = None, std: Optional[Sequence[float]] = None) -> Tuple[Network, WeightsFile]:
    """(network in eval mode with the file's weights, what was read) for the catalogued ``name``.

    ``weights``: another file to read instead (e.g. the original release's ``.th`` checkpoint); the
    catalogue's file is checked against its sha256, another file is not (its hash is in the result).
    """
    net_entry = entry(name)
    file = Path(weights) if weights else weights_file(name, root)
    net = build(name, mean, std)
    try:
        info = load_weights(net, file, arch=net_entry.architecture)
    except WeightsError as err:
        raise RealNetError(str(err)) from err  # it names the file and the architecture
    if not weights and info.sha256 != net_entry.sha256:
        raise RealNetError(f"{file} has sha256 {info.sha256}, not the catalogue's {net_entry.sha256} "
                           f"(shared/realnets/SHA256SUMS): it is another file; restore it from the shared copy")
    log.info("real network %s: %s from %s (%s, sha256 %s...)", name, net_entry.architecture, file, info.format,
             info.sha256[:12])
    return net.eval(), info


def file_hash(name: str, root: Optional[str] = None) -> str:
    """sha256 of the catalogued file on disk (compare with ``entry(name).sha256``)."""
    return file_sha256(weights_file(name, root))
