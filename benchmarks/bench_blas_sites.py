"""The default calls whose small m × m linear algebra ran on BLAS's own threads (Session 27):
``cmle_estimate`` and ``andersen_test`` (Cholesky per Newton step), ``spectral_estimate`` and
``private_spectral_estimate(mechanism="randomized_response")`` (the direct solve),
``noise_aware_estimate`` (Fisher-scoring solves) and a short ``mh_2pl`` (its start's SVD).

Each tree (this checkout, and ``--baseline DIR``, e.g. a checkout of the code before the fix)
runs in its own fresh child process (``_harness.run_in_tree``); each call is run once to warm
up, then at least 3 times (up to 30 for calls under 0.33 s); ``--repeat N`` starts the trees' processes
N times, alternating, against drift in the machine's load.  The median wall seconds and the
median CPU seconds (the process's, all its threads) over all runs are printed, with whether
the results agree to 9 decimals (the last bits follow BLAS's thread count).
``--busy`` keeps another core busy (a spinning Python process) throughout.

Run: ``python benchmarks/bench_blas_sites.py [--busy] [--baseline DIR] [--repeat N] [--cases NAME ...]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _harness import busy_core, run_in_tree  # noqa: E402

CASES = ["cmle 1000x150", "cmle 1000x200", "andersen 1000x150", "spectral 1000x100",
         "spectral 1000x400", "spectral rr 1000x200", "noise_aware 1000x150", "mh_2pl 300x120",
         "spectral 1000x50", "cmle 1000x20", "noise_aware 1000x50"]

CHILD = r'''
import hashlib, json, time, warnings
warnings.simplefilter("ignore")
import numpy as np, privirt as P
assert privirt_file_in(P.__file__, {tree!r})
S = 94300027
def digest(r):
    parts = []
    for name in ("beta", "se", "statistic", "draws"):
        v = getattr(r, name, None)
        if v is not None:
            v = v if not isinstance(v, dict) else np.concatenate([np.ravel(v[k]) for k in sorted(v)])
            v = np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=float)
            parts.append(np.round(v, 9).tobytes())
    return hashlib.sha256(b"".join(parts)).hexdigest()[:12] if parts else "-"
def call(case):
    kind, size = case.rsplit(" ", 1)
    n, m = (int(x) for x in size.split("x"))
    if kind == "mh_2pl":
        X = P.simulate_2pl(n, m, seed=S)[0]
        return lambda: P.mh_2pl(X, n_iter=1000, warmup=500, seed=S, progress=False)
    X = P.simulate_rasch(n, m, seed=S)[0]
    if kind == "cmle":
        return lambda: P.cmle_estimate(X, progress=False)
    if kind == "andersen":
        return lambda: P.andersen_test(X)
    if kind == "spectral":
        return lambda: P.spectral_estimate(X)
    if kind == "spectral rr":
        return lambda: P.private_spectral_estimate(X, epsilon=1.0, mechanism="randomized_response",
                                                   seed=S, progress=False)
    r = P.release_counts(X, epsilon=1.0, delta=1e-4, seed=S)
    return lambda: P.noise_aware_estimate(r)
for case in {cases!r}:
    f = call(case)
    out = f()
    w = time.perf_counter(); f(); w = time.perf_counter() - w
    walls, cpus = [], []
    for _ in range(max(3, min(30, int(1.0 / max(w, 1e-6))))):  # more runs of the quick calls
        w, c = time.perf_counter(), time.process_time()
        f()
        walls.append(time.perf_counter() - w); cpus.append(time.process_time() - c)
    print(json.dumps(dict(case=case, wall=walls, cpu=cpus, digest=digest(out))), flush=True)
'''

PRELUDE = ("import os\n"
           "def privirt_file_in(f, tree):\n"
           "    return os.path.realpath(f).startswith(os.path.realpath(tree))\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--busy", action="store_true", help="run a CPU-bound process beside the benchmark")
    ap.add_argument("--baseline", default=None, metavar="DIR", help="another checkout, run alike")
    ap.add_argument("--repeat", type=int, default=1, help="fresh processes per tree, alternating")
    ap.add_argument("--cases", nargs="+", default=CASES, choices=CASES, metavar="CASE")
    args = ap.parse_args()
    trees = [("this", HERE.parent)] + ([("baseline", Path(args.baseline).resolve())] if args.baseline else [])
    print("load %.2f %.2f %.2f, busy=%s" % (*os.getloadavg(), args.busy), flush=True)
    rows: dict[str, dict[str, dict]] = {}
    with busy_core(args.busy):
        for _, (label, tree) in itertools.product(range(max(args.repeat, 1)), trees):
            stdout, why = run_in_tree(tree, PRELUDE + CHILD.format(tree=str(tree), cases=args.cases))
            if stdout is None:
                sys.exit(f"{label}: {why}")
            for line in stdout.splitlines():
                r = json.loads(line)
                got = rows.setdefault(r["case"], {}).setdefault(label, dict(wall=[], cpu=[], digest=set()))
                got["wall"] += r["wall"]
                got["cpu"] += r["cpu"]
                got["digest"].add(r["digest"])
    print("load after %.2f %.2f %.2f" % os.getloadavg())
    head = "| call | " + " | ".join(f"{t} wall s | {t} CPU s" for t, _ in trees) + " | same result |"
    print(head)
    print("|" + "---|" * (2 * len(trees) + 2))
    for case in args.cases:
        got = rows.get(case, {})
        cells = " | ".join(f"{statistics.median(got[t]['wall']):.4f} | {statistics.median(got[t]['cpu']):.4f}"
                           if t in got else "- | -" for t, _ in trees)
        same = len(set().union(*(g["digest"] for g in got.values()))) == 1
        print(f"| {case} | {cells} | {'yes' if same else 'NO'} |")


if __name__ == "__main__":
    main()
