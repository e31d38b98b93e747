"""Two inversion processes on one CPU: how OpenMP's waiting policy and the thread count decide the cost.

    python bench/bench_contention.py            # ~4 min on 2 cores
    python bench/bench_contention.py --quick    # 20 steps, ~1 min

A measuring process times two consecutive ``invert_draws`` calls (ResNet18 width 8, batch norms
not the identity, 32 images x 2 draws, ``--steps`` faithful steps, the shipped defaults) in a fresh
interpreter, once on the idle machine and once while a second process runs the same kind of
inversion in a loop, for each setting:

    default          both processes use every core, libgomp's default waiting (threads spin a while)
    passive          OMP_WAIT_POLICY=PASSIVE in both (waiting threads sleep at once)
    spincount 2000   GOMP_SPINCOUNT=2000 in both (spin briefly, then sleep)
    1 thread each    OMP_NUM_THREADS=1 in both (no more threads than cores)

Each case runs in fresh subprocesses, so the first call includes what a new process pays (fresh
memory, first use of each convolution shape). Results: bench/out/bench_contention.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `python bench/bench_contention.py`: this checkout's stir
    sys.path.insert(0, str(REPO))

from stir.atomic import write_text  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
SETTINGS = {
    "default": {},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
    "spincount 2000": {"GOMP_SPINCOUNT": "2000"},
    "1 thread each": {"OMP_NUM_THREADS": "1"},
}

# The inversion both processes run: the measuring one twice (timed), the loading one until killed.
CHILD = """
import sys, time, json, torch
sys.path.insert(0, {repo!r})
from bench.bench_cost import images, network
from stir.inversion import ExecutionConfig, InversionConfig, invert_draws
m, x = network(8), images(32)
cfg, run = InversionConfig(steps={steps}, record_steps=()), ExecutionConfig(warn_below=0.0)
if {load}:
    while True:
        invert_draws(m, [x] * 2, "penultimate", cfg, run=run)
times = []
for _ in range(2):
    start = time.perf_counter()
    invert_draws(m, [x] * 2, "penultimate", cfg, run=run)
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def child(steps: int, load: bool, env: Dict[str, str]) -> subprocess.Popen:
    code = CHILD.format(repo=str(REPO), steps=steps, load=load)
    return subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def measure(steps: int, env: Dict[str, str], contended: bool, warm_up: float) -> List[float]:
    """Seconds of the measuring process's first and second call, with or without the loading process."""
    load = child(steps, True, env) if contended else None
    try:
        if load is not None:
            time.sleep(warm_up)  # the loading process is inverting before the measuring one starts
        out, _ = child(steps, False, env).communicate()
    finally:
        if load is not None:
            load.kill()
            load.wait()
    return [round(t, 2) for t in json.loads(out.strip().splitlines()[-1])]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warm-up", type=float, default=8.0, help="seconds the loading process runs first")
    p.add_argument("--quick", action="store_true", help="20 steps")
    args = p.parse_args()
    steps = 20 if args.quick else args.steps
    rows = []
    for name, env in SETTINGS.items():
        idle = measure(steps, env, contended=False, warm_up=args.warm_up)
        busy = measure(steps, env, contended=True, warm_up=args.warm_up)
        rows.append({"setting": name, "idle_first_s": idle[0], "idle_second_s": idle[1],
                     "contended_first_s": busy[0], "contended_second_s": busy[1]})
        print(rows[-1], flush=True)
    OUT.mkdir(exist_ok=True)
    write_text(OUT / "bench_contention.json", json.dumps({"steps": steps, "cpus": os.cpu_count(), "rows": rows},
                                                         indent=2))
    print("| setting | idle: 1st call (s) | idle: 2nd | with a 2nd inversion process: 1st | 2nd |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['setting']} | {r['idle_first_s']} | {r['idle_second_s']} | {r['contended_first_s']} | "
              f"{r['contended_second_s']} |")


if __name__ == "__main__":
    main()
