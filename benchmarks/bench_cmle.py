"""Time ``cmle_estimate`` against girth's Rasch estimators, side by side.

Peers (girth 0.8): ``rasch_mml`` (marginal ML, the fast Rasch estimator a user would reach
for) and ``rasch_conditional`` (girth's conditional ML, an independent implementation; both
take complete data only, as an items × persons integer array prepared outside the timing).
privirt gets the persons × items float array (NaN for missing) a user would pass, so its
time includes validation and conversion.

Agreement: ``max |Δβ|`` between privirt's centred difficulties and girth's conditional ML
(centred); girth stops at its own tolerance (about 1e-5).  The missing-data row has no peer
(girth needs complete data); its correctness per missingness pattern is tested against a
brute-force conditional likelihood in ``tests/test_cmle.py``.

Each method gets one untimed warm-up call on a small data set (imports, first-call costs),
then the best of ``--repeat`` timed runs.

Usage::

    python benchmarks/bench_cmle.py --threads 1
    python benchmarks/bench_cmle.py --rows 1e5x100 --repeat 3
    python benchmarks/bench_cmle.py --conditional-max-m 0     # skip girth's conditional ML
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ROWS = "1e5x100,1e5x200,1e5x500,1e4x50m0.1"


def _parse_rows(text: str):
    rows = []
    for part in text.split(","):
        part = part.lower()
        missing = 0.0
        if "m" in part.split("x")[1]:
            part, frac = part.split("m")
            missing = float(frac)
        n, m = part.split("x")
        rows.append((int(float(n)), int(float(m)), missing))
    return rows


def simulate(n: int, m: int, missing: float, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    beta = rng.normal(size=m)
    beta -= beta.mean()
    theta = rng.normal(size=n)
    X = (rng.random((n, m)) < 1.0 / (1.0 + np.exp(-(theta[:, None] - beta)))).astype(np.float64)
    if missing:
        X[rng.random((n, m)) < missing] = np.nan
    return X


def _best(fn, repeat: int):
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default=DEFAULT_ROWS,
                    help="n x m rows, 'm<frac>' suffix for missing cells (e.g. 1e4x50m0.1)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--conditional-max-m", type=int, default=100,
                    help="run girth's rasch_conditional only up to this many items (it is slow)")
    ap.add_argument("--threads", type=int, default=None,
                    help="BLAS threads (sets OPENBLAS_NUM_THREADS/OMP_NUM_THREADS and re-executes)")
    args = ap.parse_args(argv)
    if args.threads is not None and os.environ.get("OPENBLAS_NUM_THREADS") != str(args.threads):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
        os.execve(sys.executable, [sys.executable, *sys.argv], env)

    sys.path.insert(0, str(ROOT))
    import numpy as np
    from girth import rasch_conditional, rasch_mml

    import privirt

    warm = simulate(500, 10, 0.0, seed=1)
    privirt.cmle_estimate(warm)
    rasch_mml(warm.T.astype(int))
    rasch_conditional(warm.T.astype(int))

    print(f"# privirt {privirt.__version__}  numpy {np.__version__}  python {platform.python_version()}"
          f"  cpus={os.cpu_count()}  OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}"
          f"  OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}"
          f"  load={os.getloadavg()[0]:.1f}")
    print(f"{'n':>7} {'m':>4} {'missing':>7} | {'privirt s':>9} {'iter':>4} | {'mml s':>7} "
          f"{'mml/privirt':>11} | {'cond s':>7} {'cond/privirt':>12} {'max|Δβ| cond':>13}")
    for n, m, missing in _parse_rows(args.rows):
        X = simulate(n, m, missing)
        t_priv, res = _best(lambda: privirt.cmle_estimate(X), args.repeat)
        beta = res.beta.to_numpy()
        cells = [f"{n:>7} {m:>4} {missing:>7.2f} | {t_priv:>9.3f} {res.n_iter:>4} |"]
        if missing:
            cells.append(f"{'—':>7} {'—':>11} | {'—':>7} {'—':>12} {'—':>13}")
        else:
            data = X.T.astype(int)
            t_mml, _ = _best(lambda: rasch_mml(data), args.repeat)
            cells.append(f"{t_mml:>7.2f} {t_mml / t_priv:>10.1f}x |")
            if m <= args.conditional_max_m:
                t_cond, cond = _best(lambda: rasch_conditional(data), 1)
                d = np.asarray(cond["Difficulty"], dtype=float)
                diff = np.max(np.abs((d - d.mean()) - beta))
                cells.append(f"{t_cond:>7.2f} {t_cond / t_priv:>11.1f}x {diff:>13.1e}")
            else:
                cells.append(f"{'skipped':>7} {'—':>12} {'—':>13}")
        print(" ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
