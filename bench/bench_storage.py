"""What reduced-precision storage does to a shipped zoo model: its accuracy as stored against its run's,
and STIR between the run's float32 network and the stored file's (both directions, at a profile).

A model shipped with ``--dtype float16`` or ``int8`` (``stir.zoo.quantize``) computes slightly other
logits than the run that trained it. Its entry holds both accuracies (``test`` re-measured as stored,
``test_of_run``); this script adds what STIR reads: with m1 the run's float32 model and m2 the stored
one, STIR(m2|m1) and STIR(m1|m2) on the profile's images and budget, beside the plain similarity. A
value near 1 (against the 0.3-0.65 between two trained vanilla models) says the storage does not move
what the tool measures; the stored model is the one every shipped result was computed on either way.

    python bench/bench_storage.py vanilla_n45000 --runs-dir runs --source PATH [--profile laptop]

Needs the model's run folder (``--runs-dir``: where ``train.py`` wrote it, as ``zoo.runs_dir``);
~15 min at ``profile=laptop`` on one thread. Writes ``bench/out/bench_storage.json``.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any, Dict

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from stir.atomic import write_json  # noqa: E402
from stir.experiments.library import open_evaluation  # noqa: E402
from stir.measure import evaluate_pair  # noqa: E402
from stir.zoo.shipped import ShippedZoo  # noqa: E402

log = logging.getLogger("bench_storage")


def _direction(result, direction: str) -> Dict[str, Any]:
    """One direction's STIR: mean and per-draw values, its interval, floor and normalised value."""
    d = result.get(direction)
    c = d.calibration["stir"]
    return {"direction": direction, "stir": d.stir.mean, "draws": d.stir.values, "interval": [c.low, c.high],
            "floor": c.floor, "normalised": c.normalised, "agreement": d.agreement.mean if d.agreement else None}


def measure(name: str, runs_dir: str, source: str, profile: str, out_dir: str) -> Dict[str, Any]:
    """The entry's accuracies and STIR between the run's float32 model (m1) and the stored one (m2)."""
    common = (f"profile={profile}", f"data.source={source}", f"out_dir={out_dir}")
    stored = open_evaluation(*common).model(name)  # as the zoo resolves it: the shipped file, unless a local run wins
    local = open_evaluation(*common, f"zoo.runs_dir={runs_dir}")
    run = local.model(name)
    if stored.record["source"] != "shipped":
        raise SystemExit(f"bench_storage: {name} at profile {profile} resolves to a {stored.record['source']} model, "
                         "not a shipped file: is it shipped, and is there a finished run of it in ./runs?")
    if run.record["source"] != "zoo":
        raise SystemExit(f"bench_storage: no finished run of {name} in {runs_dir}: pass the folder train.py wrote it to")
    entry = next(e for e in ShippedZoo().entries() if e.sha256 == stored.record["shipped_sha256"])  # the one resolved
    dtype = entry.record["dtype"]
    if dtype == "float32":
        raise SystemExit(f"bench_storage: {name} is shipped at float32, as its run: there is nothing to compare")
    result = evaluate_pair(run.module, stored.module, local.images(stored), estimator=local.estimator, run=local.run,
                           names=(f"{name} (float32 run)", f"{name} ({dtype} stored)"))
    log.info("%s", result)
    m2m1 = result.get("m2|m1")
    return {"model": name, "profile": profile, "dtype": dtype, "test_as_stored": stored.metrics,
            "test_of_run": run.metrics, "run_identity": run.identity, "stored_identity": stored.identity,
            "n": m2m1.n, "k": m2m1.k, "similarity": result.similarity.value,
            "directions": [_direction(result, d) for d in ("m2|m1", "m1|m2")]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="a shipped zoo model stored as float16 or int8")
    parser.add_argument("--runs-dir", required=True, help="the folder train.py wrote the model's run to")
    parser.add_argument("--source", required=True, help="a CIFAR-10 copy (data.source)")
    parser.add_argument("--profile", default="laptop")
    parser.add_argument("--out", default=str(REPO / "bench" / "out"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = measure(args.name, args.runs_dir, args.source, args.profile, str(out / "bench_storage_results"))
    report["command"] = "python bench/bench_storage.py " + " ".join(sys.argv[1:])
    path = out / "bench_storage.json"
    write_json(path, report)
    log.info("wrote %s", path)


if __name__ == "__main__":
    main()
