"""The measures added with the registry flags: closed forms, hand values, brute-force twins, chunked paths."""

import importlib
import itertools
import math

import numpy as np
import pytest
import scipy.spatial.distance
import scipy.stats
import torch
from simtest_utils import F64, close, gen, randn, random_orthogonal, related_pair, uvw

import stir.similarity as sim
from stir.similarity import _spectral, geometry, neighbours
from stir.similarity.predictivity import fold_bounds

# stir.similarity re-exports functions of the same names as these modules
dcor_module = importlib.import_module("stir.similarity.distance_correlation")
rsa_module = importlib.import_module("stir.similarity.rsa")


def centred_np(z):
    z = z.numpy()
    return z - z.mean(0)


# ---------------------------------------------------------------- shape metrics, Bures, CKA distances


def test_shape_metric_limits():
    x, y = related_pair(n=50, d1=6, d2=6, seed=1)
    assert close(sim.shape_metric(x, y, alpha=1.0), math.acos(float(sim.procrustes(x, y))), 1e-10)
    assert close(sim.procrustes_angular(x, y), math.acos(float(sim.procrustes(x, y))), 1e-10)
    assert close(sim.shape_metric(x, y, alpha=1.0, distance="euclidean"), sim.bures_distance(x, y), 1e-10)
    # alpha = 0, equal full ranks: the angle of the mean canonical correlation.
    assert close(sim.shape_metric(x, y, alpha=0.0), math.acos(float(sim.cca(x, y))), 1e-10)
    # alpha -> 1 is continuous
    assert close(sim.shape_metric(x, y, alpha=1 - 1e-9), sim.shape_metric(x, y, alpha=1.0), 1e-7)
    with pytest.raises(ValueError, match="trivially"):
        sim.shape_metric(randn(12, 40, 1), randn(12, 30, 2), alpha=0.0)
    with pytest.raises(ValueError, match="alpha must be in"):
        sim.shape_metric(x, y, alpha=1.5)
    with pytest.raises(ValueError, match="distance must be"):
        sim.shape_metric(x, y, distance="cosine")


@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_shape_metric_forms_agree(alpha):
    x, y = related_pair(n=30, d1=5, d2=7, seed=2)
    feature = _spectral.spectral_pair(x, y, form="feature")
    gram = _spectral.spectral_pair(x, y, form="gram")
    for a, b in zip(feature[:2], gram[:2]):
        assert torch.allclose(a, b, atol=1e-10)
    assert torch.allclose(torch.linalg.svdvals(feature[2]), torch.linalg.svdvals(gram[2]), atol=1e-10)
    wide_x, wide_y = randn(20, 60, 3), randn(20, 50, 4)
    assert math.isfinite(float(sim.shape_metric(wide_x, wide_y, alpha=0.5)))


def test_bures_is_the_optimal_rotation_residual():
    x, y = related_pair(n=50, d1=5, d2=5, seed=3)
    xc, yc = x - x.mean(0), y - y.mean(0)
    u, _, vt = torch.linalg.svd(yc.T @ xc)
    assert close(sim.bures_distance(x, y) ** 2, ((xc - yc @ (u @ vt)) ** 2).sum(), 1e-9)
    assert close(sim.bures_distance(2 * x, 2 * y), 2 * sim.bures_distance(x, y), 1e-10)  # scales with the data


def test_cka_distances_closed_forms():
    x, y = related_pair(seed=4)
    c, theta = float(sim.linear_cka(x, y)), float(sim.cka_angular(x, y))
    assert close(theta, math.acos(c), 1e-12)
    assert close(sim.cka_euclidean(x, y), math.sqrt(2 - 2 * c), 1e-12)
    assert close(sim.cka_euclidean(x, y), 2 * math.sin(theta / 2), 1e-12)


