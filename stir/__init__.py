"""stir: shared invariance between neural networks (STIR, Nanda et al., ICML 2022).

Subpackages: ``stir.similarity`` (representation similarity measures), ``stir.models``
(architectures with named taps), ``stir.descent`` (the one loop behind attacks and inversions),
``stir.inversion`` (IRIs), ``stir.evaluation`` (STIR, STIR_adv, agreement, difficulty, layer-wise),
``stir.training`` and ``stir.data`` (the training pipeline), ``stir.reporting`` (tables, plots, W&B).

``stir.evaluate_pair`` and friends are re-exported lazily, so ``import stir`` stays cheap.
"""
__version__ = "0.1.0"

_LAZY = {
    "evaluate_pair": "stir.evaluation",
    "evaluate_direction": "stir.evaluation",
    "evaluate_layers": "stir.evaluation",
    "evaluate_similarity": "stir.evaluation",
    "invert": "stir.inversion",
    "invert_adversarial": "stir.inversion",
    "InversionConfig": "stir.inversion",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'stir' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
