"""Write the measures table of docs/measures.md from the registry flags and a bench_similarity.py --new run.

    python bench/measures_doc.py     # reads bench/results/bench_similarity_new.json, rewrites the table

The flag columns come from ``stir.similarity.info(name)``; the timing columns from
the committed copy of the JSON that ``python bench/bench_similarity.py --new --threads 1`` writes
(to bench/out/; n=10000,
d=512, float32, one thread). Only the text between the two table markers changes.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import stir.similarity as sim  # noqa: E402
from stir.atomic import write_text  # noqa: E402

DOC = ROOT / "docs" / "measures.md"
BENCH = Path(__file__).resolve().parent / "results" / "bench_similarity_new.json"  # the committed run
BEGIN, END = "<!-- measures table: begin -->", "<!-- measures table: end -->"
SHORT = {"orthogonal": "O", "isotropic_scaling": "S", "translation": "T", "permutation": "P",
         "invertible_linear": "L"}


def _num(v: float) -> str:
    if v == math.inf:
        return "inf"
    if v == -math.inf:
        return "-inf"
    for name, c in (("pi/2", math.pi / 2), ("pi", math.pi), ("sqrt2", math.sqrt(2))):
        if v == c:
            return name
    return f"{v:g}"


def _timings() -> dict[str, tuple[str, str, str]]:
    if not BENCH.exists():
        return {}
    out = {}
    for r in json.loads(BENCH.read_text())["results"]:
        ours = r["ours"]
        o = f"{ours['seconds']:.2f}" if "seconds" in ours else "error"
        timed = {k: v for k, v in r["references"].items() if "seconds" in v}
        if timed:
            label = min(timed, key=lambda k: timed[k]["seconds"])
            ref = f"{timed[label]['seconds']:.2f} ({label})"
            ratio = f"{ours['seconds'] / timed[label]['seconds']:.2f}" if "seconds" in ours else "-"
        elif r["references"]:
            ref = "; ".join(f"{k}: > {v['timeout']:.0f} s" if "timeout" in v else f"{k}: error"
                            for k, v in r["references"].items())
            ratio = "-"
        else:
            ref, ratio = "-", "-"
        out[r["measure"]] = (o, ref, ratio)
    return out


def table() -> str:
    timings = _timings()
    rows = ["| measure | family | kind | range | identity | symmetric | metric | invariant to | reference "
            "implementation | ours n=10k (s) | reference n=10k (s) | ours / ref |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in sim.names():
        e = sim.info(name)
        inv = "".join(SHORT[k] for k in sim.INVARIANCES if k in e.invariances) or "-"
        opts = ", ".join(f"{k}={v}" for k, v in e.options.items())
        label = f"`{name}`" + (f" ({opts})" if opts else "")
        o, ref, ratio = timings.get(name, ("see docs/benchmarks/similarity.md", "-", "-"))
        rows.append(f"| {label} | {e.family} | {e.kind} | [{_num(e.range[0])}, {_num(e.range[1])}] | "
                    f"{'-' if e.identity is None else _num(e.identity)} | {'yes' if e.symmetric else 'no'} | "
                    f"{'yes' if e.metric else 'no'} | {inv} | {e.reference} | {o} | {ref} | {ratio} |")
    return "\n".join(rows)


def main() -> None:
    text = DOC.read_text()
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    write_text(DOC, head + BEGIN + "\n" + table() + "\n" + END + tail)


if __name__ == "__main__":
    main()
