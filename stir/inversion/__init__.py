"""The inversion engine: identically represented inputs (IRIs) for STIR, fast, batched, cached.

Public API:
    invert(m1, images, tap, cfg=None, *, m2=None, tap2=None, run=None) -> InversionResult     arbitrary IRIs
    invert_adversarial(m1, m2, images, tap1, tap2=None, cfg=None) -> InversionResult  controversial stimuli
    invert_draws(m1, [X_1..X_k], tap, cfg=None, *, m2=None, tap2=None) -> [InversionResult]
    invert_adversarial_draws(m1, m2, [X_1..X_k], tap1, tap2=None, cfg=None) -> [InversionResult]
                                      k seed draws (seeds cfg.seed + j) optimised together, cached per draw
    cached(m1, images, tap, cfg, run, *, m2, tap2, adversarial, draw) -> InversionResult | None
                                      a draw from the cache only (the x' a measurement made), never computed
    InversionConfig                   the estimator: what changes x' (mode faithful (default, published) | fast,
                                      steps, tolerance, seeds, FakeReLU, ...); key_settings() keys cache and store
    ExecutionConfig                   how it runs (batch_size (automatic), memory, channels_last, compile,
                                      cache_dir, progress): no reported number depends on it
    controversial_perturbation(m1, m2, images, tap1, tap2, cfg, inversion) -> ControversialResult
                                      the smallest perturbation of x that m1 ignores and m2 does not
    ControversialConfig               its settings (difficulty.* in evaluate.py)
    controversial_stimuli(m1, m2, images, tap1, tap2, cfg) -> Stimuli
                                      eq. 8 solved as appendix C did (Table 3's Delta); StimulusConfig its settings
    InversionResult                   x_prime, residual, m2_distance, l2_to_original, steps, ...
    make_seed(kind, images, generator), SEED_KINDS                    seed images
    relative_distance(model, tap, x_prime, images)                    ||m(x') - m(x)|| / ||m(x)||
    InversionPredictor, PredictionFiles, merge_predictions            multi-device via Lightning
"""
from stir.lazy import lazy_attributes
from stir.inversion.config import SEED_KINDS, ControversialConfig, ExecutionConfig, InversionConfig

__all__ = [
    "ControversialConfig",
    "ControversialResult",
    "ExecutionConfig",
    "InversionConfig",
    "StimulusConfig",
    "Stimuli",
    "InversionPredictor",
    "InversionResult",
    "PredictionFiles",
    "Problem",
    "SEED_KINDS",
    "cached",
    "concat_results",
    "controversial_perturbation",
    "controversial_stimuli",
    "invert",
    "invert_adversarial",
    "invert_adversarial_draws",
    "invert_draws",
    "make_seed",
    "merge_predictions",
    "relative_distance",
    "seed_generator",
    "slice_result",
    "solve",
]

# Imported on first use (PEP 562): stir.inversion.config is read without torch (the command-line check),
# the predictor's names need Lightning.
_LAZY = {
    "ControversialResult": "stir.inversion.controversial",
    "controversial_perturbation": "stir.inversion.controversial",
    "StimulusConfig": "stir.inversion.stimuli",
    "Stimuli": "stir.inversion.stimuli",
    "controversial_stimuli": "stir.inversion.stimuli",
    "InversionResult": "stir.inversion.result",
    "Problem": "stir.inversion.engine",
    "cached": "stir.inversion.engine",
    "concat_results": "stir.inversion.result",
    "invert": "stir.inversion.engine",
    "invert_adversarial": "stir.inversion.engine",
    "invert_adversarial_draws": "stir.inversion.engine",
    "invert_draws": "stir.inversion.engine",
    "slice_result": "stir.inversion.result",
    "solve": "stir.inversion.engine",
    "relative_distance": "stir.inversion.objectives",
    "make_seed": "stir.inversion.seeds",
    "seed_generator": "stir.inversion.seeds",
    "InversionPredictor": "stir.inversion.predictor",
    "PredictionFiles": "stir.inversion.predictor",
    "merge_predictions": "stir.inversion.predictor",
}


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())
