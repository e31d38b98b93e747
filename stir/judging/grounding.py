"""The grounding benchmark of similarity measures (Ding, Denain and Steinhardt, NeurIPS 2021).

A dissimilarity measure is good when it tracks a *functional* difference between representations:
over many representation pairs (x_p, y_p), the Spearman rank correlation between the measure's
dissimilarity D(x_p, y_p) and the functional difference F_p should be high. Tests:

    depth       representations from every tap of several seed models, every pair of them;
                F = |acc_probe(x) - acc_probe(y)|
    pc_deletion x and x minus k principal components, for a range of k (per tap and model): the top-k
                (largest variance, as the issue asks) or the bottom-k (smallest variance, the
                direction in which, as we read Ding et al., CKA stays blind while accuracy drops);
                F = acc_probe(x) - acc_probe(x without k PCs)   (the accuracy drop)
    robustness  the penultimate layers of two zoo models; F = |robust acc difference| and the
                prediction disagreement on adversarial examples (the OOD axis)

Dissimilarity of a similarity S (1 for identical) is 1 - S; of a distance, the distance itself;
an asymmetric measure is symmetrised as the mean of both orders (1 - (S(x, y) + S(y, x)) / 2).

The linear probe (``probe_accuracy``) is ridge regression onto one-hot labels, solved in closed
form in the dual (kernel) form, float64: deterministic, seconds on a CPU even at d = 8192. It is
trained on one half of held-out images and scored on the other half (``probe_split``).
The interval is a percentile bootstrap over pairs (points), ``n_boot`` resamples from ``seed``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch
from scipy.stats import rankdata
from torch import Tensor

from stir.judging.layer_matching import check_measures, resolve, skip_reason

TESTS = ("depth", "pc_deletion", "robust_accuracy", "adversarial_disagreement")


def dissimilarity(measure: str, x: Tensor, y: Tensor) -> float:
    """D(x, y): 1 - S for a similarity, the distance for a distance, both orders averaged if asymmetric."""
    fn, symmetric, is_distance = resolve(measure)
    if skip_reason(measure, x, y) is not None:
        return math.nan
    try:
        value = float(fn(x, y)) if symmetric else (float(fn(x, y)) + float(fn(y, x))) / 2
    except ValueError:  # undefined on this data (CCA with d >= n, constant representation)
        return math.nan
    if not math.isfinite(value):
        return math.nan
    return value if is_distance else 1.0 - value


def probe_split(n: int, seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """A fixed random half of the n images trains the probe, the other half scores it."""
    idx = np.random.default_rng(seed).permutation(n)
    return np.sort(idx[: n // 2]), np.sort(idx[n // 2:])


def probe_accuracy(x: Tensor, labels: Tensor, ridge: float = 1e-3) -> float:
    """Accuracy of a linear probe on representation x (n, d): ridge on one-hot labels, dual form.

    Train on ``probe_split``'s first half, score on the second. Features are centred by the
    training mean; the ridge is ``ridge * trace(K) / n_train`` (scale-free). Deterministic.
    """
    train, test = probe_split(x.shape[0])
    x = x.flatten(1).double()
    y = labels.long()
    mean = x[train].mean(dim=0, keepdim=True)
    xtr, xte = x[train] - mean, x[test] - mean
    classes = int(y.max().item()) + 1
    onehot = torch.nn.functional.one_hot(y[train], classes).double()
    onehot = onehot - onehot.mean(dim=0, keepdim=True)
    gram = xtr @ xtr.T  # (n_tr, n_tr)
    lam = ridge * max(gram.trace().item(), 1e-12) / len(train)
    alpha = torch.linalg.solve(gram + lam * torch.eye(len(train), dtype=gram.dtype), onehot)
    scores = (xte @ xtr.T) @ alpha  # (n_te, classes)
    return float((scores.argmax(dim=1) == y[test]).double().mean())


PC_ORDERS = ("top", "bottom")


def delete_top_pcs(x: Tensor, k: int) -> Tensor:
    """x (n, d) with its top-k principal components removed: x - x_c V_k V_k^T (the mean is kept)."""
    return delete_pcs(x, k, "top")


def delete_pcs(x: Tensor, k: int, order: str = "top") -> Tensor:
    """x (n, d) without k principal components: the k of largest variance ("top") or of smallest
    nonzero variance ("bottom", among the rank r of the centred x); the mean is kept."""
    if order not in PC_ORDERS:
        raise ValueError(f"unknown principal-component order {order!r}; choose from {list(PC_ORDERS)}")
    x = x.flatten(1).double()
    if k == 0:
        return x
    mean = x.mean(dim=0, keepdim=True)
    xc = x - mean
    _, s, vh = torch.linalg.svd(xc, full_matrices=False)  # vh (r, d), rows = principal directions
    rank = int((s > s[0] * max(x.shape) * torch.finfo(s.dtype).eps).sum()) if s.numel() else 0
    if k > rank:
        raise ValueError(f"cannot delete {k} principal components from a rank-{rank} representation")
    v = (vh[:k] if order == "top" else vh[rank - k:rank]).T  # (d, k)
    return xc - (xc @ v) @ v.T + mean


@dataclass
class Correlation:
    """Spearman rho of (dissimilarity, functional difference) with a percentile bootstrap interval."""

    rho: float
    low: float
    high: float
    count: int  # points with both values finite


def spearman(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman rho along the last axis of a, b (..., m) (average ranks for ties); NaN for a constant side."""
    ra, rb = rankdata(a, axis=-1), rankdata(b, axis=-1)
    ra = ra - ra.mean(axis=-1, keepdims=True)
    rb = rb - rb.mean(axis=-1, keepdims=True)
    denom = np.sqrt((ra ** 2).sum(axis=-1) * (rb ** 2).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (ra * rb).sum(axis=-1) / denom, np.nan)