def test_permutation_metric_brute_force():
    x, y = related_pair(n=20, d1=3, d2=3, seed=5)
    xc, yc = centred_np(x), centred_np(y)
    best = max(np.trace(xc.T @ yc[:, list(p)]) for p in itertools.permutations(range(3)))
    nx, ny = np.linalg.norm(xc), np.linalg.norm(yc)
    assert close(sim.permutation_metric(x, y), math.acos(best / (nx * ny)), 1e-10)
    assert close(sim.permutation_metric(x, y, distance="euclidean"), math.sqrt(nx**2 + ny**2 - 2 * best), 1e-10)
    assert close(sim.permutation_metric(x, x[:, [2, 0, 1]] + 4.0), 0.0, 1e-7)


# ---------------------------------------------------------------- subspaces


def test_eigenspace_overlap_hand_value():
    u, v, w = uvw(n=12, seed=6)
    x, y = torch.cat([u, 3 * v], 1), torch.cat([u - w, u + w], 1)  # spans {u, v} and {u, w}
    assert close(sim.eigenspace_overlap(x, y), 0.5, 1e-12)
    assert close(sim.eigenspace_overlap(x, x @ torch.tensor([[2.0, 1.0], [0.5, 3.0]], dtype=F64)), 1.0, 1e-12)
    wide = randn(10, 40, 7)
    assert close(sim.eigenspace_overlap(wide, wide), 1.0, 1e-10)  # by the ranks, not the widths


def test_gulp_closed_forms():
    x, y = related_pair(n=40, d1=5, d2=4, seed=8)
    xc, yc = centred_np(x), centred_np(y)
    px = xc @ np.linalg.pinv(xc)
    py = yc @ np.linalg.pinv(yc)
    assert close(sim.gulp(x, y), np.linalg.norm(px - py), 1e-10)  # lam = 0: projections
    for a, b in ((xc, yc), (centred_np(randn(20, 5, 9)), centred_np(randn(20, 60, 10)))):  # also d > n
        n, lam = a.shape[0], 0.3
        a, b = np.sqrt(n) * a / np.linalg.norm(a), np.sqrt(n) * b / np.linalg.norm(b)
        sa, sb, sab = a.T @ a / n, b.T @ b / n, a.T @ b / n
        ia, ib = np.linalg.inv(sa + lam * np.eye(len(sa))), np.linalg.inv(sb + lam * np.eye(len(sb)))
        d2 = np.trace(sa @ ia @ sa @ ia) + np.trace(sb @ ib @ sb @ ib) - 2 * np.trace(ia @ sab @ ib @ sab.T)
        got = sim.gulp(torch.from_numpy(a), torch.from_numpy(b), lam=lam, squared=True)
        assert close(got, d2, 1e-9)
    with pytest.raises(ValueError, match="trivially 1.*lam > 0"):
        sim.gulp(randn(12, 40, 1), randn(12, 30, 2))


# ---------------------------------------------------------------- distance correlation and geometry


def test_distance_correlation_brute_force_and_blocks(monkeypatch):
    x, y = related_pair(n=33, seed=11)

    def dcenter(z):
        d = scipy.spatial.distance.squareform(scipy.spatial.distance.pdist(z.numpy()))
        return d - d.mean(0) - d.mean(1)[:, None] + d.mean()

    a, b = dcenter(x), dcenter(y)
    expected = math.sqrt((a * b).mean() / math.sqrt((a * a).mean() * (b * b).mean()))
    assert close(sim.distance_correlation(x, y), expected, 1e-12)
    monkeypatch.setattr(dcor_module, "_BLOCK_ELEMS", 70)  # two rows per block
    assert close(sim.distance_correlation(x, y), expected, 1e-12)
    assert close(sim.distance_correlation(x + 1e3, y), expected, 1e-9)


