"""Benchmark of stir.similarity against the textbook n x n formulas, in one run.

Measures ``linear_cka``, ``linear_cka_debiased`` and ``procrustes`` on random
float32 representations x, y (n, d) at (n, d) = (2000, 512), (10000, 512) and
(1000, 65536) (a flattened early ResNet feature map), against a plain
implementation of the textbook formula with an explicit centring matrix
H = I - 11^T/n, computed in the input dtype, the way the published STIR code
computes CKA (three HSIC calls, each building and centring both Gram matrices).

Each (measure, implementation, n, d) case runs in a fresh subprocess, so its
peak memory is its own: reported as the growth of the process's peak RSS
(``resource.getrusage(...).ru_maxrss``) over the peak after the inputs were
built and a tiny warm-up call ran (on CUDA: ``torch.cuda.max_memory_allocated``
over the inputs). Time is the best of ``--repeats`` calls (fewer once the calls
of a case have taken 20 s). Baselines that would take minutes or not fit in memory
are skipped and say so; ``--full`` runs the slow ones anyway.

    python bench/bench_similarity.py            # ~3 min on 2 CPU cores
    python bench/bench_similarity.py --quick    # small sizes, a smoke test
    python bench/bench_similarity.py --device cuda

A second table (issue 12) times ``linear_cka`` side by side with the four-line
feature-space form in numpy (centre, three d x d products, norms) on the same
float64 inputs at n=10000, d=512, in one process, alternating the two calls
(ABAB...) and reporting the median of each, their ratio and the value
difference. It runs in its own subprocess with torch's threads and numpy's BLAS
threads both set to ``--threads`` (OPENBLAS_NUM_THREADS etc.):

    python bench/bench_similarity.py --threads 2 --numpy-only   # only the side-by-side table

A third table (issue 24) times every measure added with the registry flags
against the fastest public implementation, each in its own subprocess, the
reference ones in the reference environment (``--refs-python``, with the git
snapshots of ReSi, netrep and platonic-rep under ``--refs-src``; see
bench/similarity_refs.py), on the same float32 inputs at n=10000, d=512, one
thread each, reporting ours / reference:

    python bench/bench_similarity.py --new --threads 1            # ~40 min on 2 CPU cores
    python bench/bench_similarity.py --new --threads 1 --quick    # n=1000, d=64: ~1 min

The table goes to stdout and, with the raw figures, to bench/out/bench_similarity.json
(``--new``: bench/out/bench_similarity_new.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = Path(__file__).resolve().parent / "out"
MEASURES = ("linear_cka", "linear_cka_debiased", "procrustes")
SIZES = ((2000, 512), (10000, 512), (1000, 65536))
QUICK_SIZES = ((500, 64), (1000, 64), (200, 4096))
NUMPY_SIZES = ((10000, 512),)  # linear CKA against numpy's feature form (issue 12)
QUICK_NUMPY_SIZES = ((2000, 64),)


# ---------------------------------------------------------------- textbook baselines


def _centering(k, h):
    return h @ k @ h


def baseline_linear_cka(x, y):
    """Textbook linear CKA: HSIC(K, L) = sum(HKH * HLH), three HSIC calls, explicit H."""
    import torch

    n = x.shape[0]
    h = torch.eye(n, dtype=x.dtype, device=x.device) - torch.ones(n, n, dtype=x.dtype, device=x.device) / n

    def hsic(a, b):
        return torch.sum(_centering(a @ a.T, h) * _centering(b @ b.T, h))

    return hsic(x, y) / (torch.sqrt(hsic(x, x)) * torch.sqrt(hsic(y, y)))


def baseline_linear_cka_debiased(x, y):
    """Textbook Song et al. unbiased HSIC with explicit zero-diagonal Grams and tr(K~ L~) as a matrix product."""
    import torch

    n = x.shape[0]
    ones = torch.ones(n, 1, dtype=x.dtype, device=x.device)

    def hsic(a, b):
        k, l = a @ a.T, b @ b.T
        k = k - torch.diag(torch.diag(k))
        l = l - torch.diag(torch.diag(l))
        t1 = torch.trace(k @ l)
        t2 = (ones.T @ k @ ones) * (ones.T @ l @ ones) / ((n - 1) * (n - 2))
        t3 = 2.0 / (n - 2) * (ones.T @ k @ l @ ones)
        return (t1 + t2 - t3).squeeze() / (n * (n - 3))

    return hsic(x, y) / torch.sqrt(hsic(x, x) * hsic(y, y))


def baseline_procrustes(x, y):
    """Textbook Procrustes similarity: explicit H centring, unit Frobenius norm, full SVD nuclear norm."""
    import torch

    n = x.shape[0]
    h = torch.eye(n, dtype=x.dtype, device=x.device) - torch.ones(n, n, dtype=x.dtype, device=x.device) / n
    xc, yc = h @ x, h @ y
    xc, yc = xc / torch.linalg.norm(xc), yc / torch.linalg.norm(yc)
    return torch.linalg.matrix_norm(xc.T @ yc, ord="nuc")


BASELINES = {
    "linear_cka": baseline_linear_cka,
    "linear_cka_debiased": baseline_linear_cka_debiased,
    "procrustes": baseline_procrustes,
}


def baseline_skip_reason(measure: str, n: int, d: int) -> str | None:
    """Why the baseline is skipped at this size (None: run it)."""
    if measure == "procrustes" and d * d * 4 > 4 * 2**30:
        return f"needs the {d}x{d} cross matrix ({d * d * 4 / 2**30:.0f} GiB float32) and its SVD"
    if measure in ("linear_cka", "linear_cka_debiased") and n >= 5000:
        # Six n x n x n products (centring or tr(K~ L~)): ~1e13 flops at n = 10000.
        return f"O(n^3) with n={n}: six {n}x{n} matrix products, minutes on CPU"
    return None


def numpy_linear_cka(x, y):
    """Linear CKA in numpy's feature form: centre, three d x d products, Frobenius norms."""
    import numpy as np

    xc = x - x.mean(0)
    yc = y - y.mean(0)
    num = np.linalg.norm(xc.T @ yc) ** 2
    den = np.linalg.norm(xc.T @ xc) * np.linalg.norm(yc.T @ yc)
    return num / den


