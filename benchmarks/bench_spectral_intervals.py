"""Bootstrap intervals of Algorithm 2 (``private_spectral_estimate``): coverage, width, speed.

For n = 2000, m = 20, δ = 1e-4 and ε ∈ {0.3, 1, 3}, on ``--datasets`` simulated Rasch data
sets (N(0, 1) abilities) per ε:

* coverage of the nominal 95 % intervals (all items of all data sets pooled) and mean width,
  for Algorithm 2 with the dense discrete Gaussian (``gaussian``), the sparse comparison graph
  (``gaussian_sparse``, p0 = "auto"), discrete Laplace (``laplace``) — all with
  ``estimator="spectral"`` — and the dense Gaussian counts with the noise-aware estimate
  (``gaussian_na``, ``estimator="noise_aware"``), beside the totals
  estimator's intervals (``private_totals_estimate``) on the same data;
* seconds per call (median) with the default 200 replicates, against the point estimate alone
  (``n_boot=0``);
* how much the standard errors move between two bootstrap seeds at n_boot ∈ {50, 100, 200, 400}
  (median relative difference, one data set at ε = 1), and their cost: the basis for the
  default ``n_boot``.

Run: ``python benchmarks/bench_spectral_intervals.py [--datasets 30]``.  Seeded (reproducible,
NOT private) noise throughout, as a benchmark should be.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import privirt

N, M, DELTA = 2000, 20, 1e-4
EPSILONS = (0.3, 1.0, 3.0)
VARIANTS = {
    "gaussian": {"mechanism": "gaussian", "p0": 1.0, "estimator": "spectral"},
    "gaussian_sparse": {"mechanism": "gaussian", "p0": "auto", "estimator": "spectral"},
    "laplace": {"mechanism": "laplace", "p0": 1.0, "estimator": "spectral"},
    "gaussian_na": {"mechanism": "gaussian", "p0": 1.0, "estimator": "noise_aware"},
}


def _cover(res, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = res.ci["lo"].to_numpy(), res.ci["hi"].to_numpy()
    return (lo <= truth) & (truth <= hi), hi - lo


def coverage(datasets: int) -> None:
    print(f"Coverage of nominal 95 % intervals, n = {N}, m = {M}, δ = {DELTA:g}, "
          f"{datasets} data sets × {M} items per ε")
    head = (f"{'eps':>5} {'estimator':>16} {'coverage':>9} {'± se':>6} {'width':>7} {'med w':>6} "
            f"{'rmse':>6} {'s/call':>7}")
    print(head)
    print("-" * len(head))
    for eps in EPSILONS:
        rows: dict[str, list] = {k: [] for k in (*VARIANTS, "totals")}
        for d in range(datasets):
            X, _, beta = privirt.simulate_rasch(N, M, seed=10_000 + d)
            truth = beta - beta.mean()
            for name, kw in VARIANTS.items():
                t0 = time.perf_counter()
                res = privirt.private_spectral_estimate(X, epsilon=eps, delta=DELTA, seed=d, **kw)
                dt = time.perf_counter() - t0
                cov, wid = _cover(res, truth)
                rows[name].append((cov, wid, res.beta.to_numpy() - truth, dt))
            t0 = time.perf_counter()
            tot = privirt.private_totals_estimate(X, epsilon=eps, delta=DELTA, seed=d)
            dt = time.perf_counter() - t0
            cov, wid = _cover(tot, truth)
            rows["totals"].append((cov, wid, tot.beta.to_numpy() - truth, dt))
        for name, r in rows.items():
            cov = np.concatenate([x[0] for x in r])
            wid = np.concatenate([x[1] for x in r])
            err = np.concatenate([x[2] for x in r])
            c = cov.mean()
            print(f"{eps:>5g} {name:>16} {c:>9.3f} {np.sqrt(c * (1 - c) / cov.size):>6.3f} "
                  f"{wid.mean():>7.3f} {np.median(wid):>6.3f} {np.sqrt(np.mean(err ** 2)):>6.3f} "
                  f"{np.median([x[3] for x in r]):>7.3f}")
    print("(± se: binomial standard error of the pooled coverage; items of one data set are not "
          "independent, so it is a lower bound.  width: mean, med w: median interval width; rmse: "
          "of the point estimate; s/call: median, with 200 replicates)")


def speed(reps: int = 5) -> None:
    X, _, _ = privirt.simulate_rasch(N, M, seed=1)
    print(f"\nSeconds per call, n = {N}, m = {M}, ε = 1 (median of {reps})")
    print(f"{'call':>44} {'s':>7}")
    calls = {
        "private_spectral_estimate(n_boot=0, spectral)": lambda: privirt.private_spectral_estimate(
            X, epsilon=1.0, n_boot=0, estimator="spectral", seed=1),
        "private_spectral_estimate(spectral) (200 replicates)": lambda: privirt.private_spectral_estimate(
            X, epsilon=1.0, estimator="spectral", seed=1),
        "private_spectral_estimate(noise_aware) (200 replicates)": lambda: privirt.private_spectral_estimate(
            X, epsilon=1.0, estimator="noise_aware", seed=1),
        "private_totals_estimate() (200 replicates)": lambda: privirt.private_totals_estimate(
            X, epsilon=1.0, seed=1),
    }
    for name, f in calls.items():
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
        print(f"{name:>44} {np.median(ts):>7.3f}")


def n_boot_choice() -> None:
    X, _, _ = privirt.simulate_rasch(N, M, seed=2)
    rel = privirt.release_counts(X, epsilon=1.0, seed=5)
    print("\nBootstrap size: relative change of se between two bootstrap seeds (median over items) "
          "and seconds per intervals call, same release (ε = 1)")
    print(f"{'n_boot':>7} {'se change':>10} {'s':>7}")
    for b in (50, 100, 200, 400):
        t0 = time.perf_counter()
        a = privirt.spectral_from_release(rel, n_boot=b, seed=1).se.to_numpy()
        dt = time.perf_counter() - t0
        c = privirt.spectral_from_release(rel, n_boot=b, seed=2).se.to_numpy()
        print(f"{b:>7} {np.median(np.abs(a - c) / c):>10.3f} {dt:>7.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=30)
    ap.add_argument("--coverage-only", action="store_true")
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(not set)')}")
    coverage(args.datasets)
    if args.coverage_only:
        return
    speed()
    n_boot_choice()


if __name__ == "__main__":
    main()
