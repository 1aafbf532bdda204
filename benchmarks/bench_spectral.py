"""Time and peak memory of privirt's pairwise counts + spectral estimator against a
re-implementation of the reference approach of the spectral-IRT authors.

The baseline follows the authors' published approach (re-implemented here, not copied):
responses are held as a float64 items × persons array with a sentinel for missing cells,
wrapped in ``numpy.ma`` masked arrays; ``Y = D (1 − D)ᵀ`` and ``B = A Aᵀ`` are masked
matrix products (``numpy.ma.dot``, which also multiplies the masks); the chain adds the
pseudo-count λ = 1 to every pair compared in at least one direction, normalises row ``i`` by
``d_i = Σ_k B_ik + 1``, puts the remainder on the diagonal, and the stationary distribution
comes from power iteration on a ``scipy.sparse`` CSC matrix (tolerance 1e-6 on the change in
ℓ2 norm, at most 10 000 steps); β = log(π/d), centred.

Each configuration runs in a fresh subprocess so that its peak resident set size
(``ru_maxrss``) is its own; the data are generated in chunks directly into each method's
storage format (privirt: int8 codes, n × m bytes; baseline: float64, 8 n m bytes), so the
peak includes the input as each method holds it.

Times are wall clock (``counts s``: ``pairwise_counts``, Y and B; ``total s``:
``spectral_estimate``, counts of Y plus the chain and its solve) and process CPU time
(``cpu s``), which is less sensitive to other load on a shared machine.  Both methods get
the same treatment: one untimed warm-up call on the first 1000 persons (lazy imports,
first-call costs), then the best of ``--repeat`` timed runs.

Usage::

    python benchmarks/bench_spectral.py --quick
    python benchmarks/bench_spectral.py --sizes 1e6x200 --device cpu
    python benchmarks/bench_spectral.py                 # the full grid (skips what cannot fit)
    python benchmarks/bench_spectral.py --sizes 1e7x1000 --device gpu --no-baseline
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
INVALID = -99999.0
P_OBSERVED = 0.9
FULL_GRID = [(n, m) for n in (10_000, 100_000, 1_000_000) for m in (50, 200, 1000)]
QUICK_GRID = [(10_000, 50), (10_000, 200), (100_000, 200)]


# ---------------------------------------------------------------------------------------
# data (generated chunk by chunk, never as a full float64 n × m temporary for privirt)
# ---------------------------------------------------------------------------------------
def _chunks(n: int, m: int, seed: int = 0):
    # about 2**22 cells per chunk: the float64 temporaries of the generator stay ~32 MiB each,
    # small next to either method's own memory
    rows = max(1000, 2**22 // m)
    rng = np.random.default_rng(seed)
    beta = rng.normal(size=m)
    beta -= beta.mean()
    for start in range(0, n, rows):
        c = min(rows, n - start)
        theta = rng.standard_normal(c)
        p = 1.0 / (1.0 + np.exp(-(theta[:, None] - beta[None, :])))
        x = (rng.random((c, m)) < p).astype(np.int8)
        x[rng.random((c, m)) >= P_OBSERVED] = -1
        yield start, x


def make_codes(n: int, m: int) -> np.ndarray:
    codes = np.empty((n, m), dtype=np.int8)
    for start, x in _chunks(n, m):
        codes[start : start + len(x)] = x
    return codes


def make_baseline_array(n: int, m: int) -> np.ndarray:
    """Items × persons float64 with the sentinel for missing (the authors' layout)."""
    perf = np.empty((m, n), dtype=np.float64)
    for start, x in _chunks(n, m):
        block = x.T.astype(np.float64)
        block[block < 0] = INVALID
        perf[:, start : start + x.shape[0]] = block
    return perf


# ---------------------------------------------------------------------------------------
# baseline: masked arrays + power iteration (re-implemented from the authors' description)
# ---------------------------------------------------------------------------------------
def baseline_spectral(perf: np.ndarray, lam: float = 1.0, max_iters: int = 10_000, eps: float = 1e-6):
    from scipy.sparse import csc_matrix

    m = perf.shape[0]
    resp = np.ma.masked_where(perf == INVALID, perf)
    wins = np.ma.dot(resp, (1.0 - resp).T)  # Y[i, j]: i right, j wrong
    answered = np.ma.masked_where(perf == INVALID, np.ones_like(perf))
    both = np.ma.dot(answered, answered.T)  # B[i, j]: answered both
    wins = np.round(np.asarray(wins.filled(0.0)))
    np.fill_diagonal(wins, 0.0)
    compared = (wins != 0) | (wins.T != 0)
    chain = np.where(compared, wins + lam, wins)
    d = np.asarray(np.ma.sum(both, axis=1)).astype(float) + 1.0
    for i in range(m):
        chain[i, :] /= d[i]
        chain[i, i] = 1.0 - chain[i, :].sum()
    chain = csc_matrix(chain)
    pi = np.ones(m)
    for _ in range(max_iters):
        nxt = pi @ chain
        nxt /= nxt.sum()
        if np.linalg.norm(nxt - pi) < eps:
            pi = nxt
            break
        pi = nxt
    beta = np.log(pi / d)
    return beta - beta.mean()


# ---------------------------------------------------------------------------------------
# one configuration (runs in its own process)
# ---------------------------------------------------------------------------------------
def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def worker(kind: str, n: int, m: int, device: str, repeat: int) -> dict:
    sys.path.insert(0, str(ROOT))
    out: dict = {"kind": kind, "n": n, "m": m, "device": device}
    if kind == "privirt":
        import pandas as pd

        import privirt
        from privirt.stats.api import pairwise_counts
        from privirt.data.responses import Responses

        codes = make_codes(n, m)
        resp = Responses(codes, pd.RangeIndex(n), pd.RangeIndex(m))
        out["input_mb"] = codes.nbytes / 2**20
        out["rss_before_mb"] = _rss_mb()
        # warm-up: lazy imports (scipy BLAS wrappers), and on the GPU cuBLAS handles and kernels
        pairwise_counts(resp.subset(np.arange(min(n, 1000))), device=device)
        t_counts, t_total, c_total = [], [], []
        for _ in range(repeat):
            t0 = time.perf_counter()
            pairwise_counts(resp, device=device)
            t_counts.append(time.perf_counter() - t0)
            t0, c0 = time.perf_counter(), time.process_time()
            res = privirt.spectral_estimate(resp, device=device)
            t_total.append(time.perf_counter() - t0)
            c_total.append(time.process_time() - c0)
        out.update(counts_s=min(t_counts), total_s=min(t_total), cpu_s=min(c_total),
                   solver=res.solver)
        if device == "gpu":
            # counts of data already in GPU memory (float16, NaN = missing): no host copy
            import cupy

            Xd = cupy.asarray(codes).astype(cupy.float16)
            Xd[Xd < 0] = cupy.nan
            pairwise_counts(Xd[:1000], device="gpu")
            t_dev = []
            for _ in range(repeat):
                cupy.cuda.Device().synchronize()
                t0 = time.perf_counter()
                pairwise_counts(Xd, device="gpu")
                cupy.cuda.Device().synchronize()
                t_dev.append(time.perf_counter() - t0)
            out["counts_device_s"] = min(t_dev)
            del Xd
        out["beta_head"] = res.beta.to_numpy()[:3].tolist()
    else:
        perf = make_baseline_array(n, m)
        out["input_mb"] = perf.nbytes / 2**20
        out["rss_before_mb"] = _rss_mb()
        # warm-up, as for privirt: lazy imports (scipy.sparse) and first-call costs are not
        # part of the method's time (untimed, they cost ~0.3 s, more than the whole
        # 10 000 x 50 run)
        baseline_spectral(perf[:, : min(n, 1000)])
        t_total, c_total = [], []
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            beta = baseline_spectral(perf)
            t_total.append(time.perf_counter() - t0)
            c_total.append(time.process_time() - c0)
        out.update(total_s=min(t_total), cpu_s=min(c_total))
        out["beta_head"] = beta[:3].tolist()
    out["peak_mb"] = _rss_mb()
    return out


def run_config(kind: str, n: int, m: int, device: str, repeat: int, timeout: float) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind,
           "--sizes", f"{n}x{m}", "--device", device, "--repeat", str(repeat)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"kind": kind, "n": n, "m": m, "device": device, "error": f"timeout > {timeout:.0f} s"}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"kind": kind, "n": n, "m": m, "device": device, "error": last[:80]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _parse_sizes(text: str) -> list[tuple[int, int]]:
    sizes = []
    for part in text.split(","):
        n, m = part.lower().split("x")
        sizes.append((int(float(n)), int(float(m))))
    return sizes