def test_geometry_hand_values_and_blocks(monkeypatch):
    x = torch.tensor([[3.0, 0.0], [3.0, 2.0], [3.0, -2.0]], dtype=F64)  # mean (3, 0)
    y = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], dtype=F64)  # mean (0, 1/3)
    assert close(sim.magnitude_difference(x, y), 3 - 1 / 3, 1e-12)
    cx = (1 + 2 * 3 / math.sqrt(13)) / 3
    cy = (0 + 1 + 0) / 3
    assert close(sim.concentricity_difference(x, y), abs(cx - cy), 1e-12)
    with pytest.raises(ValueError, match="row 1 of y is all zeros"):
        sim.concentricity_difference(x, torch.tensor([[1.0, 1.0], [0.0, 0.0], [2.0, 1.0]], dtype=F64))
    a, b = related_pair(n=25, seed=12)
    a, b = 0.1 * a, 0.1 * b

    def u(z):
        d2 = scipy.spatial.distance.squareform(scipy.spatial.distance.pdist(z.numpy(), "sqeuclidean"))
        return math.log(np.exp(-2 * d2).sum() / len(d2) ** 2)

    assert close(sim.uniformity_difference(a, b), abs(u(a) - u(b)), 1e-12)
    monkeypatch.setattr(geometry, "_BLOCK_ELEMS", 60)
    assert close(sim.uniformity_difference(a, b), abs(u(a) - u(b)), 1e-12)


# ---------------------------------------------------------------- RSA


@pytest.mark.parametrize("rdm,metric", [("correlation", "correlation"), ("euclidean", "sqeuclidean")])
def test_rdm_vector_matches_pdist(rdm, metric, monkeypatch):
    x = randn(17, 5, 13)
    ref = scipy.spatial.distance.pdist(x.numpy(), metric) / (5 if rdm == "euclidean" else 1)
    assert np.allclose(rsa_module.rdm_vector(x, rdm).numpy(), ref, atol=1e-12)
    monkeypatch.setattr(rsa_module, "_BLOCK_ELEMS", 40)  # a few rows per block
    assert np.allclose(rsa_module.rdm_vector(x, rdm).numpy(), ref, atol=1e-12)


def test_rsa_compares_match_scipy():
    x, y = related_pair(n=20, seed=14)
    a = scipy.spatial.distance.pdist(x.numpy(), "correlation")
    b = scipy.spatial.distance.pdist(y.numpy(), "correlation")
    assert close(sim.rsa(x, y), scipy.stats.spearmanr(a, b).statistic, 1e-12)
    assert close(sim.rsa(x, y, compare="pearson"), scipy.stats.pearsonr(a, b).statistic, 1e-12)
    assert close(sim.rsa(x, y, compare="cosine"), a @ b / np.linalg.norm(a) / np.linalg.norm(b), 1e-12)
    # tau-a = tau-b without ties
    assert close(sim.rsa(x, y, compare="kendall_tau_a"), scipy.stats.kendalltau(a, b).statistic, 1e-12)


def test_kendall_tau_a_with_ties_brute_force():
    g = np.random.default_rng(15)
    for m in (2, 7, 60, 301):
        a = np.round(g.normal(size=m) * 2) / 2
        b = np.round(a + g.normal(size=m))
        pairs = [(i, j) for i in range(m) for j in range(i + 1, m)]
        s = sum(np.sign(a[i] - a[j]) * np.sign(b[i] - b[j]) for i, j in pairs)
        for backend in ("torch", "scipy"):
            got = rsa_module.kendall_tau_a(torch.tensor(a), torch.tensor(b), backend=backend)
            assert close(got, s / len(pairs), 1e-12), backend
        assert np.array_equal(rsa_module.spearman_ranks(torch.tensor(a)).numpy(), scipy.stats.rankdata(a))


def test_rsa_errors():
    x, y = related_pair(n=10, seed=16)
    with pytest.raises(ValueError, match="row 0 of x is constant over its features"):
        sim.rsa(torch.cat([torch.ones(1, 8, dtype=F64), x[1:]]), y)
    assert math.isfinite(float(sim.rsa(torch.cat([torch.ones(1, 8, dtype=F64), x[1:]]), y, rdm="euclidean")))
    with pytest.raises(ValueError, match="compare must be one of"):
        sim.rsa(x, y, compare="tau-b")
    with pytest.raises(ValueError, match="every dissimilarity in the RDM of x is equal"):
        sim.rsa(torch.eye(5, dtype=F64), y[:5], rdm="euclidean")


# ---------------------------------------------------------------- neighbourhoods


