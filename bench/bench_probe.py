"""What the behaviour probe costs on the store-hit path: a pair served from the store, with and without it.

    python bench/bench_probe.py --source /work/shared/data/cifar10-jpg.tar.gz            # 5 runs each
    python bench/bench_probe.py --source PATH --repeats 1                                # a smoke run

Runs ``evaluate.py`` itself, in this process (the real Hydra entry point), on a pair whose results are
in the store, so that nothing is measured: by default the shipped ``vanilla_paper`` against
``vanilla_paper_s1`` at ``profile=laptop`` (served from ``zoo/store``; ``profile=cpu`` has the same
n = 100 and k = 2, only a shorter inversion budget, which a served pair never runs, and no shipped
models). A first run copies the shipped entries into the output folder's store; every timed run
after it is a local store hit. The runs alternate between the two arms:

* ``after``: the code as it is: every ``evaluate_*`` call probes both models
  (``stir.measure.call.behaviour_ids``: the four synthetic images and the first two of X tiled to the
  run's batch, at most ``PROBE_CAP`` rows, read at once with a seeded vector-Jacobian product, and
  three of them one at a time; matched against the fingerprints), its time summed by a wrapper;
* ``before``: ``behaviour_ids`` replaced by one that returns the static identities (what the store
  hit cost before issue 54).

Reported: the median wall time of ``main()`` per arm, the probe's own seconds per run, and the
probe's share of the served pair (target: under 5%), with the date and the machine's load average
(a CPU shared with other work slows both arms). Written to ``bench/out/bench_probe.json``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def entry_point():
    spec = importlib.util.spec_from_file_location("stir_entry_evaluate", REPO / "evaluate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> Dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, help="the local CIFAR-10 archive (data.source)")
    parser.add_argument("--ref", default="vanilla_paper")
    parser.add_argument("--target", default="vanilla_paper_s1")
    parser.add_argument("--profile", default="laptop")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    import torch

    import stir.measure.call as call
    from stir.models.behaviour import PROBE_CAP

    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]  # a CPU shared with other work: said beside the figures
    real = call.behaviour_ids
    spent: List[float] = []

    def timed(*a, **kw):
        t = time.perf_counter()
        try:
            return real(*a, **kw)
        finally:
            spent.append(time.perf_counter() - t)

    def static(plan, models, names, ids, taps, store):
        return ids

    evaluate = entry_point()
    with tempfile.TemporaryDirectory() as out:
        command = ["evaluate.py", f"ref={args.ref}", f"target={args.target}", f"profile={args.profile}",
                   f"data.source={args.source}", f"out_dir={out}", "logger.wandb.mode=disabled", "device=cpu"]

        def run(arm: str) -> float:
            call.behaviour_ids = timed if arm == "after" else static
            sys.argv = command
            t = time.perf_counter()
            evaluate.main()
            return time.perf_counter() - t

        run("after")  # the shipped entries into the local store, the fingerprints registered
        walls: Dict[str, List[float]] = {"before": [], "after": []}
        probes: List[float] = []
        for _ in range(args.repeats):
            for arm in ("before", "after"):
                spent.clear()
                walls[arm].append(run(arm))
                if arm == "after":
                    probes.append(sum(spent))
        call.behaviour_ids = real
        measured = sorted(p.name for p in (Path(out) / "store").glob("*/*.json"))
    before, after, probe = (statistics.median(walls["before"]), statistics.median(walls["after"]),
                            statistics.median(probes))
    result = {"command": f"python bench/bench_probe.py --source PATH --repeats {args.repeats}",
              "pair": " ".join(command[1:-4] + ["data.source=PATH"]), "repeats": args.repeats,
              "wall_before_s": round(before, 3), "wall_after_s": round(after, 3), "probe_s": round(probe, 4),
              "probe_share": round(probe / after, 4), "wall_ratio": round(after / before, 4),
              "walls": walls, "probes": probes, "entries_in_store": len(measured), "threads": 1,
              "probe_cap": PROBE_CAP, "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(),
              "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)], "torch": torch.__version__}
    out_dir = REPO / "bench" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    from stir.atomic import write_json

    write_json(out_dir / "bench_probe.json", result)
    print(json.dumps({k: v for k, v in result.items() if k not in ("walls", "probes")}, indent=1))
    return result


if __name__ == "__main__":
    main()
