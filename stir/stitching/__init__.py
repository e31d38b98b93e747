"""Model stitching at any tap: a functional similarity beside STIR.

A[:tap_a] -> S -> B[tap_b:], S a small layer trained on the task while A and B stay frozen
(Bansal, Nakkiran & Barak 2021; Godfrey et al., NeurIPS 2022, for the G_ReLU-restricted layer).

Public API:
    stitch(a, b, tap_a, tap_b, kind, train, test, *, seed, settings, store, ...) -> StitchResult
    stitch_seeds(..., seeds=[0, 1]) -> [StitchResult]          one per stitching seed
    StitchSettings(epochs, batch_size, lr, train_images, init)  how S is fitted (part of the store key)
    KINDS = ("identity", "linear", "g_relu", "orthogonal"), build_layer(kind, shape_a, shape_b)
    Stitched(a, tap_a, layer, b, tap_b)                          the stitched network (logits)
    tap_output(model, x, tap), run_from(model, x, tap, z)        the two halves
    ChannelStats, channel_stats, match_channels, initialise, train_layer, accuracy
"""
from stir.stitching.fit import (
    INITS, ChannelStats, Stitched, accuracy, channel_stats, initialise, match_channels, train_layer,
)
from stir.stitching.layers import KINDS, GReLUStitch, IdentityStitch, LinearStitch, OrthogonalStitch, build_layer
from stir.stitching.stitch import STORE_KIND, StitchResult, StitchSettings, data_identity, stitch, stitch_seeds
from stir.stitching.taps import run_from, stitchable_taps, tap_module, tap_output

__all__ = [
    "INITS", "KINDS", "STORE_KIND",
    "ChannelStats", "GReLUStitch", "IdentityStitch", "LinearStitch", "OrthogonalStitch", "StitchResult",
    "StitchSettings", "Stitched",
    "accuracy", "build_layer", "channel_stats", "data_identity", "initialise", "match_channels", "run_from",
    "stitch", "stitch_seeds", "stitchable_taps", "tap_module", "tap_output", "train_layer",
]