def rank_correlation(dissim: Sequence[float], func: Sequence[float], n_boot: int = 1000, seed: int = 0,
                     level: float = 0.95) -> Correlation:
    """Spearman rho over finite points and its bootstrap interval (resampling points with replacement)."""
    a, b = np.asarray(dissim, dtype=float), np.asarray(func, dtype=float)
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    m = len(a)
    if m < 3:
        return Correlation(math.nan, math.nan, math.nan, m)
    rho = float(spearman(a, b))
    idx = np.random.default_rng(seed).integers(0, m, size=(n_boot, m))
    boot = spearman(a[idx], b[idx])
    boot = boot[np.isfinite(boot)]
    tail = (1 - level) / 2 * 100
    low, high = (np.percentile(boot, [tail, 100 - tail]) if boot.size else (math.nan, math.nan))
    return Correlation(rho, float(low), float(high), m)


@dataclass
class Point:
    """One representation pair: what it is, the functional difference, each measure's dissimilarity."""

    label: str
    functional: float
    dissimilarity: Dict[str, float]


@dataclass
class GroundingTest:
    """One test: its points and, per measure, the rank correlation over them."""

    test: str
    functional: str  # what F is, in words
    points: List[Point] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    def measures(self) -> List[str]:
        return list(dict.fromkeys(m for p in self.points for m in p.dissimilarity))

    def correlation(self, measure: str, n_boot: int = 1000, seed: int = 0) -> Correlation:
        pts = [p for p in self.points if measure in p.dissimilarity]
        return rank_correlation([p.dissimilarity[measure] for p in pts], [p.functional for p in pts], n_boot, seed)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "GroundingTest":
        return cls(d["test"], d["functional"], [Point(**p) for p in d["points"]], list(d["notes"]))


def depth_test(reps: Mapping[str, Tensor], labels: Tensor, measures: Sequence[str] = "all",
               n_measure: Optional[int] = None) -> GroundingTest:
    """Every pair of representations {label: (n, d)} of the same n held-out images (taps x seed models).

    F = |acc_probe(x) - acc_probe(y)|; dissimilarities on the first ``n_measure`` images (all by default).
    """
    measures = check_measures(measures)
    names = list(reps)
    if len(names) < 2:
        raise ValueError(f"the depth test needs at least two representations, got {names}")
    acc = {name: probe_accuracy(reps[name], labels) for name in names}
    m = n_measure or labels.shape[0]
    test = GroundingTest("depth", "|probe accuracy difference|")
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            x, y = reps[a][:m].flatten(1), reps[b][:m].flatten(1)
            test.points.append(Point(f"{a} vs {b}", abs(acc[a] - acc[b]),
                                     {meas: dissimilarity(meas, x, y) for meas in measures}))
    test.notes.append("probe accuracy: " + ", ".join(f"{k}={v:.3f}" for k, v in acc.items()))
    return test


def pc_deletion_test(reps: Mapping[str, Tensor], labels: Tensor, ks: Sequence[int], measures: Sequence[str] = "all",
                     n_measure: Optional[int] = None, order: str = "top") -> GroundingTest:
    """Each representation {label: (n, d)} against itself without k PCs (``delete_pcs`` order), for every k in ``ks``.

    F = acc_probe(x) - acc_probe(x minus k PCs); a k above the representation's rank is skipped (noted).
    """
    measures = check_measures(measures)
    m = n_measure or labels.shape[0]
    if order not in PC_ORDERS:
        raise ValueError(f"unknown principal-component order {order!r}; choose from {list(PC_ORDERS)}")
    test = GroundingTest("pc_deletion", f"probe accuracy drop after deleting the {order}-k principal components")
    for name, x in reps.items():
        x = x.flatten(1).double()
        base = probe_accuracy(x, labels)
        s = torch.linalg.svdvals(x - x.mean(dim=0))
        rank = int((s > s[0] * max(x.shape) * torch.finfo(s.dtype).eps).sum())
        for k in ks:
            if k > rank:
                test.notes.append(f"{name}: k={k} skipped (rank <= {rank})")
                continue
            xk = delete_pcs(x, k, order)
            test.points.append(Point(f"{name} k={k}", base - probe_accuracy(xk, labels),
                                     {meas: dissimilarity(meas, x[:m], xk[:m]) for meas in measures}))
    return test
