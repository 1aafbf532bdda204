"""Time ``cmle_estimate`` against girth's Rasch estimators, side by side.

Peers (girth 0.8): ``rasch_mml`` (marginal ML, the fast Rasch estimator a user would reach
for) and ``rasch_conditional`` (girth's conditional ML, an independent implementation; both
take complete data only, as an items × persons integer array prepared outside the timing).
privirt gets the persons × items float array (NaN for missing) a user would pass, so its
time includes validation and conversion.

Agreement: ``max |Δβ|`` between privirt's centred difficulties and girth's conditional ML
(centred; girth stops at its own tolerance, about 1e-5), and a plain reference CML written in
this script (``reference_cml``).  girth's conditional ML is slow (minutes at m = 100), so it
runs only up to ``--conditional-max-m`` items.  ``cpu s`` is privirt's process CPU time, less
sensitive than wall time to other load on a shared machine.  The missing-data rows have no
girth peer (girth needs complete data; eRm takes them, below); their correctness per
missingness pattern is tested against a brute-force conditional likelihood in
``tests/test_cmle.py``.

Each method gets one untimed warm-up call on a small data set (imports, first-call costs),
then the best of ``--repeat`` timed runs.

R's eRm (``--erm-rows``, where ``Rscript`` and eRm are installed — Debian ``apt-get install
r-base-core r-cran-erm`` — else skipped with a note): the same simulated complete data,
**CML** (``RM(X)`` against ``cmle_estimate(X)``) and **fit statistics** from there
(``itemfit`` and ``personfit`` of ``person.parameter(RM(X))`` — MLE abilities — against
``item_fit`` and ``person_fit`` of the CML result, which estimate WLE abilities), timed by
``proc.time()`` in R and wall / process CPU in Python, one thread each (R with
``OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1``; privirt under ``--threads 1``, or BLAS limited to
one thread by threadpoolctl for these rows otherwise); ``max|Δβ|`` compares the centred
difficulties.  An ``--erm-rows`` row with missing cells (``500x20m0.2``) gives eRm the same
matrix with ``NA`` (eRm fits one group per missingness pattern); a run longer than
``--erm-timeout`` seconds is reported as not finished.

``--missing F`` sets the fraction of missing cells of every row of ``--rows`` (the rows then
have no peer), and ``--fresh`` times each privirt call in a fresh process instead: the CPU
seconds of the default call as a user makes it (imports, numba's cached kernels, no warm-up),
by ``time.process_time`` around the call, with complete data and with missing cells side by
side (BENCHMARKS.md, "Session 20: CML with missing cells").

Usage::

    python benchmarks/bench_cmle.py --threads 1
    python benchmarks/bench_cmle.py --rows 1e5x100 --repeat 3
    python benchmarks/bench_cmle.py --conditional-max-m 0     # skip girth's conditional ML
    python benchmarks/bench_cmle.py --threads 1 --rows "" --erm-rows 1e4x20,1e4x50,1e5x50
    python benchmarks/bench_cmle.py --threads 1 --rows "" --erm-rows 200x10m0.2,500x20m0.2 --repeat 1
    python benchmarks/bench_cmle.py --rows 1e4x100,1e3x1000 --missing 0.2 --fresh --erm-rows ""
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ROWS = "1e5x50,1e5x100,1e5x200,1e5x500,1e4x50m0.1"


def _parse_rows(text: str):
    rows = []
    for part in filter(None, text.split(",")):
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


def reference_cml(X):
    """A deliberately plain CML for complete data, independent of privirt's algorithm: ESFs by
    the summation algorithm in log space, each leave-one-out ESF recomputed from scratch
    (O(m³) per gradient), BFGS from scipy.  Returns centred β."""
    import numpy as np
    from scipy import optimize

    n, m = X.shape
    score = X.sum(axis=1).astype(int)
    keep = (score > 0) & (score < m)
    s = X[keep].sum(axis=0)
    n_r = np.bincount(score[keep], minlength=m + 1).astype(float)

    def log_esf(le):
        g = np.full(le.size + 1, -np.inf)
        g[0] = 0.0
        for v in le:
            g[1:] = np.logaddexp(g[1:], v + g[:-1])
        return g

    def nll(b):
        le = -b
        lg = log_esf(le)
        grad = s.copy()
        for i in range(m):
            lgi = log_esf(np.delete(le, i))
            grad[i] -= n_r[1:m] @ np.exp(le[i] + lgi[: m - 1] - lg[1:m])
        return s @ b + n_r[1:m] @ lg[1:m], grad

    p = np.clip(s / keep.sum(), 1e-3, 1 - 1e-3)
    b0 = -np.log(p / (1 - p))
    opt = optimize.minimize(nll, b0 - b0.mean(), jac=True, method="BFGS",
                            options={"gtol": 1e-9 * keep.sum(), "maxiter": 2000})
    return opt.x - opt.x.mean()


ERM_SCRIPT = r"""
suppressMessages(library(eRm))
args <- commandArgs(trailingOnly = TRUE)
X <- as.matrix(read.csv(args[1]))
reps <- as.integer(args[2])
best <- c(Inf, Inf, Inf, Inf)
for (r in seq_len(reps)) {
  t0 <- proc.time(); m <- RM(X); t1 <- proc.time()
  pp <- person.parameter(m); fi <- itemfit(pp); fp <- personfit(pp); t2 <- proc.time()
  d1 <- t1 - t0; d2 <- t2 - t1
  if (d1[["elapsed"]] < best[1]) best[1:2] <- c(d1[["elapsed"]], d1[["user.self"]] + d1[["sys.self"]])
  if (d2[["elapsed"]] < best[3]) best[3:4] <- c(d2[["elapsed"]], d2[["user.self"]] + d2[["sys.self"]])
}
writeLines(sprintf("%.17g", -m$betapar), args[3])
cat(sprintf("%.4f %.4f %.4f %.4f\n", best[1], best[2], best[3], best[4]))
"""


def erm_available() -> str | None:
    """Why eRm cannot run (None when Rscript and eRm are there)."""
    import shutil
    import subprocess

    if shutil.which("Rscript") is None:
        return "Rscript not found (apt-get install r-base-core r-cran-erm)"
    proc = subprocess.run(["Rscript", "-e", "suppressMessages(library(eRm))"],
                          capture_output=True, text=True)
    return None if proc.returncode == 0 else "R package eRm not installed (apt-get install r-cran-erm)"


def run_erm(X, repeat: int, timeout: float | None = None):
    """eRm's CML and fit-statistic seconds (best wall of ``repeat``, CPU of that run) and its
    difficulties (eRm's β are easiness parameters: −β); missing cells are written as ``NA``.
    ``None`` when eRm did not finish within ``timeout`` seconds."""
    import subprocess
    import tempfile

    import numpy as np
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        pd.DataFrame(X, columns=[f"i{j}" for j in range(X.shape[1])]).to_csv(
            tmp / "x.csv", index=False, na_rep="NA", float_format="%d")
        (tmp / "run.R").write_text(ERM_SCRIPT)
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        try:
            proc = subprocess.run(["Rscript", str(tmp / "run.R"), str(tmp / "x.csv"), str(repeat),
                                   str(tmp / "beta.txt")], capture_output=True, text=True, env=env,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        if proc.returncode != 0:
            raise RuntimeError(f"eRm failed: {proc.stderr.strip()[-400:]}")
        secs = [float(v) for v in proc.stdout.split()[-4:]]
        beta = np.loadtxt(tmp / "beta.txt")
    return secs, beta


def erm_rows(rows, repeat: int, timeout: float | None = None) -> None:
    """privirt against eRm, side by side: CML, then fit statistics from the CML result; a row's
    ``m<frac>`` suffix gives it missing cells (eRm: ``NA``, one group per missingness pattern)."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    import privirt

    why = erm_available()
    if why:
        print(f"\n# eRm rows skipped: {why}")
        return
    warm = simulate(500, 10, 0.0, seed=1)
    privirt.item_fit(warm, privirt.cmle_estimate(warm))
    print(f"\n# privirt vs eRm (one thread each), best of {repeat}; load={os.getloadavg()[0]:.1f}")
    print("| n | m | privirt CML s (CPU) | eRm RM s (CPU) | CML × (CPU) | privirt fit s (CPU) "
          "| eRm fit s (CPU) | fit × (CPU) | max|Δβ| |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, m, frac in rows:
        X = simulate(n, m, frac)
        X = X[(~np.isnan(X)).sum(axis=1) >= 2]  # eRm refuses persons with one answer (no CML information)
        with threadpool_limits(limits=1):
            t_cml, c_cml, res = _best(lambda: privirt.cmle_estimate(X), repeat)
            t_fit, c_fit, _ = _best(lambda: (privirt.item_fit(X, res), privirt.person_fit(X, res)),
                                    repeat)
        shape = f"{n} | {m}" + (f" ({frac:g} missing)" if frac else "")
        erm = run_erm(X, repeat, timeout)
        if erm is None:
            print(f"| {shape} | {t_cml:.3f} ({c_cml:.3f}) | did not finish in {timeout:g} s | "
                  f"> {timeout / t_cml:.0f}× | {t_fit:.3f} ({c_fit:.3f}) | — | — | — |", flush=True)
            continue
        (e_cml, ec_cml, e_fit, ec_fit), beta = erm
        beta = beta - beta.mean()
        d = np.max(np.abs(beta - res.beta.to_numpy()))
        print(f"| {shape} | {t_cml:.3f} ({c_cml:.3f}) | {e_cml:.2f} ({ec_cml:.2f}) "
              f"| {e_cml / t_cml:.0f}× ({ec_cml / max(c_cml, 1e-9):.0f}×) "
              f"| {t_fit:.3f} ({c_fit:.3f}) | {e_fit:.2f} ({ec_fit:.2f}) "
              f"| {e_fit / t_fit:.0f}× ({ec_fit / max(c_fit, 1e-9):.0f}×) | {d:.1e} |", flush=True)
    print(f"load after: {os.getloadavg()[0]:.1f}")


def _best(fn, repeat: int):
    """Best wall time of ``repeat`` calls, the process CPU time of that call, and a result."""
    best, cpu, out = float("inf"), float("nan"), None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        wall = time.perf_counter() - t
        if wall < best:
            best, cpu = wall, time.process_time() - c
    return best, cpu, out


_ONE = """
import sys, time
import numpy as np
sys.path.insert(0, {root!r})
sys.path.insert(0, {here!r})
from bench_cmle import simulate
X = simulate({n}, {m}, {missing})
import privirt
c = time.process_time()
res = privirt.cmle_estimate(X)
print(time.process_time() - c, res.n_iter)
"""


def fresh_rows(rows, missing: float) -> None:
    """CPU seconds of ``cmle_estimate(X)`` in a fresh process per call, complete and with
    ``missing`` cells (or the row's own fraction)."""
    import subprocess

    print(f"\n# cmle_estimate, one fresh process per call (CPU s); load={os.getloadavg()[0]:.1f}")
    print("| n | m | complete CPU s (iter) | missing | missing CPU s (iter) |")
    print("|---|---|---|---|---|")
    for n, m, frac in rows:
        frac = frac or missing
        cells = []
        for f in (0.0, frac):
            code = _ONE.format(root=str(ROOT), here=str(ROOT / "benchmarks"), n=n, m=m, missing=f)
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True).stdout.split()
            cells.append(f"{float(out[-2]):.2f} ({out[-1]})")
        print(f"| {n} | {m} | {cells[0]} | {frac:g} | {cells[1]} |", flush=True)
    print(f"load after: {os.getloadavg()[0]:.1f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default=DEFAULT_ROWS,
                    help="n x m rows, 'm<frac>' suffix for missing cells (e.g. 1e4x50m0.1)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--missing", type=float, default=0.0,
                    help="fraction of missing cells for every row of --rows without its own")
    ap.add_argument("--fresh", action="store_true",
                    help="time each call in a fresh process, complete and with --missing cells")
    ap.add_argument("--conditional-max-m", type=int, default=50,
                    help="run girth's rasch_conditional only up to this many items (it is slow)")
    ap.add_argument("--reference-max-m", type=int, default=100,
                    help="run the plain reference CML (this script) only up to this many items")
    ap.add_argument("--threads", type=int, default=None,
                    help="BLAS threads (sets OPENBLAS_NUM_THREADS/OMP_NUM_THREADS and re-executes)")
    ap.add_argument("--erm-rows", default="2000x20,1e4x20,1e4x50",
                    help="n x m rows timed against R's eRm (empty: none; 'm<frac>' suffix: missing cells)")
    ap.add_argument("--erm-timeout", type=float, default=600.0,
                    help="seconds before an eRm run is reported as not finished")
    args = ap.parse_args(argv)
    if args.missing and not 0.0 < args.missing < 1.0:
        ap.error(f"--missing must be in (0, 1), got {args.missing}")
    if args.fresh and not all(f or args.missing for _, _, f in _parse_rows(args.rows)):
        ap.error("--fresh compares complete data with missing cells: give --missing F")
    if args.threads is not None and os.environ.get("OPENBLAS_NUM_THREADS") != str(args.threads):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
        os.execve(sys.executable, [sys.executable, *sys.argv], env)

    sys.path.insert(0, str(ROOT))
    import numpy as np

    import privirt

    print(f"# privirt {privirt.__version__}  numpy {np.__version__}  python {platform.python_version()}"
          f"  cpus={os.cpu_count()}  OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}"
          f"  OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}"
          f"  load={os.getloadavg()[0]:.1f}")
    if _parse_rows(args.erm_rows):
        erm_rows(_parse_rows(args.erm_rows), args.repeat, args.erm_timeout)
    rows = [(n, m, f or args.missing) for n, m, f in _parse_rows(args.rows)]
    if args.fresh:
        fresh_rows(rows, args.missing)
        return 0
    if not rows:
        return 0
    from girth import rasch_conditional, rasch_mml

    warm = simulate(500, 10, 0.0, seed=1)
    privirt.cmle_estimate(warm)
    rasch_mml(warm.T.astype(int))
    rasch_conditional(warm.T.astype(int))

    print(f"{'n':>7} {'m':>4} {'missing':>7} | {'privirt s':>9} {'cpu s':>6} {'iter':>4} | {'mml s':>7} "
          f"{'mml/privirt':>11} | {'cond s':>7} {'cond/privirt':>12} {'max|Δβ| cond':>13} | "
          f"{'max|Δβ| ref':>12}")
    for n, m, missing in rows:
        X = simulate(n, m, missing)
        t_priv, c_priv, res = _best(lambda: privirt.cmle_estimate(X), args.repeat)
        beta = res.beta.to_numpy()
        cells = [f"{n:>7} {m:>4} {missing:>7.2f} | {t_priv:>9.3f} {c_priv:>6.2f} {res.n_iter:>4} |"]
        if missing:
            cells.append(f"{'—':>7} {'—':>11} | {'—':>7} {'—':>12} {'—':>13} | {'—':>12}")
        else:
            data = X.T.astype(int)
            t_mml, _, _ = _best(lambda: rasch_mml(data), args.repeat)
            cells.append(f"{t_mml:>7.2f} {t_mml / t_priv:>10.1f}x |")
            if m <= args.conditional_max_m:
                t_cond, _, cond = _best(lambda: rasch_conditional(data), 1)
                d = np.asarray(cond["Difficulty"], dtype=float)
                diff = np.max(np.abs((d - d.mean()) - beta))
                cells.append(f"{t_cond:>7.2f} {t_cond / t_priv:>11.1f}x {diff:>13.1e}")
            else:
                cells.append(f"{'skipped':>7} {'—':>12} {'—':>13}")
            if m <= args.reference_max_m:
                ref = reference_cml(X)
                cells.append(f"| {np.max(np.abs(ref - beta)):>12.1e}")
            else:
                cells.append(f"| {'skipped':>12}")
        print(" ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
