"""Every registered measure, checked by the flags it claims (stir.similarity.info).

A measure that claims an invariance is tested against that transformation of
either side, and one that does not claim it must change under it (so the flags
are neither missing nor false); a metric against the triangle inequality;
symmetry both ways; the identity value; the range; bad input; dtypes; pairwise.
"""

import math

import pytest
import torch
from simtest_utils import F64, gen, random_invertible, random_orthogonal, related_pair

import stir.similarity as sim

NAMES = sim.names()


def pair(n=40, seed=0, scale=0.1):
    """A related pair (n, 8), (n, 6), scaled small (uniformity needs unit-scale distances)."""
    x, y = related_pair(n=n, d1=8, d2=6, seed=seed)
    return x * scale, y * scale


def value(name, x, y):
    return float(sim.get(name)(x, y))


def test_flags_are_well_formed():
    for name in NAMES:
        e = sim.info(name)
        assert e.name == name and e.family and e.reference
        lo, hi = e.range
        assert lo < hi
        assert e.invariances <= set(sim.INVARIANCES), name
        assert e.min_n >= 2
        assert e.kind == ("distance" if e.distance else "similarity")
        if e.identity is not None:
            assert lo <= e.identity <= hi
            assert e.identity == (0.0 if e.distance else 1.0), name
        if e.metric:
            assert e.distance and e.symmetric and e.identity == 0.0, name
        if "invertible_linear" in e.invariances:
            assert {"orthogonal", "isotropic_scaling", "permutation"} <= e.invariances, name


def test_names_by_kind_and_family():
    assert set(sim.names("similarity")) | set(sim.names("distance")) == set(NAMES)
    assert not set(sim.names("similarity")) & set(sim.names("distance"))
    assert set(sim.names("metric")) <= set(sim.names("distance"))
    assert {"procrustes_distance", "shape_metric", "cka_angular", "gulp"} <= set(sim.names("metric"))
    assert sim.names(family="rsa") == ["rsa", "rsa_euclidean", "rsa_kendall", "rsa_pearson"]
    assert "cca" in sim.names(invariant_to="invertible_linear")
    assert "linear_cka" not in sim.names(invariant_to="invertible_linear")
    assert set(sim.names("judging")) <= set(NAMES)
    ids = sim.names(kind="id")
    assert "measure/netrep/procrustes-distance=angular" in ids and all(i.startswith("measure/") for i in ids)
    for ident in ids:  # every listed id resolves
        sim.get(ident)
    with pytest.raises(ValueError, match="kind must be one of"):
        sim.names("metrics")


def test_unknown_names_suggest_close_matches():
    with pytest.raises(ValueError, match=r"unknown similarity measure 'mutal_knn' \(did you mean 'mutual_knn'"):
        sim.get("mutal_knn")
    with pytest.raises(KeyError, match="did you mean 'measure/netrep/procrustes-distance=angular'"):
        sim.get("measure/netrep/procrustes-distance=angulr")
    with pytest.raises(ValueError, match="valid names: aligned_cosine, bures_distance"):
        sim.get("measure/nowhere/cka-score")
    with pytest.raises(ValueError, match="does not take option.*valid options: k"):
        sim.get("mutual_knn", topk=3)


@pytest.mark.parametrize("name", NAMES)
def test_symmetry_flag(name):
    x, y = pair(seed=1)
    a, b = value(name, x, y), value(name, y, x)
    if sim.is_symmetric(name):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-10)
    else:  # on weakly related data (strongly related data can saturate, e.g. cycle_knn = 1 both ways)
        w = x[:, :6] + torch.randn(40, 6, generator=gen(11), dtype=F64) * 0.3
        assert max(abs(a - b), abs(value(name, x, w) - value(name, w, x))) > 1e-6


@pytest.mark.parametrize("name", NAMES)
def test_identity_and_range(name):
    e = sim.info(name)
    lo, hi = e.range
    x, y = pair(seed=2)
    if e.identity is not None:
        assert math.isclose(value(name, x, x.clone()), e.identity, abs_tol=1e-6)
    independent = torch.randn(40, 6, generator=gen(3), dtype=F64)
    relu = lambda z: torch.relu(z) + 0.01 * torch.arange(1, z.shape[1] + 1, dtype=F64)  # noqa: E731 (no zero rows)
    for a, b in ((x, y), (x, independent), (relu(x), relu(y)), (x, -x)):
        v = value(name, a, b)
        assert lo - 1e-9 <= v <= hi + 1e-9, (v, e.range)


def _transform(kind, z, seed):
    d = z.shape[1]
    g = gen(seed)
    if kind == "orthogonal":
        return z @ random_orthogonal(d, seed)
    if kind == "isotropic_scaling":
        return z * 3.7
    if kind == "translation":
        return z + 0.5 * torch.randn(d, generator=g, dtype=F64)
    if kind == "permutation":
        return z[:, torch.randperm(d, generator=g)]
    return z @ random_invertible(d, seed)


@pytest.mark.parametrize("invariance", sim.INVARIANCES)
@pytest.mark.parametrize("name", NAMES)
def test_invariance_flags(name, invariance):
    x, y = pair(seed=4)
    base = value(name, x, y)
    moved = [value(name, _transform(invariance, x, 5), y), value(name, x, _transform(invariance, y, 6))]
    if invariance in sim.info(name).invariances:
        for m in moved:
            assert math.isclose(m, base, rel_tol=1e-7, abs_tol=1e-9), (m, base)
    else:
        assert max(abs(m - base) for m in moved) > 1e-6, (moved, base)