def brute_knn(z, k):
    zn = z / z.norm(dim=1, keepdim=True)
    s = zn @ zn.T
    s.fill_diagonal_(-math.inf)
    return s.argsort(dim=1, descending=True)[:, :k]


def test_knn_indices_and_blocks(monkeypatch):
    x = randn(50, 7, 17)
    assert torch.equal(neighbours.knn_indices(x, 5), brute_knn(x, 5))
    monkeypatch.setattr(neighbours, "_BLOCK_ELEMS", 120)  # two rows per block
    assert torch.equal(neighbours.knn_indices(x, 5), brute_knn(x, 5))


def test_knn_measures_against_set_formulas():
    x, y = related_pair(n=45, seed=18)
    k = 6
    nx, ny = brute_knn(x, k).tolist(), brute_knn(y, k).tolist()
    inter = [len(set(a) & set(b)) for a, b in zip(nx, ny)]
    assert close(sim.mutual_knn(x, y, k=k), np.mean(inter) / k, 1e-12)
    assert close(sim.jaccard_knn(x, y, k=k), np.mean([m / (2 * k - m) for m in inter]), 1e-12)
    hit = [any(i in nx[j] for j in ny[i]) for i in range(45)]
    assert close(sim.cycle_knn(x, y, k=k), np.mean(hit), 1e-12)
    scores = []
    for a, b in zip(nx, ny):
        joint = set(a) & set(b)
        if not joint:
            scores.append(0.0)
            continue
        s = sum(2 / ((1 + abs(a.index(j) - b.index(j))) * (a.index(j) + b.index(j) + 2)) for j in joint)
        scores.append(s / sum(1 / t for t in range(1, len(joint) + 1)))
    assert close(sim.rank_similarity(x, y, k=k), np.mean(scores), 1e-12)
    xn, yn = x / x.norm(dim=1, keepdim=True), y / y.norm(dim=1, keepdim=True)
    da, db = 1 - (xn @ xn.T).numpy(), 1 - (yn @ yn.T).numpy()
    cos = [1 - scipy.spatial.distance.cosine(da[i, sorted(set(a) | set(b))], db[i, sorted(set(a) | set(b))])
           for i, (a, b) in enumerate(zip(nx, ny))]
    assert close(sim.second_order_cosine(x, y, k=k), np.mean(cos), 1e-12)


def test_cknna_sparse_equals_dense_platonic_form():
    x, y = related_pair(n=30, seed=19)
    k, n = 5, 30

    def hsic(a, b):  # platonic-rep's form, dense
        a, b = a.clone().fill_diagonal_(0), b.clone().fill_diagonal_(0)
        t = (a * b.T).sum() + a.sum() * b.sum() / ((n - 1) * (n - 2)) - 2 * (a @ b).sum() / (n - 2)
        return t / (n * (n - 3))

    kk, ll = x @ x.T, y @ y.T

    def mask(m):
        m = m.clone().fill_diagonal_(-math.inf)
        return torch.zeros(n, n, dtype=F64).scatter_(1, m.topk(k, dim=1).indices, 1.0)

    mk, ml = mask(kk), mask(ll)
    expected = hsic(mk * ml * kk, mk * ml * ll) / torch.sqrt(hsic(mk * kk, mk * kk) * hsic(ml * ll, ml * ll))
    assert close(sim.cknna(x, y, k=k, normalize=False), expected, 1e-12)
    xn, yn = x / x.norm(dim=1, keepdim=True), y / y.norm(dim=1, keepdim=True)
    assert close(sim.cknna(x, y, k=k), sim.cknna(xn, yn, k=k, normalize=False), 1e-12)


def test_knn_errors():
    x, y = related_pair(n=12, seed=20)
    with pytest.raises(ValueError, match="row 2 of y is all zeros"):
        sim.mutual_knn(x, torch.cat([y[:2], torch.zeros(1, 6, dtype=F64), y[3:]]))
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        sim.mutual_knn(x, y, k=0)
    with pytest.raises(ValueError, match="k must be an integer >= 2"):
        sim.cknna(x, y, k=1)
    assert close(sim.mutual_knn(x, y, k=11), 1.0, 1e-12)  # k = n - 1: every other sample