# ---------------------------------------------------------------- one case, in a child process


def _inputs(n: int, d: int, device: str):
    import torch

    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=g)
    y = torch.randn(n, d, generator=g).add_(x, alpha=0.5)  # related, float32; in place: no temporaries
    return x.to(device), y.to(device)


def run_case(measure: str, impl: str, n: int, d: int, repeats: int, device: str, threads: int) -> dict:
    import torch

    import stir.similarity as sim

    if threads > 0:
        torch.set_num_threads(threads)

    fn = sim.get(measure) if impl == "ours" else BASELINES[measure]
    x, y = _inputs(n, d, device)
    fn(x[:64, :32], y[:64, :32])  # warm-up: lazy BLAS/LAPACK initialisation is not timed
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        mem0 = torch.cuda.memory_allocated()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    times, value = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = float(fn(x, y))
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        if sum(times) > 20.0:  # slow case: fewer repeats
            break
    if cuda:
        peak_mib = (torch.cuda.max_memory_allocated() - mem0) / 2**20
    else:
        peak_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    return {"seconds": min(times), "value": value, "peak_extra_mib": peak_mib, "runs": len(times)}


def run_vs_numpy(n: int, d: int, repeats: int, threads: int, pause: float = 0.0) -> dict:
    """linear_cka against numpy_linear_cka on the same float64 inputs, calls alternating (ABAB...).

    ``pause`` seconds of sleep before each timed call let the other library's
    idle BLAS/OpenMP threads stop spinning (they busy-wait for a while after a
    call and would otherwise share the cores with the next call).
    """
    import numpy as np
    import torch

    import stir.similarity as sim

    if threads > 0:
        torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = torch.randn(n, d, generator=g, dtype=torch.float64).add_(x, alpha=0.5)
    xn, yn = x.numpy(), y.numpy()  # the same memory
    calls = {"ours": lambda: float(sim.linear_cka(x, y)), "numpy": lambda: float(numpy_linear_cka(xn, yn))}
    for fn in calls.values():  # warm-up (lazy BLAS initialisation, allocator)
        fn()
    times: dict[str, list[float]] = {k: [] for k in calls}
    values: dict[str, float] = {}
    for _ in range(repeats):
        for name, fn in calls.items():
            if pause > 0:
                time.sleep(pause)
            t0 = time.perf_counter()
            values[name] = fn()
            times[name].append(time.perf_counter() - t0)
    med = {k: float(np.median(v)) for k, v in times.items()}
    return {"ours": med["ours"], "numpy": med["numpy"], "ratio": med["ours"] / med["numpy"],
            "value_ours": values["ours"], "value_numpy": values["numpy"],
            "diff": abs(values["ours"] - values["numpy"]), "times": times, "repeats": repeats,
            "torch_threads": torch.get_num_threads()}


