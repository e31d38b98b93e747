"""stir: shared invariance between neural networks (STIR, Nanda et al., ICML 2022).

Subpackages, bottom up: ``stir.similarity`` (representation similarity measures), ``stir.descent``
(the optimisation loop of inversions), ``stir.models`` (architectures with named taps, sources,
identity) and ``stir.data``; ``stir.attacks``, ``stir.inversion`` (IRIs), ``stir.training``;
``stir.measure`` (STIR as a library: STIR, STIR_adv, agreement, difficulty, layer-wise, calibration),
``stir.judging`` (judging the measures), ``stir.stitching``, ``stir.invariance``; ``stir.store``
(the results store); ``stir.zoo`` (any name -> one model); ``stir.reporting`` (tables, plots, W&B);
``stir.experiments`` (the evaluate.py application). docs/architecture.md has the whole picture.

``stir.evaluate_pair`` and friends are re-exported lazily, so ``import stir`` stays cheap.
"""
from stir.lazy import lazy_attributes

__version__ = "0.1.0"

_LAZY = {
    "evaluate_pair": "stir.measure",
    "evaluate_direction": "stir.measure",
    "evaluate_layers": "stir.measure",
    "evaluate_similarity": "stir.measure",
    "Estimator": "stir.measure",
    "ExecutionConfig": "stir.inversion",
    "invert": "stir.inversion",
    "invert_adversarial": "stir.inversion",
    "InversionConfig": "stir.inversion",
}


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())
