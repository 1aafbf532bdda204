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

A cell ``nxmxepsxshare`` (a fourth field) makes that share of cells missing independently and
runs ``private_totals_estimate(missing="mcar")`` (totals only; *before*/*after* as above, the
MCAR bootstrap of docs/totals.md §7.3 step 4); ``--beta-sd`` sets the SD of the true
difficulties (default 1), and ``--mse`` also prints the point estimate's mean squared error.

    nice python benchmarks/bench_noise_intervals.py                       # the default cells, 4 data sets
    nice python benchmarks/bench_noise_intervals.py --cells 30x5000x0.1 --datasets 2
    nice python benchmarks/bench_noise_intervals.py --methods totals --mse --datasets 8 \
        --cells 300x50x0.1x0.5,1000x200x0.1x0.3,200x100x0.3x0.5,5000x20x1x0.2 --beta-sd 2
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


def simulate(n: int, m: int, seed: int, missing: float = 0.0, beta_sd: float = 1.0
             ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    beta, theta = beta_sd * rng.normal(size=m), rng.normal(size=n)
    X = (rng.random((n, m)) < 1.0 / (1.0 + np.exp(beta[None, :] - theta[:, None]))).astype(np.int8)
    if missing > 0:  # cells missing independently (MCAR)
        X = np.where(rng.random((n, m)) < missing, np.nan, X)
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
        mcar = bool(np.isnan(X).any()) if X.dtype.kind == "f" else False
        fit = privirt.private_totals_estimate(X, epsilon=eps, seed=seed, missing="mcar" if mcar else "none")
    else:
        fit = privirt.private_spectral_estimate(X, epsilon=eps, seed=seed, estimator="spectral")
    return fit, time.process_time() - t


def score(fit, beta: np.ndarray) -> tuple[float, float, float]:
    lo, hi = fit.ci["lo"].to_numpy(), fit.ci["hi"].to_numpy()
    b = fit.beta.to_numpy() - fit.beta.to_numpy().mean()
    return float(np.mean((lo <= beta) & (beta <= hi))), float(np.median(hi - lo)), float(np.mean((b - beta) ** 2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default=",".join(CELLS), help="nxmxeps,...")
    ap.add_argument("--datasets", type=int, default=4)
    ap.add_argument("--methods", default="totals,spectral")
    ap.add_argument("--seed", type=int, default=40_000)
    ap.add_argument("--beta-sd", type=float, default=1.0, help="SD of the true difficulties")
    ap.add_argument("--mse", action="store_true", help="also print the point estimate's MSE (before/after)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    print(f"{'cell':>15} {'method':>8} | {'cover before':>14} {'width':>7} {'unb':>4} | "
          f"{'cover after':>14} {'width':>7} {'unb':>4} | {'CPU s b/a':>11}" + (" | MSE b/a" if args.mse else ""))
    for cell in args.cells.split(","):
        n, m, eps, *share = cell.split("x")
        n, m, eps, share = int(n), int(m), float(eps), float(share[0]) if share else 0.0
        data = [simulate(n, m, args.seed + k, share, args.beta_sd) for k in range(args.datasets)]
        for method in args.methods.split(","):
            if share and method != "totals":
                continue
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
            cpu = f"{np.mean(np.array(rows['b'])[:, 3]):.1f}/{np.mean(np.array(rows['a'])[:, 3]):.1f}"
            mse = (f" | {np.mean(np.array(rows['b'])[:, 2]):.4f}/{np.mean(np.array(rows['a'])[:, 2]):.4f}"
                   if args.mse else "")
            print(f"{cell:>15} {method:>8} | {out[0]} | {out[1]} | {cpu:>11}{mse}", flush=True)


if __name__ == "__main__":
    main()