# Measures whose value is compared through another name (ReSi's gulp returns the squared distance).
NEW_OURS_NAME = {"gulp": "measure/resi/gulp"}
NEW_SIZES = ((10000, 512),)
QUICK_NEW_SIZES = ((1000, 64),)


def run_ref_case(key: str, n: int, d: int, repeats: int, threads: int, src: str) -> dict:
    """One reference call timed like run_case, in the reference environment (numpy float32 inputs)."""
    import torch

    import similarity_refs  # bench/ is this script's folder, first on sys.path

    if threads > 0:
        torch.set_num_threads(threads)
    fn = similarity_refs.build(key, Path(src))
    x, y = _inputs(n, d, "cpu")
    xn, yn = x.numpy(), y.numpy()
    fn(xn[:64, :32], yn[:64, :32])  # warm-up
    times, value = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = float(fn(xn, yn))
        times.append(time.perf_counter() - t0)
        if sum(times) > 20.0:
            break
    return {"seconds": min(times), "value": value, "runs": len(times)}


def _spawn_ref(key: str, n: int, d: int, args: argparse.Namespace) -> dict:
    cmd = [args.refs_python, __file__, "--case-ref", f"{key},{n},{d}", "--repeats", str(args.repeats),
           "--threads", str(args.threads), "--refs-src", args.refs_src]
    env = dict(os.environ)
    if args.threads > 0:
        for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
            env[var] = str(args.threads)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.ref_timeout)
    except subprocess.TimeoutExpired:
        return {"timeout": args.ref_timeout}
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def new_measures_table(args: argparse.Namespace) -> tuple[list[str], list[dict]]:
    """Rows of the new-measures vs references table, printed as they come."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's stir, as the children get
    import similarity_refs

    import stir.similarity as sim

    rows = ["| measure | n | d | ours (s) | fastest reference | reference (s) | ours / reference | \\|value diff\\| |",
            "|---|---|---|---|---|---|---|---|"]
    records = []
    measures = [m for m in sim.names() if m in similarity_refs.REFERENCES or m == "cka_euclidean"]
    if args.only:
        measures = [m for m in measures if m in args.only.split(",")]
    for n, d in QUICK_NEW_SIZES if args.quick else NEW_SIZES:
        for measure in measures:
            ours = _spawn(NEW_OURS_NAME.get(measure, measure), "ours", n, d, args)
            refs = {label: _spawn_ref(key, n, d, args) for label, key in similarity_refs.REFERENCES.get(measure, [])}
            records.append({"measure": measure, "n": n, "d": d, "ours": ours, "references": refs})
            timed = {k: v for k, v in refs.items() if "seconds" in v}
            o_s = f"{ours['seconds']:.3f}" if "seconds" in ours else f"error: {ours.get('error')}"
            if timed:
                label = min(timed, key=lambda k: timed[k]["seconds"])
                best = timed[label]
                ratio = f"{ours['seconds'] / best['seconds']:.2f}" if "seconds" in ours else "-"
                diff = f"{abs(best['value'] - ours['value']):.1e}" if "seconds" in ours else "-"
                r_s = f"{best['seconds']:.3f}"
            elif refs:
                label = ", ".join(f"{k}: " + (f"> {v['timeout']:.0f} s" if "timeout" in v else f"error {v.get('error')}")
                                  for k, v in refs.items())
                r_s, ratio, diff = "-", "-", "-"
            else:
                label, r_s, ratio, diff = "(no public implementation)", "-", "-", "-"
            rows.append(f"| {measure} | {n} | {d} | {o_s} | {label} | {r_s} | {ratio} | {diff} |")
            sys.stdout.write(rows[-1] + "\n")
            sys.stdout.flush()
    return rows, records


def _child(args: argparse.Namespace) -> None:
    if args.case_ref:
        key, n, d = args.case_ref.split(",")
        result = run_ref_case(key, int(n), int(d), args.repeats, args.threads, args.refs_src)
        sys.stdout.write(json.dumps(result) + "\n")
        return
    if args.vs_numpy:
        n, d = args.vs_numpy.split(",")
        result = run_vs_numpy(int(n), int(d), args.numpy_repeats, args.threads, args.numpy_pause)
        sys.stdout.write(json.dumps(result) + "\n")
        return
    measure, impl, n, d = args.case.split(",")
    result = run_case(measure, impl, int(n), int(d), args.repeats, args.device, args.threads)
    sys.stdout.write(json.dumps(result) + "\n")


def _spawn(measure: str, impl: str, n: int, d: int, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--case", f"{measure},{impl},{n},{d}", "--repeats", str(args.repeats),
           "--device", args.device, "--threads", str(args.threads)]
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _spawn_vs_numpy(n: int, d: int, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--vs-numpy", f"{n},{d}", "--numpy-repeats", str(args.numpy_repeats),
           "--numpy-pause", str(args.numpy_pause), "--threads", str(args.threads)]
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    if args.threads > 0:  # numpy's BLAS gets the same number of threads as torch
        for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
            env[var] = str(args.threads)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def vs_numpy_table(args: argparse.Namespace) -> tuple[list[str], list[dict]]:
    """Rows of the linear CKA vs numpy feature-form table, printed as they come."""
    rows = ["| n | d | ours (s) | numpy feature form (s) | ours / numpy | \\|value diff\\| |",
            "|---|---|---|---|---|---|"]
    records = []
    for n, d in QUICK_NUMPY_SIZES if args.quick else NUMPY_SIZES:
        r = _spawn_vs_numpy(n, d, args)
        records.append({"n": n, "d": d, **r})
        if "error" in r:
            rows.append(f"| {n} | {d} | error: {r['error']} | - | - | - |")
        else:
            rows.append(f"| {n} | {d} | {r['ours']:.3f} | {r['numpy']:.3f} | {r['ratio']:.2f} | {r['diff']:.1e} |")
        sys.stdout.write(rows[-1] + "\n")
        sys.stdout.flush()
    return rows, records


# ---------------------------------------------------------------- driver


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--full", action="store_true", help="also run baselines skipped as too slow")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch threads per case (0: torch's default)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per case")
    parser.add_argument("--numpy-only", action="store_true",
                        help="only the linear CKA vs numpy feature-form table (float64, one process)")
    parser.add_argument("--numpy-repeats", type=int, default=9, help="calls of each side in that table")
    parser.add_argument("--numpy-pause", type=float, default=0.0,
                        help="seconds of sleep before each call in that table (lets idle BLAS threads stop spinning)")
    parser.add_argument("--new", action="store_true",
                        help="only the table of the measures of issue 24 against their public references")
    parser.add_argument("--only", help="with --new: comma-separated measures to run")
    parser.add_argument("--refs-python", default="/work/refs-venv/bin/python",
                        help="python of the reference environment (see bench/similarity_refs.py)")
    parser.add_argument("--refs-src", default="/tmp/refsrc",
                        help="folder with the git snapshots mklabunde+resi, ahwillia+netrep, minyoungg+platonic-rep")
    parser.add_argument("--ref-timeout", type=float, default=900.0, help="seconds per reference case")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--case-ref", help=argparse.SUPPRESS)
    parser.add_argument("--vs-numpy", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case or args.vs_numpy or args.case_ref:
        _child(args)
        return
    if str(REPO) not in sys.path:  # this checkout's stir (the children import none of it)
        sys.path.insert(0, str(REPO))
    from stir.atomic import write_text

    if args.new:
        import torch

        machine = (f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores, torch {torch.__version__}, "
                   f"{args.threads or torch.get_num_threads()} threads, 1-min load average {os.getloadavg()[0]:.1f} at start")
        rows, records = new_measures_table(args)
        sys.stdout.write("\n" + machine + "\n\n" + "\n".join(rows) + "\n")
        OUT.mkdir(parents=True, exist_ok=True)
        write_text(OUT / "bench_similarity_new.json", json.dumps({"machine": machine, "results": records}, indent=2))
        return

    import torch

    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores, torch {torch.__version__}, "
        f"{args.threads or torch.get_num_threads()} threads, device {args.device}, "
        f"1-min load average {os.getloadavg()[0]:.1f} at start"
    )
    np_rows, np_records = vs_numpy_table(args)
    if args.numpy_only:
        sys.stdout.write("\n" + machine + "\n\n" + "\n".join(np_rows) + "\n")
        OUT.mkdir(parents=True, exist_ok=True)
        write_text(OUT / "bench_similarity_numpy.json",
            json.dumps({"machine": machine, "vs_numpy": np_records}, indent=2))
        return

    sizes = QUICK_SIZES if args.quick else SIZES
    rows, records = [], []
    columns = ["measure", "n", "d", "ours (s)", "baseline (s)", "speedup", "ours peak extra MiB",
               "baseline peak extra MiB", "\\|value diff\\|"]
    rows.append("| " + " | ".join(columns) + " |")
    rows.append("|" + "---|" * 9)
    for n, d in sizes:
        for measure in MEASURES:
            ours = _spawn(measure, "ours", n, d, args)
            skip = None if args.full else baseline_skip_reason(measure, n, d)
            base = {"skipped": skip} if skip else _spawn(measure, "baseline", n, d, args)
            records.append({"measure": measure, "n": n, "d": d, "ours": ours, "baseline": base})
            o_s = f"{ours['seconds']:.3f}" if "seconds" in ours else f"error: {ours.get('error')}"
            o_m = f"{ours['peak_extra_mib']:.0f}" if "seconds" in ours else "-"
            if "seconds" in base:
                b_s, b_m = f"{base['seconds']:.3f}", f"{base['peak_extra_mib']:.0f}"
                speed = f"{base['seconds'] / ours['seconds']:.1f}x" if "seconds" in ours else "-"
                diff = f"{abs(base['value'] - ours['value']):.1e}" if "seconds" in ours else "-"
            else:
                b_s = "skipped: " + base["skipped"] if "skipped" in base else f"error: {base.get('error')}"
                b_m, speed, diff = "-", "-", "-"
            rows.append(f"| {measure} | {n} | {d} | {o_s} | {b_s} | {speed} | {o_m} | {b_m} | {diff} |")
            sys.stdout.write(rows[-1] + "\n")
            sys.stdout.flush()

    sys.stdout.write("\n" + machine + "\n\n" + "\n".join(rows) + "\n\n" + "\n".join(np_rows) + "\n")
    OUT.mkdir(parents=True, exist_ok=True)
    write_text(OUT / "bench_similarity.json",
        json.dumps({"machine": machine, "results": records, "vs_numpy": np_records}, indent=2))


if __name__ == "__main__":
    main()
