"""Invariance and equivariance of representations under input transformations (G-EED), pure functions.

    transforms.py   the named transformations G (flip, cyclic shifts, rotations, colour changes),
                    their action on feature maps, Gaussian input noise
    geed.py         G-EED (Kvinge et al. 2022): invariance and equivariance deviations per tap
"""
from stir.invariance.geed import DISTANCES, KINDS, GEEDResult, GEEDRow, Interval, distance, measure_geed, pool
from stir.invariance.transforms import TRANSFORMS, Transform, gaussian_noise, get_transform, get_transforms, transform_names

__all__ = [
    "DISTANCES", "KINDS", "TRANSFORMS", "GEEDResult", "GEEDRow", "Interval", "Transform", "distance",
    "gaussian_noise", "get_transform", "get_transforms", "measure_geed", "pool", "transform_names",
]
