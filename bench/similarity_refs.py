"""The public reference implementations that bench_similarity.py --new times the new measures against.

Run only in the reference environment (the ``refs`` extra of pyproject.toml plus
torch, einops and loguru; see tests/similarity/fixtures/make_reference_values.py),
with ``--refs-src`` naming a folder that holds git snapshots ``mklabunde+resi``,
``ahwillia+netrep`` and ``minyoungg+platonic-rep``. Each entry is one call of the
package's public function on numpy inputs (torch tensors for platonic-rep, whose
functions take them); the loaders only make the code importable (the same two
shims as the fixture script, described there).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "similarity" / "fixtures"))
from loaders import load_platonic, load_resi  # noqa: E402  (the one loader of the reference code)

# measure -> [(label, name of the builder below)]; the fastest of them is the one compared.
REFERENCES = {
    "rsa": [("ReSi RSA(correlation, spearman)", "resi_rsa_corr"), ("rsatoolbox spearman", "rsatb_corr_spearman")],
    "rsa_pearson": [("rsatoolbox corr", "rsatb_corr_corr")],
    "rsa_kendall": [("rsatoolbox tau-a", "rsatb_corr_tau_a")],
    "rsa_euclidean": [("ReSi RSA(euclidean, spearman)", "resi_rsa_eucl"), ("rsatoolbox", "rsatb_eucl_spearman")],
    "mutual_knn": [("platonic-rep mutual_knn", "platonic_mutual")],
    "cycle_knn": [("platonic-rep cycle_knn", "platonic_cycle")],
    "jaccard_knn": [("ReSi jaccard_similarity", "resi_jaccard")],
    "rank_similarity": [("ReSi rank_similarity", "resi_rank")],
    "second_order_cosine": [("ReSi second_order_cosine_similarity", "resi_second")],
    "cknna": [("platonic-rep cknna", "platonic_cknna")],
    "shape_metric": [("netrep LinearMetric(alpha=0.5)", "netrep_linear_05")],
    "procrustes_angular": [("netrep LinearMetric()", "netrep_linear_1"), ("ReSi", "resi_angular")],
    "permutation_metric": [("netrep PermutationMetric", "netrep_perm")],
    "bures_distance": [("ReSi procrustes_size_and_shape_distance", "resi_bures")],
    "cka_angular": [("netrep LinearCKA", "netrep_cka")],
    "distance_correlation": [("dcor distance_correlation", "dcor"), ("ReSi distance_correlation", "resi_dcor")],
    "eigenspace_overlap": [("ReSi eigenspace_overlap_score", "resi_eos")],
    "gulp": [("ReSi gulp", "resi_gulp")],
    "linear_predictivity": [("scikit-learn Ridge + KFold(5)", "sklearn_ridge")],
    "magnitude_difference": [("ReSi magnitude_difference", "resi_magnitude")],
    "concentricity_difference": [("ReSi concentricity_difference", "resi_concentricity")],
    "uniformity_difference": [("ReSi uniformity_difference", "resi_uniformity")],
}



def _load_resi(root: Path) -> dict:
    return load_resi(root, ("utils", "rsa", "nearest_neighbor", "statistics", "eigenspace_overlap", "gulp", "distance_correlation", "procrustes"))



def _load_platonic(root: Path):
    return load_platonic(root)


def build(key: str, src: Path):
    """fn(x, y) -> float for reference ``key`` (numpy float arrays in, as each package expects)."""
    if key.startswith("resi_"):
        r = _load_resi(src / "mklabunde+resi")
        rs, nn, st, pr = r["rsa"], r["nearest_neighbor"], r["statistics"], r["procrustes"]
        return {
            "resi_rsa_corr": lambda x, y: rs.representational_similarity_analysis(x, y, "nd", n_jobs=1),
            "resi_rsa_eucl": lambda x, y: rs.representational_similarity_analysis(x, y, "nd", inner="euclidean",
                                                                                  n_jobs=1),
            "resi_jaccard": lambda x, y: nn.jaccard_similarity(x, y, "nd", n_jobs=1),
            "resi_rank": lambda x, y: nn.rank_similarity(x, y, "nd", n_jobs=1),
            "resi_second": lambda x, y: nn.second_order_cosine_similarity(x, y, "nd", n_jobs_neighbors=1),
            "resi_angular": lambda x, y: pr.orthogonal_angular_shape_metric_centered(x, y, "nd"),
            "resi_bures": lambda x, y: pr.procrustes_size_and_shape_distance(x, y, "nd"),
            "resi_dcor": lambda x, y: r["distance_correlation"].distance_correlation(x, y, "nd", n_jobs=1),
            "resi_eos": lambda x, y: r["eigenspace_overlap"].eigenspace_overlap_score(x, y, "nd"),
            "resi_gulp": lambda x, y: r["gulp"].gulp(x, y, "nd"),
            "resi_magnitude": lambda x, y: st.magnitude_difference(x, y, "nd"),
            "resi_concentricity": lambda x, y: st.concentricity_difference(x, y, "nd"),
            "resi_uniformity": lambda x, y: st.uniformity_difference(x, y, "nd", n_jobs=1),
        }[key]
    if key.startswith("rsatb_"):
        import rsatoolbox

        _, rdm, compare = key.split("_", 2)
        rdm = {"corr": "correlation", "eucl": "euclidean"}[rdm]
        compare = {"spearman": "spearman", "corr": "corr", "tau_a": "tau-a"}[compare]

        def rsatb(x, y):
            r1 = rsatoolbox.rdm.calc_rdm(rsatoolbox.data.Dataset(x), method=rdm)
            r2 = rsatoolbox.rdm.calc_rdm(rsatoolbox.data.Dataset(y), method=rdm)
            return rsatoolbox.rdm.compare(r1, r2, method=compare)[0][0]

        return rsatb
    if key.startswith("platonic_"):
        import torch

        metrics = _load_platonic(src / "minyoungg+platonic-rep")
        fn = {"platonic_mutual": metrics.mutual_knn, "platonic_cycle": metrics.cycle_knn,
              "platonic_cknna": metrics.cknna}[key]

        def platonic(x, y):
            fx = torch.nn.functional.normalize(torch.from_numpy(x), dim=-1)  # their pipeline's normalisation
            fy = torch.nn.functional.normalize(torch.from_numpy(y), dim=-1)
            return fn(fx, fy, topk=10)

        return platonic
    if key.startswith("netrep_"):
        sys.path.insert(0, str(src / "ahwillia+netrep"))
        from netrep.metrics import LinearCKA, LinearMetric, PermutationMetric

        return {
            "netrep_linear_05": lambda x, y: LinearMetric(alpha=0.5).fit_score(x, y),
            "netrep_linear_1": lambda x, y: LinearMetric(alpha=1.0).fit_score(x, y),
            "netrep_perm": lambda x, y: PermutationMetric().fit_score(x, y),
            "netrep_cka": lambda x, y: LinearCKA().score(x, y),
        }[key]
    if key == "dcor":
        import dcor

        return dcor.distance_correlation
    if key == "sklearn_ridge":
        from sklearn.linear_model import Ridge
        from sklearn.metrics import r2_score
        from sklearn.model_selection import KFold, cross_val_predict

        def ridge(x, y):
            pred = cross_val_predict(Ridge(alpha=1.0), y, x, cv=KFold(5))
            return r2_score(x, pred, multioutput="variance_weighted")

        return ridge
    raise KeyError(key)
