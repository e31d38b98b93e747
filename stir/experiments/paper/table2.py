"""Table 2 (claim 7) beside the paper's every cell, and claim 7 asked of the graded-robustness family.

``cells(m1, m2)``: the paper's STIR(m2|m1), STIR(m1|m2) and CKA of the zoo pair's counterparts
(at_it10 = AT it=10, at_it1 = AT it=1, vanilla = Vanilla; the laptop ``at``, 2 PGD steps, has none).

The graded family (``PaperConfig.graded_robustness``: per seed position [vanilla_si, at_e025_si,
at_si], configs/zoo.yaml) is judged by ``stir.paper.rules.GRADED``, a rule committed before any of its
models was trained. ``graded(...)`` builds its rows and verdict from a measured matrix per position;
until every model of a position is here and its cells are in the store the claim reads "not measured
in this report" with the train commands (``graded_missing``).
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from scipy.stats import norm

from stir.experiments import matrix as matrix_kind
from stir.experiments.context import Context
from stir.experiments.intervals import from_se as _from_se
from stir.experiments.matrix import MatrixConfig
from stir.experiments.paper import at_iris
from stir.experiments.paper.readings import (NAN, Evidence, cell_text, confidence_z, difference_of, direction_reading,
                                             over_seed_pairs)
from stir.paper import Interval, Verdict
from stir.paper import published as pub
from stir.paper import rules
from stir.paper import verdicts as v
from stir.paper.power import graded_power

# The zoo names of Table 2's models (the laptop ``at``, 2 PGD steps, is none of them).
COUNTERPART = {"at_it10": "AT it=10", "at_it1": "AT it=1", "vanilla": "Vanilla"}


def cells(m1: str, m2: str) -> str:
    """The paper's cells for the zoo pair (m1 the more robust): STIR(m2|m1) / STIR(m1|m2) (CKA), or
    why there is none."""
    a, b = COUNTERPART.get(m1), COUNTERPART.get(m2)
    if a is None or b is None:
        missing = m1 if a is None else m2
        return f"no Table 2 counterpart of {missing} (the paper's models: AT it=10, AT it=1, Vanilla)"
    (s21, e21), (cka, _) = pub.TABLE2_CELLS[(a, b)]
    (s12, e12), _ = pub.TABLE2_CELLS[(b, a)]
    return f"{s21:.2f} ± {e21:.2f} / {s12:.2f} ± {e12:.2f} (CKA {cka:.2f}); difference {s21 - s12:+.2f}"


def graded_power_text(se: float = 0.05, tau: float = 0.05) -> str:
    """The graded rule's power at Table 2's differences (``rules.GRADED_EFFECTS``), with the per-pair
    se of our Table 2 differences (0.05: at / vanilla's 0.148 [0.052, 0.243]) and a between-seed sd."""
    p = graded_power(rules.GRADED_EFFECTS, tau=tau, se=se)
    return (f"power at Table 2's differences (0.07, 0.10, 0.18), se {se}, between-seed sd {tau}, 3 positions: holds "
            f"{p['holds']:.0%}, direction reproduced {p['direction reproduced']:.0%} (4,000 simulations)")


def graded_missing(positions: Sequence[Sequence[str]], ok) -> str:
    """Why the graded family is not measured: the models not here (their train commands) or, when
    they all are, that their cells are not in the store."""
    names = [n for p in positions for n in p]
    why = ok.why(names) if names and not ok.all(names) else ""
    return why or "its cells are not in the results store yet (experiment=paper measures them)"


def graded(matrices: Mapping[int, Mapping[Tuple[str, str], Interval]], positions: Sequence[Sequence[str]],
           gaps: Mapping[Tuple[str, str], Interval], cka: Mapping[Tuple[str, str], float], confidence: float
           ) -> Tuple[List[Dict[str, Any]], Verdict]:
    """Claim 7 on the graded family: ``matrices[i][(a, b)]`` is STIR(b | a) at position i,
    ``positions[i]`` that position's models least robust first, ``gaps[(m1, m2)]`` m1's PGD-l2
    accuracy minus m2's, ``cka[(a, b)]`` the pair's CKA. Returns the rows (each Table 2 cell of ours
    beside the paper's) and the verdict by ``rules.GRADED``."""
    rows, pooled, points = [], {}, []
    by_position: Dict[int, List[float]] = {}  # the independent units: positions share no model
    z = float(norm.ppf(0.5 + confidence / 2))
    order = [("at", "at_e025"), ("at", "vanilla"), ("at_e025", "vanilla")]
    paper = {("at", "at_e025"): ("AT it=10", "AT it=1"), ("at", "vanilla"): ("AT it=10", "Vanilla"),
             ("at_e025", "vanilla"): ("AT it=1", "Vanilla")}
    for role1, role2 in order:
        label = f"{role1} / {role2}"
        per = []
        for i, names in enumerate(positions):
            if i not in matrices:
                continue
            roles = dict(zip(("vanilla", "at_e025", "at"), names))
            m1, m2 = roles[role1], roles[role2]
            s21, s12 = matrices[i][(m1, m2)], matrices[i][(m2, m1)]
            gap = gaps.get((m1, m2), Interval(math.nan, math.nan, math.nan))
            # the two directions' errors combined as independent (sqrt(se1^2 + se2^2)), as table2 and claim 3 do
            d = difference_of(s21, s12, z, confidence) if s21.measured and s12.measured \
                else Interval(math.nan, math.nan, math.nan)
            if gap.measured and not gap.above(0.0):
                rows.append({"pair": f"{m1} / {m2}", "position": i, "PGD-l2 gap": str(gap), "evidence": "no: not more robust"})
                continue
            per.append(d)
            points.append(d.value > 0)
            by_position.setdefault(i, []).append(d.value)
            a, b = paper[(role1, role2)]
            rows.append({"pair": f"{m1} / {m2}", "position": i, "PGD-l2 gap": str(gap), "STIR(m2|m1)": str(s21),
                         "STIR(m1|m2)": str(s12), "CKA": f"{cka.get((m1, m2), math.nan):.3f}", "difference": str(d),
                         "paper": cells({"AT it=10": "at_it10", "AT it=1": "at_it1", "Vanilla": "vanilla"}[a],
                                        {"AT it=10": "at_it10", "AT it=1": "at_it1", "Vanilla": "vanilla"}[b])})
        if per:
            pooled[label] = over_seed_pairs(per, confidence)[0]
    if not pooled:
        return rows, Verdict(v.NOT_RUN, "no position of the graded family is measured")
    verdict = v.more_robust_shares_less(v.DirectionEvidence(pooled))
    complete = len(points) == 3 * len(positions)  # the rule's "all 9 position values": every position measured
    # "Direction reproduced" counts independent units, the seed positions (the three pairs of a position share
    # its models; issue 66; the rule as written counted the 9 position values), and only when every position
    # is measured: (positions all above 0, positions, positions all below 0) for rules.word, else None.
    direction = (sum(all(x > 0 for x in xs) for xs in by_position.values()), len(by_position),
                 sum(all(x < 0 for x in xs) for xs in by_position.values())) if complete else None
    if not verdict.holds and not verdict.reason.startswith("contradicted") and points and all(points) and complete:
        because = verdict.reason[len(v.NOT_RESOLVED) + 2:] if verdict.reason.startswith(v.NOT_RESOLVED + ": ") \
            else verdict.reason
        verdict = Verdict(v.FAILS, f"{v.NOT_RESOLVED}; direction reproduced in all {len(points)} position values, "
                                   f"{len(by_position)} independent positions (a sign test over {len(by_position)} reaches "
                                   f"at best p = {0.5 ** len(by_position):.3f}): " + because,
                          {**verdict.numbers, "direction": direction})
    elif not verdict.reason.startswith("contradicted") and not complete:  # the rule pools all 3 positions
        verdict = Verdict(v.FAILS, f"{v.NOT_RESOLVED}: {sum(points)} of {len(points)} position values above 0, "
                                   f"{len(points)} of the rule's {3 * len(positions)} measured (the other positions' "
                                   "models are not trained yet): " + verdict.reason, verdict.numbers)
    return rows, verdict


def graded_positions(cfg_positions: Sequence[Sequence[str]], ok) -> List[List[str]]:
    """The positions whose three models are all here (each is measured as a matrix of its own)."""
    return [list(p) for p in cfg_positions if len(p) == 3 and ok.all(list(p))]


def graded_verdict_words(verdict: Optional[Verdict]) -> str:
    return rules.word(7, verdict) if verdict is not None else rules.NOT_MEASURED_W


def graded_from_parts(ctx, cfg, chosen, ok) -> Tuple[List[Dict[str, Any]], Optional[Verdict], str]:
    """(the graded family's rows, its verdict by ``rules.GRADED`` or None, why it is not measured)
    from the ``graded_<i>`` parts that ran."""
    conf, z = ctx.estimator.calibration.confidence, confidence_z(ctx)
    matrices, gaps, cka = {}, {}, {}
    for i, names in enumerate(cfg.graded_robustness):
        part = chosen.get(f"graded_{i}")
        if part is None:
            continue
        mcfg, pctx = part
        models = list(mcfg.models)
        if len(models) < 3:  # experiment.stored_only cut a model whose cells are not stored: position not measured
            continue
        matrices[i] = {}
        for a_i, a in enumerate(models):
            directions, similarities = matrix_kind.measure_row(pctx, mcfg, a_i)
            for b_i, b in enumerate(models):
                if a != b:
                    matrices[i][(a, b)] = direction_reading(directions[b_i])
                    if b_i > a_i and similarities[b_i] is not None:
                        cka[(a, b)] = cka[(b, a)] = float(similarities[b_i].value)
                        gaps[(a, b)] = robustness_gap(ctx.model(a), ctx.model(b), z)
    if not matrices:
        return [], None, graded_missing(cfg.graded_robustness, ok)
    rows, verdict = graded(matrices, cfg.graded_robustness, gaps, cka, conf)
    return rows, verdict, ""


def robustness_gap(m1: Any, m2: Any, z: float) -> Interval:
    """m1's test/robust_acc minus m2's, with the two-proportion interval over each run's robust test
    images (``trainer.robust_test_size``; read as independent samples, so somewhat wide where both
    were attacked on the same images). Not measured where either accuracy or size is unknown."""
    acc = [m.metrics.get("test/robust_acc", NAN) for m in (m1, m2)]
    size = [m.train.trainer.robust_test_size if m.train is not None else 0 for m in (m1, m2)]
    if not all(math.isfinite(a) for a in acc) or min(size) <= 0:
        return Interval(NAN, NAN, NAN)
    return _from_se(acc[0] - acc[1], math.sqrt(sum(a * (1 - a) / n for a, n in zip(acc, size))), z)


NOT_EVIDENCE = "not evidence"


def robustness_order(gap: Interval) -> Tuple[str, bool]:
    """(which of a Table 2 pair is the more robust, whether the pair is evidence for claim 7), from
    ``robustness_gap`` (m1 - m2): evidence where m1 is measurably the more robust, or where the
    robust accuracies are unknown (the configured order is then taken); the label of a pair that is
    not evidence ends in ``NOT_EVIDENCE``."""
    if not gap.measured:
        return "robust accuracy unknown: the configured order", True
    if gap.above(0.0):
        return "m1 more robust", True
    return ("m2 more robust" if gap.below(0.0) else "not resolved") + ": " + NOT_EVIDENCE, False


def table2(ctx: Context, part: Optional[Tuple[MatrixConfig, Context]], iris: Optional[at_iris.Readings] = None):
    """Claim 7: STIR(m2|m1) - STIR(m1|m2) for every pair, m1 the more robust (matrix order).

    A pair is evidence only where m1 is measurably the more robust (``robustness_gap`` above 0): of
    two models whose robust accuracies are within noise the claim predicts no direction. Where the
    accuracies are unknown the configured order (``robustness``) is taken, and the note says so.
    ``iris`` ((target, ref) -> STIR at IRIs, ``at_iris.measure_table2``): both directions and their
    difference at IRIs beside the published-procedure ones (issue 53); no such columns without it."""
    if part is None:
        return [], None
    cfg, pctx = part
    conf, z = ctx.estimator.calibration.confidence, confidence_z(ctx)
    rows_ = [matrix_kind.measure_row(pctx, cfg, i)[0] for i in range(len(cfg.models))]
    diffs, rows, notes = {}, [], []
    for i, j in itertools.combinations(range(len(cfg.models)), 2):
        m1, m2 = cfg.models[i], cfg.models[j]
        s21, s12 = direction_reading(rows_[i][j]), direction_reading(rows_[j][i])  # STIR(m2|m1), STIR(m1|m2)
        d = difference_of(s21, s12, z, conf)
        gap = robustness_gap(ctx.model(m1), ctx.model(m2), z)
        order, evidence = robustness_order(gap)
        if not evidence:
            notes.append(f"{m1} / {m2} is not evidence: m1's robust accuracy minus m2's is {gap} ({order.split(':')[0]})")
        else:
            diffs[f"{m1} / {m2}"] = d
            if not gap.measured:
                notes.append(f"{m1} / {m2}: {order} (experiment.robustness) is taken")
        row = {"m1 (more robust)": m1, "m2": m2, "robust acc gap (m1 - m2)": cell_text(gap), "order": order,
               "STIR(m2|m1)": cell_text(s21), "STIR(m1|m2)": cell_text(s12), "difference": cell_text(d)}
        if iris:
            r21, r12 = iris.get((m2, m1)), iris.get((m1, m2))
            row.update({"STIR(m2|m1) at IRIs": at_iris.cell(r21, z), "STIR(m1|m2) at IRIs": at_iris.cell(r12, z),
                        "difference at IRIs": cell_text(_iris_difference(r21, r12, z, conf))})
        rows.append({**row, "paper": cells(m1, m2)})
    return rows, Evidence(v.DirectionEvidence(diffs), notes=notes)


def at_iris_evidence(ctx: Context, part: Optional[Tuple[MatrixConfig, Context]],
                     iris: at_iris.Readings) -> Optional[v.DirectionEvidence]:
    """Claim 7's evidence at IRIs: STIR(m2|m1) - STIR(m1|m2) at IRIs of every Table 2 pair that is evidence
    (``robustness_order``, as ``table2``) and has both directions at IRIs; None when none has."""
    if part is None or not iris:
        return None
    cfg, _ = part
    conf, z = ctx.estimator.calibration.confidence, confidence_z(ctx)
    diffs = {}
    for i, j in itertools.combinations(range(len(cfg.models)), 2):
        m1, m2 = cfg.models[i], cfg.models[j]
        d = _iris_difference(iris.get((m2, m1)), iris.get((m1, m2)), z, conf)
        if d.measured and robustness_order(robustness_gap(ctx.model(m1), ctx.model(m2), z))[1]:
            diffs[f"{m1} / {m2}"] = d
    return v.DirectionEvidence(diffs) if diffs else None


def _iris_difference(r21, r12, z: float, confidence: float) -> Interval:
    """STIR(m2|m1) - STIR(m1|m2) at IRIs with its interval (the two readings' independent jackknife se)."""
    return difference_of(at_iris.value(r21, z), at_iris.value(r12, z), z, confidence)
