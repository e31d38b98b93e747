"""IRI status against a null (Feather et al. 2023): an X' passes when m1 puts it closer to its x than
to the nearest other natural image of the sample."""
import math

import pytest
import torch

from stir.measure.convergence import natural_null, pool_quality


def test_the_null_is_the_relative_distance_to_the_nearest_other_image():
    reps = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]], dtype=torch.float64)
    null = natural_null(reps)
    # image 0: nearest other is image 2 at distance 1, its norm 1; image 1: image 2 at sqrt(2), norm 2.
    assert null.tolist() == pytest.approx([1.0, math.sqrt(2) / 2, 1.0 / math.sqrt(2)])
    assert math.isinf(float(natural_null(reps[:1])[0]))


def test_pool_quality_counts_the_x_prime_that_pass_the_null_beside_the_tolerance():
    null = [torch.tensor([0.1, 0.1, 0.1, 0.1], dtype=torch.float64)]
    run = {"residual": torch.tensor([0.01, 0.05, 0.09, 0.2], dtype=torch.float64), "fraction_iri": 0.25,
           "evaluations": 4, "target_distance": None}
    q = pool_quality([run], null)
    assert q["fraction_iri"] == 0.25 and q["fraction_iri_null"] == 0.75  # within 0.02: 1; below the null: 3
    assert q["median_residual_null_ratio"] == pytest.approx(0.7)
    assert "fraction_iri_null" not in pool_quality([run])
