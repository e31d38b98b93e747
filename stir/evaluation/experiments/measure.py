"""The measurements experiments share: one pair, one layer-wise pair, the example IRI grid."""
from __future__ import annotations

from pathlib import Path

from stir.evaluation.layers import evaluate_layers
from stir.evaluation.pair import evaluate_pair
from stir.evaluation.results import LayerwiseResult, PairResult
from stir.evaluation.session import Session
from stir.inversion import invert, invert_adversarial
from stir.reporting import plot_iri_grid


def pair(session: Session, ref: str, target: str, tap: str = "penultimate") -> PairResult:
    """Both directions, similarity, agreement and difficulty of (ref, target) at one tap."""
    cfg = session.cfg
    return evaluate_pair(
        session.network(ref), session.network(target), session.stir_images(ref), tap, tap,
        measure=cfg.measure, k=cfg.k, iri=cfg.iri, inversion=cfg.inversion, difficulty=cfg.difficulty, names=(ref, target),
        ids=(session.model(ref).identity, session.model(target).identity), store=session.store,
        record=session.record(ref, target),
    )


def layers(session: Session, ref: str, target: str) -> LayerwiseResult:
    """The pair at every corresponding tap (``layers.taps`` all | original | a list), with slopes over depth."""
    cfg = session.cfg
    taps = cfg.layers.taps if isinstance(cfg.layers.taps, str) else list(cfg.layers.taps)
    return evaluate_layers(
        session.network(ref), session.network(target), session.stir_images(ref), taps=taps, measure=cfg.measure,
        k=cfg.k, iri=cfg.iri, inversion=cfg.inversion, difficulty=cfg.difficulty, reduce=cfg.layers.reduce, count=cfg.layers.count,
        names=(ref, target),
        ids=(session.model(ref).identity, session.model(target).identity), store=session.store,
        record=session.record(ref, target),
    )


def iri_grid(session: Session, ref: str, target: str) -> Path:
    """A few originals beside m1's and m2's arbitrary IRIs and the adversarial IRIs of the pair."""
    cfg = session.cfg
    x = session.images(ref)[: cfg.iri_grid_images]
    m1, m2 = session.network(ref), session.network(target)
    rows = {
        f"IRIs of {ref}": invert(m1, x, "penultimate", cfg.inversion).x_prime,
        f"IRIs of {target}": invert(m2, x, "penultimate", cfg.inversion).x_prime,
    }
    if cfg.iri in ("adversarial", "both") and ref != target:
        rows[f"adversarial: {ref} matched, {target} pushed"] = invert_adversarial(
            m1, m2, x, "penultimate", "penultimate", cfg.inversion).x_prime
    return plot_iri_grid(x.cpu(), {k: v.cpu() for k, v in rows.items()}, session.out / "iri_examples.png",
                         f"Example IRIs (penultimate): {ref} and {target}", max_images=cfg.iri_grid_images)
