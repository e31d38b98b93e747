"""What the README's tour and its small runs cost, measured: the times the README states.

    python bench/bench_tour.py --data PATH [--own] [--realnets]   # PATH: the CIFAR-10 copy the zoo was trained on
    python bench/bench_tour.py --data PATH --realnets --skip-tour   # the 20-step run again, the tour's rows kept

In a fresh folder, the README's tour as written (its ``<!-- tour -->`` commands: shipped models,
served from ``zoo/store``, PATH replaced by ``--data``), then the README's library example, then one
served pair again (the first command, its data cache now warm): the unit the tour is read in, since
a loaded machine's minutes are noise and its ratios are not. ``--own``: the "train your own" block
too (``<!-- train-your-own -->``: two profile=cpu trainings and their evaluation, minutes), each
given ``data.source=PATH``. Each command is timed from start to exit. ``--realnets``: a 20-step
``evaluate.py`` on the real ResNet20 seed pair (``ref=r20 target=r20_b inversion.steps=20``), timed,
with the time its inversions and its difficulty walks took read from its progress lines: a small
run stays small.

Every record says the machine (CPU count, model name), the threads each process had, and the load
average before and after each command: a loaded machine is slower, and the README says on what its
times were measured. Results: bench/results/bench_tour.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from stir.atomic import write_text  # noqa: E402

log = logging.getLogger("bench_tour")
README = (REPO / "README.md").read_text()


def block(marker: str) -> List[str]:
    """The commands of the README's block after ``marker``, comments stripped (as tests/test_readme_tour.py reads them)."""
    text = README.split(marker, 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in text.strip().splitlines() if line.split("#", 1)[0].strip()]


def tour_commands() -> List[str]:
    return block("<!-- tour -->")


def library_example() -> str:
    return README.split("## As a library", 1)[1].split("```python", 1)[1].split("```", 1)[0]


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children so far."""
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def timed(words: List[str], cwd: Path, env: Dict[str, str], label: str) -> Dict[str, Any]:
    """Run one command to its exit: wall seconds, CPU seconds (user + system: what another process on
    the machine does not inflate, unlike the wall), exit status, load average before and after."""
    load, cpu = os.getloadavg()[0], children_cpu()
    start = time.monotonic()
    done = subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True)
    seconds, cpu = time.monotonic() - start, children_cpu() - cpu
    log.info("%s: %.0f s, %.0f CPU s (rc %d, load %.1f -> %.1f)", label, seconds, cpu, done.returncode, load,
             os.getloadavg()[0])
    if done.returncode != 0:
        raise SystemExit(f"{label} failed (rc {done.returncode}):\n{done.stderr[-3000:]}")
    return {"command": label, "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1), "load_before": round(load, 2),
            "load_after": round(os.getloadavg()[0], 2), "output": done.stdout + done.stderr}


def tour(data: str, work: Path, env: Dict[str, str], own: bool) -> List[Dict[str, Any]]:
    """The tour's commands, the library example and a served pair (the unit), timed; ``ratio`` of each
    row is its seconds over the served pair's."""
    rows = []
    commands = tour_commands() + (block("<!-- train-your-own -->") if own else [])
    for command in commands:
        words = [w.replace("PATH", data) for w in shlex.split(command)]
        if words[0] != "python":
            continue  # `cat` of the report
        extra = [] if any(w.startswith("data.source=") for w in words) else [f"data.source={data}"]
        rows.append(timed([sys.executable, str(REPO / words[1]), *words[2:], *extra], work, env, command))
    code = library_example().replace("PATH", data)
    rows.append(timed([sys.executable, "-c", code], work, env, "the README's library example"))
    first = [w.replace("PATH", data) for w in shlex.split(tour_commands()[0])]
    unit = timed([sys.executable, str(REPO / first[1]), *first[2:]], work, env, "a served pair (the first command again)")
    rows.append(unit)
    for row in rows:
        row["ratio"] = round(row["seconds"] / unit["seconds"], 2)
    return rows


