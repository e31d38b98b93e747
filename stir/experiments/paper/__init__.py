"""Experiment kind ``paper``: every claim of Nanda et al. (ICML 2022) asked of the zoo, in one report.

The kind composes the presets the paper's claims need (``seeds``, ``relative_robustness``,
``incremental``, ``layers``, ``architectures``, ``at_methods``) as the ``suite`` kind composes its
parts: each part runs through its own kind (``pairs``, ``matrix``, ``incremental``) with the
evaluation's store, images and estimator, its tables and figures entering the report under the
part's name. What the paper kind adds:

* **Only the models that exist.** A zoo name that is neither a finished local run nor shipped in
  ``zoo/`` is not trained (unless ``train_missing=true``): the parts run on the models there are,
  and every claim whose evidence needs a missing model says "not testable here: <model> is not
  trained or shipped (<its train command>)". The report is written for what could be measured.
* **Claims judged.** Each claim's evidence (``stir.paper.verdicts``' dataclasses of ``Interval``s)
  is built from the stored results and judged by ``Claim.judge``: holds / does not hold / not
  testable here, with the reason and the numbers.
* **Seed pairs.** Where a recipe has several training seeds (``recipes``: vanilla, vanilla_s1,
  vanilla_s2, ...), a recipe's value is ``stir.measure.seeds.seed_estimate`` over its seed pairs
  (random effects: between-seed-pair spread and image-level variance together). The pairs of one
  recipe share models ((a, b), (a, c), (b, c)), so they are not independent: the interval is then
  somewhat too narrow, and the report says so. One seed pair: the image-level interval of that pair,
  "one seed pair: between-seed spread not measured".
* **Ours beside theirs.** Table 1 with the published values (``stir.paper.claims``), each of ours
  with its calibrated reading (floor, normalised value with its interval, p-value).

One module per claim group, as ``stir.paper.claims`` groups the claims: ``parts`` (which models
exist, each part's config), ``table1`` (claims 1-6), ``table2`` (claim 7), ``figure1`` (claim 8),
``layers`` (claims 9, 10: figures 2-3, 6-7; ``cross_dataset``: claim 10's CIFAR-10 / CIFAR-100
pairs), ``architectures`` (claim 11: figures 4, 8), ``methods`` (claim 12: figures 5, 9), ``ablation``
(the recipe question), ``judge`` (the verdicts), ``scorecard`` (the rules set after the data and claims 13-23,
the report's first table); ``readings`` holds what they share, ``stored`` the ``stored_only`` cut,
``delta`` claim 6's Appendix C Delta (``python -m stir.experiments.paper.delta``).
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Dict, List

from stir.experiments import at_iris_table
from stir.experiments.paper import at_iris, figure1, judge, parts, scorecard, table1, table2
from stir.experiments.paper.ablation import recipe_ablation
from stir.experiments.paper.architectures import figures4_8
from stir.experiments.paper.judge import unstored_rows
from stir.experiments.paper.layers import figures2_3
from stir.experiments.paper.methods import figures5_9
from stir.experiments.paper.parts import PARTS, Availability, extra_objectives
from stir.experiments.paper.readings import DISJOINT, NAN, NOT_STORED, ONE_PAIR, SHARED, Evidence, confidence_z
from stir.experiments.paper.stored import stored_parts
from stir.experiments.context import Context
from stir.experiments.paper_config import PaperConfig  # noqa: F401  (the kind's config, torch-free)
from stir.experiments.registry import Kind, Unit, get, register
from stir.inversion.config import ADVERSARIAL_OBJECTIVES
from stir.paper import CLAIMS, NOT_RUN, Verdict
from stir.paper import rules
from stir.reporting import Report, Table
from stir.store import NotStored

log = logging.getLogger(__name__)


def run(ctx: Context, cfg: PaperConfig) -> Report:
    report = Report(cfg.description or "The STIR paper's claims (Nanda et al., ICML 2022), reproduced",
                    notes_below_first_table=True)  # the scorecard first, its 2,400 words of notes below it
    ok = Availability(ctx)
    if cfg.stored_only:  # measure nothing: every result from the store, a miss raises NotStored
        ctx = dataclasses.replace(ctx, store=ctx.store.as_read_only())
    chosen = parts.parts(ctx, cfg, ok)
    chosen, left_out, cut, cut_models = stored_parts(chosen) if cfg.stored_only else (chosen, {}, [], {})
    for name, (part, pctx) in list(chosen.items()):
        try:
            sub = get(part.kind).run(pctx, part)
        except NotStored:
            left_out[name] = "not all of its measurements are in the results store yet"
            del chosen[name]
            continue
        report.notes += [f"{name}: {note}" for note in sub.notes]
        report.tables.update({f"{name}/{table}": t for table, t in sub.tables.items()})
        report.figures.update({f"{name}/{figure}": f for figure, f in sub.figures.items()})
        report.summary.update({f"{name}/{key}": value for key, value in sub.summary.items()})
    evidence: Dict[int, Evidence] = {}
    adversarial = {o: chosen[f"seeds_{o}"][1] for o in extra_objectives(ctx, cfg) if f"seeds_{o}" in chosen}
    seeds_ctx = chosen.get("seeds", (None, None))[1]
    t1, recipes, ev = table1.table1(ctx, cfg, ok, seeds_ctx, adversarial)
    evidence.update(ev)
    iris = at_iris.measure(ctx, cfg, ok, seeds_ctx)  # Table 1 again where the X' are IRIs (issue 53)
    t1 = at_iris.with_column(t1, iris, confidence_z(ctx))
    iris2 = at_iris.measure_table2(ctx, cfg, chosen.get("relative_robustness"))  # Table 2's pairs at IRIs
    t2, evidence[7] = table2.table2(ctx, chosen.get("relative_robustness"), iris2)
    f1, evidence[8] = figure1.figure1(ctx, cfg, ok, chosen.get("incremental"))
    f2, ev = figures2_3(ctx, cfg, ok, chosen.get("layers"))
    evidence.update(ev)
    f4, evidence[11] = figures4_8(ctx, cfg, chosen.get("architectures"), ok)
    f5, evidence[12] = figures5_9(ctx, cfg, ok, chosen.get("at_methods"))
    ablation = recipe_ablation(ctx, cfg, ok, chosen.get("recipe_ablation"))
    for name, cut_out in cut_models.items():  # each claim the matrix feeds says which models it lacks
        for number in PARTS[name]:
            if evidence.get(number) is not None:
                evidence[number].notes.append(f"{NOT_STORED}: {', '.join(cut_out)}")
    extra = scorecard.extra_evidence(ctx, cfg, ok, chosen, evidence)
    layer_wise = extra.pop(12)
    evidence.update(extra)
    evidence = {k: e for k, e in evidence.items() if e is not None}
    verdicts = judge.judge(cfg, evidence, ok, left_out, unstored_rows(ctx, cfg, ok, chosen) if cfg.stored_only else {})
    verdicts[15] = (Verdict(NOT_RUN, f"not measured in this report: {scorecard.RBF_COMMAND}"), [])
    info = scorecard.revise(ctx, cfg, chosen, verdicts, {**evidence, "12_layers": layer_wise})
    graded_rows, graded, why_not = table2.graded_from_parts(ctx, cfg, chosen, ok)
    graded_verdict = f"{graded.outcome}: {graded.reason}" if graded else f"not measured in this report: {why_not}"
    if graded_rows:  # ours beside Table 2's differences in the scorecard
        info[7]["graded"] = "; ".join(f"{r['pair']} {r['difference']} (position {r['position']})" for r in graded_rows)
    if graded is not None and graded.numbers.get("direction"):  # rules.GRADED's "direction reproduced"
        info[7]["direction"] = graded.numbers["direction"]
    scorecard_verdicts = dict(verdicts)
    info[7]["old"] = f"Table 2's models (equally robust AT models dropped): {verdicts[7][0].outcome}: {verdicts[7][0].reason[:200]}"
    scorecard_verdicts[7] = ((graded, verdicts[7][1]) if graded else
                             (Verdict(NOT_RUN, "graded family: " + graded_verdict), verdicts[7][1]))
    evidence[12] = layer_wise if layer_wise.evidence is not None else evidence.get(12)
    card = scorecard.scorecard(scorecard_verdicts, evidence, info, table2.graded_power_text())
    sections = scorecard.sections(scorecard_verdicts, info, graded_verdict)
    # One source for each verdict (issue 66): the claims table, the title, the notes and the summary read the
    # scorecard's words; the verdict function's outcome is kept beside as "outcome".
    by_claim = {row["claim"]: row for row in card}
    claims = []
    for c in CLAIMS:
        vd, notes = scorecard_verdicts[c.number]
        claims.append({"claim": c.number, "where": c.where, "statement": c.statement,
                       "verdict": by_claim[c.number]["verdict"], "outcome": vd.outcome,
                       "reason": vd.reason + "".join(f" ({n})" for n in notes)})
        report.summary[f"claim{c.number}/holds"] = 1.0 if by_claim[c.number]["verdict"] == rules.HOLDS_W else (
            NAN if by_claim[c.number]["verdict"] in (rules.NOT_TESTABLE_W, rules.NOT_MEASURED_W) else 0.0)
    counts = scorecard.verdict_counts(card)
    line = scorecard.scorecard_line(card)
    report.title = f"{report.title}: {line}"  # the scorecard's words, as its table below
    report.summary["claims/hold"] = float(counts[rules.HOLDS_W])
    report.summary["claims/not_testable"] = float(counts[rules.NOT_TESTABLE_W])
    report.summary["claims/do_not_hold"] = float(sum(n for w, n in counts.items() if w not in (
        rules.HOLDS_W, rules.NOT_TESTABLE_W, rules.NOT_MEASURED_W)))
    report.summary["claims/not_run"] = float(counts[rules.NOT_MEASURED_W])
    iris_verdicts = (at_iris.verdicts(ctx, cfg, iris, seeds_ctx, verdicts,
                                      table2.at_iris_evidence(ctx, chosen.get("relative_robustness"), iris2))
                     if iris or iris2 else [])
    changed = [str(r["claim"]) for r in iris_verdicts if r["changes"] == "yes"]
    iris_line = ([f"at IRIs (table1_at_iris_verdicts): claims 1-3 and 7 (Table 2's models) judged again on STIR at IRIs: "
                  + (f"the verdict of claim(s) {', '.join(changed)} changes" if changed else "no verdict changes")]
                 if iris_verdicts else [])
    shown = {"scorecard": card, "claim_sections": sections, "claims": claims, "table2_graded": graded_rows, "table1": t1,
             "table1_at_iris_verdicts": iris_verdicts, "table1_at_iris": at_iris.rows(ctx, cfg, ok, iris, seeds_ctx) if iris else [],
             "table1_recipes": recipes, "table2": t2, "figure1": f1,
             "figures2_3_6_7": f2, "figures4_8": f4, "figures5_9": f5, "recipe_ablation": ablation}
    shown["missing_models"] = [{"model": name, "why": "not trained or shipped", "train command": ok.command(name)}
                               for name in sorted(ok.missing)]
    paper_tables = {name: Table(rows) for name, rows in shown.items() if rows}
    paper_tables["scorecard"].headline = Table(card)  # the README's first table
    paper_tables["claims"] = Table(claims, display=[{**c, "reason": scorecard._clip(c["reason"])} for c in claims])
    report.tables = {**paper_tables, **report.tables}  # the paper's tables first, the parts' after
    missing = sorted(ok.missing)
    report.notes = [f"scorecard: {line}"] + iris_line + ["method: a recipe's value is the random-effects estimate over its seed pairs "
                    "(stir.measure.seeds.seed_estimate); " + SHARED + "; AT vs vanilla: " + DISJOINT
                    + f"; with one pair: {ONE_PAIR}",
                    (f"store: {ctx.store.hits} result(s) served from the store, nothing measured (experiment.stored_only="
                     f"true: {ctx.store.misses} looked up and not there yet)" if cfg.stored_only else
                     f"store: {ctx.store.hits} result(s) served from the store, {ctx.store.misses} measured now")] + cut + \
                   ([f"not trained or shipped here (train_missing=false: nothing was trained): {', '.join(missing)}"]
                    if missing else []) + report.notes
    return report


def units(ctx: Context, cfg: PaperConfig) -> List[Unit]:
    """Every part's units on the models that exist, part by part (none with ``stored_only``: nothing
    is measured)."""
    out: List[Unit] = []
    if cfg.stored_only:
        return out
    for name, (part, pctx) in parts.parts(ctx, cfg, Availability(ctx)).items():
        out += [Unit(f"{name}: {u.what}", u.call) for u in get(part.kind).units(pctx, part)]
    return out


def _check(cfg: PaperConfig) -> None:
    from stir.config.validate import ConfigError, check_choice
    from stir.measure.plan import check_iri

    try:
        check_iri(cfg.seeds_iri, "experiment.seeds_iri")
    except ValueError as err:
        raise ConfigError(str(err)) from None
    for part in cfg.skip:
        check_choice("experiment.skip", part, tuple(PARTS))
    check_choice("experiment.at_iris", cfg.at_iris, at_iris_table.CHOICES)
    for objective in cfg.stir_adv_objectives:
        check_choice("experiment.stir_adv_objectives", objective, ADVERSARIAL_OBJECTIVES)
    if not 0 < cfg.ablation_margin < 1:
        raise ConfigError(f"experiment.ablation_margin={cfg.ablation_margin!r} must be in (0, 1): the equivalence "
                          "margin of the recipe ablation, in units of STIR")
    for arm, seeds in cfg.ablation.items():
        if len(seeds) < 2:
            raise ConfigError(f"experiment.ablation.{arm} names {len(seeds)} model(s): an arm needs two or more "
                              "training seeds (a seed pair is two of them)")
    for setting, m in cfg.methods.items():
        if set(m) != {"at", "trades", "mart"}:
            raise ConfigError(f"experiment.methods.{setting} must name at, trades and mart, got {sorted(m)}")
        lengths = {method: len(names) for method, names in m.items()}
        if len(set(lengths.values())) != 1 or not min(lengths.values()):
            raise ConfigError(f"experiment.methods.{setting}: at, trades and mart each name their training seeds, as "
                              f"many of each (seed i of each together), got {lengths}: e.g. {{at: [at, at_s1], trades: "
                              "[trades, trades_s1], mart: [mart, mart_s1]}")
    for setting, families in cfg.layer_settings.items():
        if len(setting.split(" ")) != 2 or any(len(p) != 2 for p in families.values()):
            raise ConfigError(f"experiment.layer_settings: '<data set> <architecture>': {{family: [m1, m2]}}, got "
                              f"{setting!r}: {families}")


register(Kind("paper", PaperConfig, run, units, _check))
