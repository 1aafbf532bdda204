"""The private 2PL's default call (n_boot = 200) on the same seeded releases, this tree's code and
(``--baseline DIR``) another checkout's side by side, each in its own child process that imports
privirt from its tree: CPU and wall seconds, the interval route, the fit's iterations, and how far
the two trees' a, b and their se's lie apart (in units of this tree's se); ``--engines auto,numpy``:
this tree once per ``_pairs.PAIR_ENGINE`` (the numba kernels of the ``fast`` extra, or numpy).

Data ``bench_private_2pl.simulate(n, m, seed)``, ``release_2pl(..., seed=seed + 1)`` (δ = 1e-4),
``estimate_2pl_from_release(..., seed=seed + 2)``, seed = 279 500 + m + 7·round(100 ε) + 1000·k.
``--busy``: a spinning process on the other core throughout (the brief's busy machine).

Run::

    python benchmarks/bench_2pl_fit_steps.py --busy --baseline ../base --out steps.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from _harness import busy_core, run_in_tree

HERE = Path(__file__).resolve().parent
SHAPES = "1000x1000x1,1000x400x1,500x200x0.3,1000x200x1,10000x100x1"

CHILD = r"""
import json, sys, time, warnings
sys.path.insert(0, {tree!r})
import privirt  # from the tree, before bench_private_2pl puts this checkout first on the path
sys.path.insert(0, {bench!r})
from bench_private_2pl import DELTA, simulate
from privirt.private.twopl import estimate_2pl_from_release, release_2pl
assert privirt.__file__.startswith({tree!r}), privirt.__file__
if {engine!r}:
    from privirt.private.twopl import _pairs
    _pairs.PAIR_ENGINE = {engine!r}
n, m, e, seed = {n}, {m}, {e}, {seed}
X, a, b = simulate(n, m, seed)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    rl = release_2pl(X, epsilon=e, delta=DELTA, seed=seed + 1)
    estimate_2pl_from_release(release_2pl(X[:300, :5], epsilon=1.0, delta=DELTA, seed=1), n_boot=20, seed=1,
                              progress=False)  # imports and first calls out of the figures
    t0, w0 = time.process_time(), time.perf_counter()
    f = estimate_2pl_from_release(rl, seed=seed + 2, progress=False)
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
print(json.dumps(dict(cpu=cpu, wall=wall, route=f.info["intervals"], refits=f.info["bootstrap_refits"],
                      iterations=f.info["iterations"], a=f.a.tolist(), b=f.b.tolist(),
                      se_log_a=f.se["log_a"].tolist(), se_b=f.se["b"].tolist())))
"""


def child(tree: Path, n: int, m: int, e: float, seed: int, engine: str = "") -> dict:
    stdout, why = run_in_tree(tree, CHILD.format(tree=str(tree), bench=str(HERE), n=n, m=m, e=e, seed=seed,
                                                 engine=engine))
    if stdout is None:
        raise SystemExit(f"{tree}: {why}")
    return json.loads(stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=SHAPES, help="n x m x eps, comma-separated")
    ap.add_argument("--sets", type=int, default=1, help="data sets per shape")
    ap.add_argument("--baseline", default=None, metavar="DIR", help="another checkout, run on the same releases")
    ap.add_argument("--busy", action="store_true", help="a spinning process on the other core")
    ap.add_argument("--engines", default="", help="this tree once per _pairs.PAIR_ENGINE value (e.g. auto,numpy: "
                    "numba kernels with the fast extra, or numpy), the first the reference")
    ap.add_argument("--out", default=None, help="append one JSON line per run to this file")
    args = ap.parse_args()
    engines = [x for x in args.engines.split(",") if x] or [""]
    trees = [("this" + (f" {x}" if x else ""), HERE.parent, x) for x in engines] \
        + ([("baseline", Path(args.baseline).resolve(), "")] if args.baseline else [])
    with busy_core(args.busy):
        print("| n | m | ε | set | code | CPU s | wall s | intervals | refits | fit iterations "
              "| max |Δa|/se(a) | max |Δb|/se(b) | se ratio (median) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for cell in args.shapes.split(","):
            n, m, e = cell.split("x")
            n, m, e = int(n), int(m), float(e)
            for k in range(args.sets):
                seed = 279_500 + m + 7 * int(round(100 * e)) + 1000 * k
                runs = {code: child(tree, n, m, e, seed, engine) for code, tree, engine in trees}
                this = runs[trees[0][0]]
                se_a = np.array(this["se_log_a"]) * np.array(this["a"])
                for code, r in runs.items():
                    da = np.max(np.abs(np.array(r["a"]) - this["a"]) / se_a)
                    db = np.max(np.abs(np.array(r["b"]) - this["b"]) / np.array(this["se_b"]))
                    ratio = np.median(np.array(r["se_b"]) / np.array(this["se_b"]))
                    print(f"| {n} | {m} | {e:g} | {k} | {code} | {r['cpu']:.1f} | {r['wall']:.1f} | {r['route']} "
                          f"| {r['refits']} | {r['iterations']} | {da:.2g} | {db:.2g} | {ratio:.4f} |", flush=True)
                    if args.out:
                        with open(args.out, "a") as fh:
                            keep = {x: r[x] for x in ("cpu", "wall", "route", "refits", "iterations")}
                            fh.write(json.dumps(dict(n=n, m=m, eps=e, k=k, code=code, busy=args.busy, **keep,
                                                     max_da_se=float(da), max_db_se=float(db),
                                                     se_b_ratio=float(ratio))) + "\n")


if __name__ == "__main__":
    main()