def _baseline_fits(n: int, m: int, mem_gb: float) -> bool:
    # float64 input + its complement + filled copies + masks: about 5 × 8 n m bytes
    return 5 * 8 * n * m / 2**30 < 0.8 * mem_gb


def _total_mem_gb() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):  # pragma: no cover
        return 16.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", help="comma-separated NxM list, e.g. 1e5x200,1e6x200")
    ap.add_argument("--quick", action="store_true", help="small grid (a few seconds)")
    ap.add_argument("--device", choices=("cpu", "gpu", "both"), default="cpu")
    ap.add_argument("--repeat", type=int, default=1,
                    help="timed repetitions of each method after its warm-up (best of)")
    ap.add_argument("--no-baseline", action="store_true", help="privirt rows only")
    ap.add_argument("--baseline-timeout", type=float, default=600.0)
    ap.add_argument("--threads", type=int, default=None,
                    help="BLAS/OpenMP threads for every run (default: the library's own)")
    ap.add_argument("--worker", choices=("privirt", "baseline"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        (n, m), = _parse_sizes(args.sizes)
        print(json.dumps(worker(args.worker, n, m, args.device, args.repeat)))
        return 0

    if args.threads:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.threads)
    sizes = _parse_sizes(args.sizes) if args.sizes else (QUICK_GRID if args.quick else FULL_GRID)
    devices = ["cpu", "gpu"] if args.device == "both" else [args.device]
    mem_gb = _total_mem_gb()
    header = (f"{'n':>9} {'m':>5} {'dev':>4} {'counts s':>9} {'total s':>8} {'cpu s':>7} "
              f"{'peak MB':>8} {'base s':>8} {'base cpu':>8} {'base MB':>8} {'speedup':>8} "
              f"{'cpu ratio':>9} {'mem ratio':>9}")
    print(header)
    print("-" * len(header))
    for n, m in sizes:
        base = None
        if not args.no_baseline:
            if _baseline_fits(n, m, mem_gb):
                base = run_config("baseline", n, m, "cpu", args.repeat, args.baseline_timeout)
            else:
                base = {"error": f"skipped: needs ~{5 * 8 * n * m / 2**30:.0f} GiB"}
        for dev in devices:
            ours = run_config("privirt", n, m, dev, args.repeat, 3600)
            if "error" in ours:
                print(f"{n:>9} {m:>5} {dev:>4}  privirt failed: {ours['error']}")
                continue
            if "counts_device_s" in ours:
                print(f"{'':>21} counts of device-resident data: {ours['counts_device_s']:.4f} s")
            if base is None or "error" in base:
                note = "not run" if base is None else base["error"]
                print(f"{n:>9} {m:>5} {dev:>4} {ours['counts_s']:>9.3f} {ours['total_s']:>8.3f} "
                      f"{ours['cpu_s']:>7.2f} {ours['peak_mb']:>8.0f}   baseline {note}")
                continue
            print(f"{n:>9} {m:>5} {dev:>4} {ours['counts_s']:>9.3f} {ours['total_s']:>8.3f} "
                  f"{ours['cpu_s']:>7.2f} {ours['peak_mb']:>8.0f} {base['total_s']:>8.2f} "
                  f"{base['cpu_s']:>8.2f} {base['peak_mb']:>8.0f} "
                  f"{base['total_s'] / ours['total_s']:>7.1f}x "
                  f"{base['cpu_s'] / ours['cpu_s']:>8.1f}x {ours['peak_mb'] / base['peak_mb']:>9.3f}")
            gap = np.max(np.abs(np.subtract(ours["beta_head"], base["beta_head"])))
            if gap > 0.05:
                print(f"    note: first β differ by {gap:.3f} between privirt and the baseline")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