def phase_seconds(output: str) -> Dict[str, float]:
    """Seconds of the inversions and of the difficulty walks, from their last progress lines
    (``desc: done (N image-step) in 2m10s``; work under 5 s that logged no line is not counted)."""
    total: Dict[str, float] = {"inversions": 0.0, "walks": 0.0}
    for line in output.splitlines():
        match = re.search(r"(inverting|continuing|difficulty walk).*: done \([^)]*\) in (?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?",
                          line)
        if match:
            h, m, s = (int(g) if g else 0 for g in match.groups()[1:])
            total["walks" if match.group(1) == "difficulty walk" else "inversions"] += 3600 * h + 60 * m + s
    return total


def realnets(data: str, work: Path, env: Dict[str, str]) -> Dict[str, Any]:
    words = ["ref=r20", "target=r20_b", "profile=cpu", "inversion.steps=20", f"data.source={data}",
             "logger.wandb.mode=disabled"]
    row = timed([sys.executable, str(REPO / "evaluate.py"), *words], work, env, "evaluate.py " + " ".join(words))
    row.update(phase_seconds(row["output"]))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a local CIFAR-10 copy (image-folder tree or a tar of one)")
    parser.add_argument("--own", action="store_true", help="also the README's train-your-own block (minutes)")
    parser.add_argument("--realnets", action="store_true", help="also the 20-step run on the real ResNet20 pair")
    parser.add_argument("--skip-tour", action="store_true", help="keep the tour's rows of the last --out record")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1)))
    parser.add_argument("--out", default=str(REPO / "bench/results/bench_tour"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory(prefix="stir-tour-") as folder:
        work = Path(folder)
        if args.skip_tour:  # the tour's rows as last measured, with their own machine and load
            rows = json.loads(Path(args.out + ".json").read_text())["tour"]
        else:
            rows = tour(str(Path(args.data).resolve()), work, env, args.own)
        extra = realnets(str(Path(args.data).resolve()), work, env) if args.realnets else None
    kept = extra is None and Path(args.out + ".json").is_file()
    if kept:  # the 20-step row as last measured, kept (with the machine it was measured on)
        last = json.loads(Path(args.out + ".json").read_text())
        extra = last.get("realnets_20_steps")
        if extra is not None:
            extra = {**extra, "machine": extra.get("machine", last.get("machine"))}
    record = {"machine": {"cpus": os.cpu_count(), "cpu": cpu_name(), "threads": args.threads,
                          "python": platform.python_version()},
              "tour": [{k: v for k, v in r.items() if k != "output"} for r in rows],
              "realnets_20_steps": None if extra is None else {k: v for k, v in extra.items() if k != "output"}}
    write_text(Path(args.out + ".json"), json.dumps(record, indent=1) + "\n")
    lines = [f"# The README's tour, timed ({record['machine']['cpus']} CPUs, {record['machine']['cpu']}, "
             f"OMP_NUM_THREADS={args.threads})", "",
             "Ratio: the command's time over a served pair's (the tour's first command run again).", "",
             "| command | CPU seconds (one thread) | wall seconds | ratio to a served pair | load before -> after |",
             "|---|---|---|---|---|"]
    lines += [f"| `{r['command']}` | {r.get('cpu_seconds', float('nan')):.0f} | {r['seconds']:.0f} | "
              f"{r.get('ratio', float('nan')):.2f} | {r['load_before']:.1f} -> {r['load_after']:.1f} |" for r in record["tour"]]
    zoo = [r for r in record["tour"] if r["command"] in tour_commands()]
    if zoo:
        lines += ["", f"The tour's commands from the shipped zoo together: {sum(r['seconds'] for r in zoo):.0f} s "
                  f"({sum(r['ratio'] for r in zoo):.1f} served pairs)."]
    if extra is not None:
        lines += ["", f"20-step `evaluate.py` on the real ResNet20 pair: {extra['seconds']:.0f} s, of which "
                  f"{extra['inversions']:.0f} s inversions and {extra['walks']:.0f} s difficulty walks "
                  f"(load {extra['load_before']:.1f} -> {extra['load_after']:.1f})"
                  + (f"; measured earlier, on {extra['machine'].get('cpu')}." if kept and extra.get("machine") else ".")]
    write_text(Path(args.out + ".md"), "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