# ---------------------------------------------------------------- predictivity


def ridge_oof(x, y, alpha, folds):
    """Explicit out-of-fold ridge with an intercept (numpy, primal normal equations)."""
    x, y = x.numpy(), y.numpy()
    pred = np.empty_like(x)
    for start, stop in fold_bounds(len(x), folds):
        test = np.zeros(len(x), bool)
        test[start:stop] = True
        ym, xm = y[~test].mean(0), x[~test].mean(0)
        a = y[~test] - ym
        coef = np.linalg.solve(a.T @ a + alpha * np.eye(a.shape[1]), a.T @ (x[~test] - xm))
        pred[test] = (y[test] - ym) @ coef + xm
    return x, pred


@pytest.mark.parametrize("n,d2", [(40, 6), (23, 50)])  # primal and dual (d2 > n) paths
def test_predictivity_matches_explicit_ridge(n, d2):
    x, _ = related_pair(n=n, d1=4, d2=4, seed=21)
    y = torch.cat([x, randn(n, d2 - 4, 22)], 1) + 0.3 * randn(n, d2, 23)
    xs, pred = ridge_oof(x, y, 2.0, 4)
    r2 = 1 - ((xs - pred) ** 2).sum() / ((xs - xs.mean(0)) ** 2).sum()
    assert close(sim.linear_predictivity(x, y, alpha=2.0, folds=4), r2, 1e-10)
    r = np.mean([np.corrcoef(pred[:, j], xs[:, j])[0, 1] for j in range(4)])
    assert close(sim.linear_predictivity(x, y, alpha=2.0, folds=4, score="pearson"), r, 1e-10)


def test_fold_bounds_like_kfold():
    assert fold_bounds(12, 5) == [(0, 3), (3, 6), (6, 8), (8, 10), (10, 12)]
    assert fold_bounds(10, 5) == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]
    x, y = related_pair(n=20, seed=24)
    with pytest.raises(ValueError, match="folds must be an integer >= 2"):
        sim.linear_predictivity(x, y, folds=1)
    with pytest.raises(ValueError, match="alpha .* must be > 0"):
        sim.linear_predictivity(x, y, alpha=0.0)


# ---------------------------------------------------------------- ids


def test_id_parameters_are_parsed():
    x, y = related_pair(seed=25)
    assert close(sim.get("measure/netrep/shape_metric-alpha=0.3-distance=angular")(x, y),
                 sim.shape_metric(x, y, alpha=0.3, whiten="netrep"), 0)
    assert close(sim.get("measure/stir/shape_metric-alpha=0.3-distance=angular")(x, y),
                 sim.shape_metric(x, y, alpha=0.3), 0)
    assert close(sim.get("measure/stir/ridge-lambda=3-r2-cv=5folds")(x, y), sim.linear_predictivity(x, y, alpha=3.0), 0)
    assert close(sim.get("measure/netrep/cca-distance=angular")(x, y),
                 sim.shape_metric(x, y, alpha=0.0, whiten="netrep"), 0)
    assert close(sim.get("measure/stir/cca-distance=angular")(x, y), sim.shape_metric(x, y, alpha=0.0), 0)
    assert sim.info("measure/rsatoolbox/rsa-rdm=correlation-compare=spearman").name == "rsa"
    assert sim.is_distance("measure/netrep/procrustes-distance=angular")
    with pytest.raises(ValueError, match="unknown similarity measure"):
        sim.get("measure/platonic/mutual_knn-topk=ten")
    rot = random_orthogonal(8, 26)
    assert close(sim.get("measure/resi/jaccard_similarity")(x @ rot, y), sim.jaccard_knn(x, y), 1e-12)
    assert sim.get("linear_cka", form="gram")(x, y) == sim.linear_cka(x, y, form="gram")
    assert close(sim.get("measure/resi/gulp")(x, y), sim.gulp(x, y) ** 2, 1e-12)
