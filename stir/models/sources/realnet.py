"""``realnet:NAME``: a real pretrained CIFAR-10 network of the catalogue (``stir.models.realnets``).

``NAME`` is a file of ``shared/realnets`` without ``.pt`` (``realnet:resnet20-akamaster``,
``realnet:cnn_a_mix-abcrown``). The network is a registered architecture (``cifar_resnet20``,
``resnet2b``, ``cnn_a`` ...), built with the normalisation its training used and loaded strictly
from ``<weights root>/NAME.pt`` (the file's sha256 checked against the catalogue). It is returned
as it is, not wrapped: every tap of the architecture (``stem``, every block, ``penultimate``,
``logits``, inner taps), its ``original_layer_taps`` and its FakeReLU rule (``fake_relu_sites``).

Options: ``weights_root`` (the folder; default ``$STIR_REALNETS`` or ``<repo>/../shared/realnets``),
``weights`` (another file for the same network, e.g. the original release's ``{"state_dict": ...}``
checkpoint: loaded, not hash-checked), ``mean``/``std`` (other normalisation constants, recorded).
Options that would change what the network is (``tap``, ``kwargs``, ``num_classes``, ``normalize``)
are refused with the reason: read other layers by their tap names instead.
"""
from __future__ import annotations

import logging

import torch

from stir.models import realnets
from stir.models.fake_relu import describe
from stir.models.sources import SOURCES
from stir.models.sources.base import LoadedModel, SourceError, SourceOptions, content_identity

log = logging.getLogger(__name__)

# docs/models.md's sources table, read by docs/hooks/registries.py (torch-free): what it loads, its input
# normalisation, where the weights come from.
LOADS = "the real pretrained CIFAR-10 networks above"
NORMALISATION = "the catalogue's"
WEIGHTS = "`zoo.weights_root`, `$STIR_REALNETS` or `../shared/realnets`"

PREFIX = "realnet"


@SOURCES.register(PREFIX)
def load(name: str, options: SourceOptions) -> LoadedModel:
    spec = f"{PREFIX}:{name}"
    _refuse(spec, options)
    if (options.mean is None) != (options.std is None):
        raise SourceError(f"{spec}: give both mean and std for the input normalisation, or neither")
    try:
        entry = realnets.entry(name)
        net, info = realnets.load(name, root=options.weights_root, weights=options.weights,
                                  mean=options.mean, std=options.std)
    except realnets.RealNetError as err:
        raise SourceError(f"{spec}: {err}") from err
    mean, std = (tuple(map(float, options.mean)), tuple(map(float, options.std))) if options.mean is not None \
        else (entry.mean, entry.std)
    if options.mean is not None:
        log.warning("%s: normalisation %s / %s given, not the training script's %s / %s", spec, mean, std,
                    entry.mean, entry.std)
    identity = content_identity(net)  # weights and normalisation buffers
    with torch.no_grad():
        probe = net(torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(0)))
    if probe.shape != (2, realnets.NUM_CLASSES):  # a registered network always returns logits
        raise SourceError(f"{spec}: {entry.architecture} returned {tuple(probe.shape)}, not (2, 10) logits")
    taps = {"penultimate": net.tap("penultimate").module, "logits": net.tap("logits").module}
    record = {
        "source": PREFIX, "spec": spec, "name": entry.name, "arch": entry.arch, "width": entry.width,
        "weights": str(info.path), "weights_format": info.format, "weights_sha256": info.sha256,
        "weights_checked": options.weights is None, "checkpoint_metadata": dict(info.metadata),
        "identity": identity, "sha256": identity, "taps": taps, "penultimate_dim": net.tap("penultimate").dim(),
        "normalization": {"mean": list(mean), "std": list(std)},
        "normalization_from": "options" if options.mean is not None else "the catalogue (training script)",
        "training": entry.training, "accuracy_jpeg": entry.accuracy_jpeg,
        "accuracy_published": entry.accuracy_published, "robust_accuracy": dict(entry.robust_accuracy),
        "origin": entry.origin, "licence": entry.licence, "copyright": entry.copyright,
        "seed_twin": entry.seed_twin, "family": realnets.family(name),
        "fake_relu_published": describe(net, True), "fake_relu_architecture": describe(net, "architecture"),
    }
    log.info("%s: %s, normalisation %s / %s, weights %s", spec, entry.architecture, mean, std, info.path)
    return LoadedModel(module=net, taps=taps, identity=identity, record=record)


def _refuse(spec: str, options: SourceOptions) -> None:
    refused = []
    if options.tap is not None:
        refused.append(f"tap={options.tap!r} (the network names its taps: read another layer by its name, "
                       "e.g. layers.taps=[layer3.2])")
    if options.kwargs:
        refused.append(f"kwargs={dict(options.kwargs)!r} (the architecture is fixed by the file)")
    if options.num_classes not in (None, realnets.NUM_CLASSES):
        refused.append(f"num_classes={options.num_classes} (the networks are CIFAR-10 classifiers)")
    if not options.normalize:
        refused.append("normalize=false (the normalisation is part of the network)")
    if refused:
        raise SourceError(f"{spec}: unsupported option(s): " + "; ".join(refused))
