"""Time ``pairwise_counts`` (CPU) against a float32 SGEMM of the same shape.

The peer is the matrix product the counts are built on, with nothing else to do: ``FᵀF`` of
an n × m float32 matrix already in memory, by ``scipy.linalg.blas.sgemm`` (``trans_a``).
SSYRK (``FᵀF``, upper triangle, half the flops) is printed beside it.  privirt starts from
its int8 codes (n × m bytes) and returns exact int64 ``Y`` and ``B``: its time includes the
int8 → float32 conversion, the products, the int64 accumulation and the item totals.

Ratio = SGEMM time / privirt time, on wall time and on process CPU time (the latter is less
sensitive to other load on a shared machine; with several BLAS threads CPU time also counts
threads that spin while waiting) (≥ 0.7 is the target of issue 14 on complete data).
With missing cells privirt needs two products (``CᵀW`` GEMM and ``AᵀA`` SYRK, 1.5 SGEMMs of
flops), so its ratio there is bounded by about 0.67 at equal BLAS efficiency.

Each run is the best of ``--repeat`` after one untimed warm-up on the first 1000 persons.

Usage::

    python benchmarks/bench_counts.py                      # 1e6 x 200, complete and 90 % observed
    python benchmarks/bench_counts.py --sizes 1e5x200 --threads 1
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _parse_sizes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        n, m = part.lower().split("x")
        out.append((int(float(n)), int(float(m))))
    return out


def make_codes(n: int, m: int, p_observed: float, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    beta = rng.normal(size=m)
    codes = np.empty((n, m), dtype=np.int8)
    rows = max(1000, 2**22 // m)
    for start in range(0, n, rows):
        c = min(rows, n - start)
        theta = rng.standard_normal(c)
        p = 1.0 / (1.0 + np.exp(-(theta[:, None] - beta[None, :])))
        x = (rng.random((c, m)) < p).astype(np.int8)
        if p_observed < 1:
            x[rng.random((c, m)) >= p_observed] = -1
        codes[start : start + c] = x
    return codes


def _best(fn, repeat: int) -> tuple[float, float]:
    """Best wall time and best process CPU time over ``repeat`` calls."""
    walls, cpus = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return min(walls), min(cpus)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e6x200")
    ap.add_argument("--observed", default="1.0,0.9", help="observed fractions, comma-separated")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None,
                    help="BLAS threads (sets OPENBLAS_NUM_THREADS/OMP_NUM_THREADS and re-executes)")
    args = ap.parse_args(argv)
    if args.threads is not None and os.environ.get("OPENBLAS_NUM_THREADS") != str(args.threads):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
        os.execve(sys.executable, [sys.executable, *sys.argv], env)

    sys.path.insert(0, str(ROOT))
    import numpy as np
    import pandas as pd
    from scipy.linalg.blas import sgemm, ssyrk

    import privirt
    from privirt.stats.api import pairwise_counts
    from privirt.data.responses import Responses

    print(f"# privirt {privirt.__version__}  numpy {np.__version__}  python {platform.python_version()}"
          f"  cpus={os.cpu_count()}  OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}"
          f"  OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}  load={os.getloadavg()[0]:.1f}")
    print(f"{'n':>9} {'m':>5} {'observed':>8} | {'privirt s':>9} {'cpu s':>6} | {'sgemm s':>8} "
          f"{'cpu s':>6} {'ssyrk s':>8} {'cpu s':>6} | {'sgemm/privirt':>13} {'(cpu)':>6}")
    for n, m in _parse_sizes(args.sizes):
        for frac in (float(x) for x in args.observed.split(",")):
            codes = make_codes(n, m, frac)
            resp = Responses(codes, pd.RangeIndex(n), pd.RangeIndex(m))
            pairwise_counts(resp.subset(np.arange(min(1000, n))), device="cpu", method="dense")
            t_priv = _best(lambda: pairwise_counts(resp, device="cpu", method="dense"), args.repeat)
            F = (codes == 1).astype(np.float32)
            # F.T is a Fortran-ordered m x n view: FᵀF = op(F.T) op(F.T)ᵀ without copies
            sgemm(1.0, F[:1000].T, F[:1000].T, trans_b=1)
            t_gemm = _best(lambda: sgemm(1.0, F.T, F.T, trans_b=1), args.repeat)
            t_syrk = _best(lambda: ssyrk(1.0, F.T, trans=0, lower=0), args.repeat)
            del F
            print(f"{n:>9} {m:>5} {frac:>8.2f} | {t_priv[0]:>9.3f} {t_priv[1]:>6.2f} | "
                  f"{t_gemm[0]:>8.3f} {t_gemm[1]:>6.2f} {t_syrk[0]:>8.3f} {t_syrk[1]:>6.2f} | "
                  f"{t_gemm[0] / t_priv[0]:>12.2f}x {t_gemm[1] / t_priv[1]:>5.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
