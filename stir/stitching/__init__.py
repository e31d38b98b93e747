"""Model stitching at any tap: a functional similarity beside STIR.

A[:tap_a] -> S -> B[tap_b:], S a small layer trained on the task while A and B stay frozen
(Bansal, Nakkiran & Barak 2021; Godfrey et al., NeurIPS 2022, for the G_ReLU-restricted layer).

Public API:
    stitch(a, b, tap_a, tap_b, kind, train, test, *, seed, settings, ...) -> StitchResult
    stitch_seeds(..., seeds=[0, 1]) -> [StitchResult]          one per stitching seed (seeds_of(kind, seeds))
    stitch_parts(ids, taps, kind, seed, settings, data)        what identifies a result in a results store
    StitchSettings(epochs, batch_size, lr, train_images, init)  how S is fitted
    KINDS = ("identity", "linear", "g_relu", "orthogonal"), build_layer(kind, shape_a, shape_b)
    Stitched(a, tap_a, layer, b, tap_b)                          the stitched network (logits)
    (the two halves read and run through stir.models.taps: read_taps, run_from)
    ChannelStats, channel_stats, match_channels, initialise, train_layer, accuracy
"""
from stir.stitching.fit import (
    INITS, ChannelStats, Stitched, accuracy, channel_stats, initialise, match_channels, train_layer,
)
from stir.stitching.layers import KINDS, GReLUStitch, IdentityStitch, LinearStitch, OrthogonalStitch, build_layer
from stir.stitching.stitch import (
    STORE_KIND, StitchResult, StitchSettings, data_identity, seeds_of, stitch, stitch_parts, stitch_seeds,
)

__all__ = [
    "INITS", "KINDS", "STORE_KIND",
    "ChannelStats", "GReLUStitch", "IdentityStitch", "LinearStitch", "OrthogonalStitch", "StitchResult",
    "StitchSettings", "Stitched",
    "accuracy", "build_layer", "channel_stats", "data_identity", "initialise", "match_channels",
    "seeds_of", "stitch", "stitch_parts", "stitch_seeds", "train_layer",
]
