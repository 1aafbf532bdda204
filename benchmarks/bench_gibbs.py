"""Benchmark of the 2PNO Gibbs sampler (Sheng, Welling & Zhu 2014 grid).

In one run, for every (n persons, k items) cell of the grid, this times

* ``privirt-cpu``: :func:`privirt.gibbs_2pno` with ``device="cpu"`` (batched numpy/scipy),
* ``privirt-gpu``: the same with ``device="gpu"`` when cupy sees a CUDA GPU,
* ``reference``: a straightforward numpy/scipy implementation written below — Z drawn with
  ``scipy.stats.truncnorm.rvs``, θ vectorised, (a_j, b_j) in a per-item Python loop with
  ``Generator.multivariate_normal`` and redraws while a_j ≤ 0 — the way the algorithm is
  usually first coded.

All three run the same conditionals on the same simulated data.  Times are wall-clock seconds
per iteration after one warm-up iteration, and the "10k it" column is that figure × 10,000
(the paper's chain length) — **extrapolated** whenever fewer iterations were run (the column
``measured it`` says how many).  Optional extra rows: the paper's CBASE size (3356 × 180) and
a Monte Carlo study of R replications (2000 × 50, 5000 iterations) run with
:func:`privirt.gibbs_2pno_replicate`.

Usage::

    python benchmarks/bench_gibbs.py --grid quick
    python benchmarks/bench_gibbs.py --grid paper --iter 100 --ref-iter 3 --cbase --reps 100
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import privirt  # noqa: E402

GRIDS = {
    "quick": ([500, 2000], [20, 100]),
    "paper": ([500, 1000, 2000, 5000, 10000], [20, 50, 100, 200]),
}


# ---------------------------------------------------------------------------------------
# the straightforward reference implementation
# ---------------------------------------------------------------------------------------
def reference_gibbs(Y: np.ndarray, n_iter: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Plain 2PNO Gibbs sampler (complete data), flat priors as in the paper."""
    rng = np.random.default_rng(seed)
    n, k = Y.shape
    theta = np.zeros(n)
    a = np.ones(k)
    b = np.zeros(k)
    correct = Y == 1
    for _ in range(n_iter):
        mu = np.outer(theta, a) - b
        lower = np.where(correct, -mu, -np.inf)  # standardised bounds for Z − μ
        upper = np.where(correct, np.inf, -mu)
        Z = mu + stats.truncnorm.rvs(lower, upper, random_state=rng)
        prec = a @ a + 1.0
        theta = rng.normal(((Z + b) @ a) / prec, 1.0 / np.sqrt(prec))
        X = np.column_stack([theta, -np.ones(n)])
        cov = np.linalg.inv(X.T @ X)
        for j in range(k):
            mean = cov @ (X.T @ Z[:, j])
            while True:
                draw = rng.multivariate_normal(mean, cov)
                if draw[0] > 0:
                    break
            a[j], b[j] = draw
    return {"a": a, "b": b, "theta": theta}


# ---------------------------------------------------------------------------------------
# timing helpers
# ---------------------------------------------------------------------------------------
def _time_privirt(X: np.ndarray, n_iter: int, device: str) -> float:
    privirt.gibbs_2pno(X, n_iter=2, burn_in=1, device=device, seed=0, progress=False,
                       keep_draws=False)  # warm-up (imports, kernel compilation)
    t = time.perf_counter()
    privirt.gibbs_2pno(X, n_iter=n_iter, burn_in=n_iter // 2, device=device, seed=1,
                       progress=False, keep_draws=False)
    return (time.perf_counter() - t) / n_iter


def _time_reference(X: np.ndarray, n_iter: int) -> float:
    Y = np.nan_to_num(X).astype(np.int8)
    reference_gibbs(Y, 1)  # warm-up
    t = time.perf_counter()
    reference_gibbs(Y, n_iter)
    return (time.perf_counter() - t) / n_iter