def _reps(seed):
    """Six related representations of 30 samples (widths 5-7), with a chain a, a', a'' of small steps."""
    g = gen(seed)
    base = torch.randn(30, 5, generator=g, dtype=F64) * 0.1
    reps = [base, base + 0.03 * torch.randn(30, 5, generator=g, dtype=F64),
            base + 0.06 * torch.randn(30, 5, generator=g, dtype=F64)]
    for d in (5, 6, 7):
        reps.append(base @ torch.randn(5, d, generator=g, dtype=F64) * 0.1
                    + 0.05 * torch.randn(30, d, generator=g, dtype=F64))
    return reps


@pytest.mark.parametrize("name", sim.names("metric"))
def test_metric_triangle_inequality(name):
    reps = _reps(7)
    m = sim.pairwise(name, reps)
    assert torch.allclose(m, m.T, atol=1e-12)
    assert torch.diagonal(m).abs().max() < 1e-6
    k = len(reps)
    for i in range(k):
        for j in range(k):
            for l in range(k):
                assert m[i, l] <= m[i, j] + m[j, l] + 1e-9, (i, j, l)


@pytest.mark.parametrize("name", NAMES)
def test_bad_input_errors(name):
    fn = sim.get(name)
    need = sim.info(name).min_n
    x, y = pair(n=max(20, need + 2), seed=8)
    n = x.shape[0]
    with pytest.raises(ValueError, match=f"x has {n} rows but y has {n - 2}: representations must be paired"):
        fn(x, y[:-2])
    bad = x.clone()
    bad[3, 2] = float("nan")
    with pytest.raises(ValueError, match=r"x contains NaN or Inf \(first at row 3, column 2\)"):
        fn(bad, y)
    with pytest.raises(ValueError, match="y is constant"):
        fn(x, torch.full_like(y, 3.0))
    with pytest.raises(ValueError, match="must be 2-D"):
        fn(x[:, 0], y)
    with pytest.raises(ValueError, match="floating-point"):
        fn(x.long(), y)
    with pytest.raises(ValueError, match="no features"):
        fn(x[:, :0], y)
    with pytest.raises(TypeError, match="torch.Tensor"):
        fn(x.numpy(), y)
    # A name that fixes options (rsa_pearson) reports errors under its function's name (rsa).
    with pytest.raises(ValueError, match=f"({name}|{sim.info(name).fn.__name__}) needs at least {need} samples"):
        fn(x[: need - 1], y[: need - 1])


@pytest.mark.parametrize("name", NAMES)
def test_dtypes_and_inputs_untouched(name):
    x, y = pair(seed=9)
    x0, y0 = x.clone(), y.clone()
    ref = sim.get(name)(x, y)
    assert ref.dtype == F64 and ref.ndim == 0
    assert torch.equal(x, x0) and torch.equal(y, y0)
    got = sim.get(name)(x.float(), y.float())
    assert got.dtype == F64 and math.isclose(float(got), float(ref), rel_tol=1e-4, abs_tol=1e-4)
    half = sim.get(name)(x.to(torch.bfloat16), y.to(torch.bfloat16))
    assert math.isclose(float(half), float(sim.get(name)(x.to(torch.bfloat16).double(), y.to(torch.bfloat16).double())),
                        rel_tol=1e-4, abs_tol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_pairwise_equals_pair_calls(name):
    reps = _reps(10)[2:]  # widths 5, 5, 6, 7
    m = sim.pairwise(name, reps)
    assert m.shape == (4, 4) and m.dtype == F64
    fn = sim.get(name)
    for i, a in enumerate(reps):
        for j, b in enumerate(reps):
            # abs 1e-7: arccos / sqrt near 0 turn rounding of 1 - 1e-16 into 1.5e-8 (identical pairs)
            assert math.isclose(float(m[i, j]), float(fn(a, b)), rel_tol=1e-9, abs_tol=1e-7), (i, j)


def test_pairwise_errors_and_options():
    reps = [torch.randn(12, 30, generator=gen(s), dtype=F64) for s in range(3)]
    with pytest.raises(ValueError, match="trivially 1"):
        sim.pairwise("cca", reps)
    assert torch.isnan(sim.pairwise("cca", reps, errors="nan")).all()
    m = sim.pairwise("measure/platonic/mutual_knn-topk=3", reps)
    assert float(m[0, 1]) == float(sim.mutual_knn(reps[0], reps[1], k=3))
    assert float(sim.pairwise("rbf_cka", reps, threshold=0.5)[0, 2]) == float(sim.rbf_cka(reps[0], reps[2], threshold=0.5))
    with pytest.raises(ValueError, match="x has 12 rows but y has 11"):
        sim.pairwise("linear_cka", [reps[0], reps[1][:11]])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", NAMES)
def test_cuda_inputs_follow_the_device(name):
    x, y = pair(seed=12)
    got = sim.get(name)(x.cuda(), y.cuda())
    assert got.device.type == "cuda" and got.dtype == F64
    assert math.isclose(float(got), value(name, x, y), rel_tol=1e-8, abs_tol=1e-8)
    assert torch.allclose(sim.pairwise(name, [x.cuda(), y[:, :5].cuda()]).cpu(),
                          sim.pairwise(name, [x, y[:, :5]]), rtol=1e-8, atol=1e-8)
