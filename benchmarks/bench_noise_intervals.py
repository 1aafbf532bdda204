"""Intervals where the privacy noise dominates: coverage and width before vs after (BENCHMARKS.md).

For each cell (n persons, m items, ε) and each of ``--datasets`` data sets (difficulties and
abilities drawn N(0, 1), fresh seeds from 40 000 on), the nominal 95 % intervals of

* ``totals``: ``private_totals_estimate`` (200 bootstrap replicates): *before* = the bootstrap's
  truth held at the point estimate (the code before docs/totals.md §5.2, by patching
  ``true_difficulties``), *after* = the truths redrawn from their posterior;
* ``spectral``: ``private_spectral_estimate(estimator="spectral")`` (default replicates):
  *before* = the calibration's slope floored at 0.05 as before (docs/intervals.md §3b patched
  out), *after* = unbounded intervals when the attenuation is below 0.05,

scored on the same release and bootstrap seed.  Printed per cell and method: mean coverage of
the true (centred) difficulties ± its SE over the data sets, median width, the share of data
sets with unbounded intervals, CPU seconds per call (this process; run it niced).

    nice python benchmarks/bench_noise_intervals.py                       # the default cells, 4 data sets
    nice python benchmarks/bench_noise_intervals.py --cells 30x5000x0.1 --datasets 2
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import privirt  # noqa: E402
from privirt.private.counts import intervals as counts_intervals  # noqa: E402
from privirt.private.totals import intervals as totals_intervals  # noqa: E402

CELLS = ["30x500x0.1", "200x100x0.05", "200x20x0.3", "500x50x0.1", "1000x20x1", "10000x100x0.1"]


def simulate(n: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    beta, theta = rng.normal(size=m), rng.normal(size=n)
    X = (rng.random((n, m)) < 1.0 / (1.0 + np.exp(beta[None, :] - theta[:, None]))).astype(np.int8)
    return X, beta - beta.mean()


@contextmanager
def before(method: str):
    """The code before the fix, by patching the one function the fix added a branch to."""
    if method == "totals":
        saved = totals_intervals.true_difficulties
        totals_intervals.true_difficulties = lambda rng, fit, *a, **k: fit.beta
    else:
        saved = counts_intervals._raw_slope
        counts_intervals._raw_slope = lambda mean, truth: max(saved(mean, truth), counts_intervals.MIN_SLOPE)
    try:
        yield
    finally:
        if method == "totals":
            totals_intervals.true_difficulties = saved
        else:
            counts_intervals._raw_slope = saved


def one(method: str, X: np.ndarray, eps: float, seed: int):
    t = time.process_time()
    if method == "totals":
        fit = privirt.private_totals_estimate(X, epsilon=eps, seed=seed)
    else:
        fit = privirt.private_spectral_estimate(X, epsilon=eps, seed=seed, estimator="spectral")
    return fit, time.process_time() - t


def score(fit, beta: np.ndarray) -> tuple[float, float]:
    lo, hi = fit.ci["lo"].to_numpy(), fit.ci["hi"].to_numpy()
    return float(np.mean((lo <= beta) & (beta <= hi))), float(np.median(hi - lo))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default=",".join(CELLS), help="nxmxeps,...")
    ap.add_argument("--datasets", type=int, default=4)
    ap.add_argument("--methods", default="totals,spectral")
    ap.add_argument("--seed", type=int, default=40_000)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    print(f"{'cell':>15} {'method':>8} | {'cover before':>14} {'width':>7} {'unb':>4} | "
          f"{'cover after':>14} {'width':>7} {'unb':>4} | {'CPU s b/a':>11}")
    for cell in args.cells.split(","):
        n, m, eps = cell.split("x")
        n, m, eps = int(n), int(m), float(eps)
        data = [simulate(n, m, args.seed + k) for k in range(args.datasets)]
        for method in args.methods.split(","):
            rows = {"b": [], "a": []}
            for k, (X, beta) in enumerate(data):
                with before(method):
                    fb, tb = one(method, X, eps, args.seed + k)
                fa, ta = one(method, X, eps, args.seed + k)
                rows["b"].append((*score(fb, beta), tb))
                rows["a"].append((*score(fa, beta), ta))
            out = []
            for key in ("b", "a"):
                r = np.array(rows[key])
                se = r[:, 0].std(ddof=1) / np.sqrt(len(r)) if len(r) > 1 else float("nan")
                unb = np.mean(~np.isfinite(r[:, 1]))
                out.append(f"{r[:, 0].mean():>6.3f} ± {se:<5.3f} {np.median(r[:, 1]):>7.3g} {unb:>4.2f}")
            cpu = f"{np.mean(np.array(rows['b'])[:, 2]):.1f}/{np.mean(np.array(rows['a'])[:, 2]):.1f}"
            print(f"{cell:>15} {method:>8} | {out[0]} | {out[1]} | {cpu:>11}", flush=True)


if __name__ == "__main__":
    main()
