"""Seed images: where an inversion starts (Nanda et al. 2022, section 3 and appendix).

Every kind is drawn for the WHOLE batch at once from an explicit ``torch.Generator`` on the CPU and
then moved to the images' device, so one seed gives the same starting images on every device and
for every ``batch_size`` the engine later splits the batch into.

Kinds (the published code's names in brackets):

* ``normal``        i.i.d. N(0, 1) per pixel and image  ["super-noise", the paper's default]
* ``uniform``       i.i.d. U[0, 1) per pixel and image
* ``shared_normal`` one N(0, 1) image for the whole batch  ["super-noise-same"]
* ``white``         all ones                              ["white"]
* ``black``         all zeros                             ["black"]
* ``reversed``      the batch in reverse order: image i starts from image n-1-i  ["mixed_inputs"]

``normal`` seeds are returned as drawn, i.e. outside [0, 1]. The faithful mode starts from them
as the published code does (its first gradient is taken at the raw noise; the first step's clamp
brings the iterate into [0, 1]); the fast mode starts from their projection ``clamp(seed, 0, 1)``.
"""
from __future__ import annotations

import torch
from torch import Tensor

from stir.inversion.config import SEED_KINDS  # noqa: F401  (named with the settings that choose one)


def make_seed(kind: str, images: Tensor, generator: torch.Generator) -> Tensor:
    """Seed images for ``images`` (n, c, h, w): (n, c, h, w) on ``images``' device and dtype.

    ``generator`` must be a CPU generator (the draw happens on the CPU); kinds without noise
    ignore it and leave it untouched.
    """
    n, shape = images.shape[0], tuple(images.shape[1:])
    if kind == "normal":
        seed = torch.randn((n, *shape), generator=generator)
    elif kind == "uniform":
        seed = torch.rand((n, *shape), generator=generator)
    elif kind == "shared_normal":
        seed = torch.randn(shape, generator=generator).expand(n, *shape)  # one image, n views
    elif kind == "white":
        seed = torch.ones((n, *shape))
    elif kind == "black":
        seed = torch.zeros((n, *shape))
    elif kind == "reversed":
        return images.detach().flip(0).clone()
    else:
        raise ValueError(f"unknown seed kind {kind!r}; choose one of {SEED_KINDS}")
    return seed.to(device=images.device, dtype=images.dtype).contiguous()


def seed_generator(seed: int) -> torch.Generator:
    """A fresh CPU generator at ``seed``: the only randomness an inversion uses."""
    return torch.Generator(device="cpu").manual_seed(seed)


# Try a of the draw at seed s uses seed RETRIES_FROM + 64 s + a. The CPU generator keeps only a seed's low 32
# bits (s + 2**32 draws what s draws), so the retries live in the upper half of that range: apart from every
# draw's own seed below 2**31, and from each other for s < 2**25 and a < 64.
RETRIES_FROM = 2 ** 31
MOST_RETRIES = 63


def retry_generator(seed: int, attempt: int) -> torch.Generator:
    """The generator of try ``attempt`` (1 .. ``MOST_RETRIES``) of the draw at ``seed`` (0 <= seed < 2**25): the
    IRI solver's fresh draw for the images still above its target (``stir.inversion.iri.solve_iri``), a
    stream apart from every draw's own."""
    if not 1 <= attempt <= MOST_RETRIES or not 0 <= seed < 2 ** 25:
        raise ValueError(f"a retry's attempt counts from 1 to {MOST_RETRIES} and its draw's seed lies in "
                         f"[0, 2**25); got attempt {attempt}, seed {seed}")
    return seed_generator(RETRIES_FROM + 64 * seed + attempt)