def _fmt(x: float) -> str:
    if not np.isfinite(x):
        return "—"
    return f"{x:.3g}" if x < 100 else f"{x:,.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", choices=sorted(GRIDS), default="quick")
    ap.add_argument("--iter", type=int, default=100,
                    help="iterations timed per cell for privirt (default 100)")
    ap.add_argument("--ref-iter", type=int, default=3,
                    help="iterations timed per cell for the reference (default 3)")
    ap.add_argument("--device", choices=["auto", "cpu", "gpu", "both"], default="auto",
                    help="privirt device(s): auto = CPU, plus GPU when available")
    ap.add_argument("--no-reference", action="store_true", help="skip the reference")
    ap.add_argument("--cbase", action="store_true",
                    help="also time the paper's CBASE size, 3356 × 180")
    ap.add_argument("--reps", type=int, default=0,
                    help="also time R replications of 2000 × 50 (5000 iterations)")
    ap.add_argument("--reps-iter", type=int, default=20,
                    help="iterations timed for the replication study (default 20)")
    args = ap.parse_args(argv)

    devices = ["cpu"]
    if args.device in ("gpu", "both") or (args.device == "auto" and privirt.gpu_available()):
        devices.append("gpu")
    if args.device == "gpu":
        devices = ["gpu"]
    print(f"# 2PNO Gibbs benchmark — {platform.machine()} {platform.system()}, "
          f"{os.cpu_count()} CPU(s), numpy {np.__version__}, devices {devices}, "
          f"GPU available: {privirt.gpu_available()}")
    print(f"# privirt timed over {args.iter} iterations, reference over {args.ref_iter}; "
          "'10k it' = seconds per iteration × 10,000 (extrapolated)")
    header = ["n", "k", "impl", "measured it", "s / it", "10k it (s)", "speed-up vs ref"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    ns, ks = GRIDS[args.grid]
    for n in ns:
        for k in ks:
            X, *_ = privirt.simulate_2pno(n, k, seed=n + k)
            ref = np.nan
            if not args.no_reference:
                ref = _time_reference(X, args.ref_iter)
                print(f"| {n} | {k} | reference (truncnorm.rvs, item loop) | {args.ref_iter} | "
                      f"{ref:.4f} | {_fmt(ref * 1e4)} | 1 |", flush=True)
            for dev in devices:
                per = _time_privirt(X, args.iter, dev)
                ratio = ref / per if np.isfinite(ref) else np.nan
                print(f"| {n} | {k} | privirt-{dev} | {args.iter} | {per:.4f} | "
                      f"{_fmt(per * 1e4)} | {_fmt(ratio)} |", flush=True)
    if args.cbase:
        X, *_ = privirt.simulate_2pno(3356, 180, seed=1)
        for dev in devices:
            per = _time_privirt(X, args.iter, dev)
            print(f"| 3356 | 180 (CBASE size) | privirt-{dev} | {args.iter} | {per:.4f} | "
                  f"{_fmt(per * 1e4)} | paper: 40 s (K20c GPU), 17 min (serial C) |", flush=True)
    if args.reps:
        R = args.reps
        data = [privirt.simulate_2pno(2000, 50, seed=r)[0] for r in range(R)]
        for dev in devices:
            privirt.gibbs_2pno_replicate(data[:2], n_iter=2, burn_in=1, device=dev,
                                         progress=False)
            t = time.perf_counter()
            privirt.gibbs_2pno_replicate(data, n_iter=args.reps_iter,
                                         burn_in=args.reps_iter // 2, device=dev,
                                         seed=1, progress=False)
            per = (time.perf_counter() - t) / args.reps_iter
            print(f"| 2000 | 50 × {R} replications | privirt-{dev} (one batch) | "
                  f"{args.reps_iter} | {per:.4f} | 5000 it: {_fmt(per * 5000)} | target ≤ 60 s "
                  "on an H100 |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
