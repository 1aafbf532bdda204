"""The default private calls at realistic sizes, side by side in one run (issue 24).

Cases (each: ``private_spectral_estimate`` with its defaults — noise-aware/spectral "auto",
its default bootstrap replicates (200 up to 1000 items, fewer beyond) — beside ``private_totals_estimate`` with its own 200 replicates, on
the same simulated Rasch data, ε = 0.1 unless stated, δ = 1e-4, seeded noise, i.e. NOT private,
as a benchmark should be; wall seconds and, beside them, the process's CPU seconds, which a
machine shared with other jobs inflates far less):

* ``10000x100``  n = 10,000, m = 100 (target: spectral within 3× of totals);
* ``1000x1000``  n = 1,000, m = 1,000 (target ≤ 10 s each);
* ``30x5000``    n = 30, m = 5,000 (target ≤ 60 s and ≤ 2 GiB peak each);
* ``10000x2000``  n = 10,000, m = 2,000 at ε = 1, where ``"auto"`` takes the noise-aware fit
  (the point estimate and its bootstrap run O(m³) Fisher steps: minutes of CPU; not in the
  default list; BENCHMARKS.md, "Session 22");
* ``10000x5000``  n = 10,000, m = 5,000 at ε = 1 (as above, longer still);
* ``calibration`` the totals release's calibration (before the debit) for m up to 10⁴
  (target ≤ 1 s).

``--blas both`` also runs each call with BLAS's own threads (``privirt._threads.LIMIT_BLAS =
False``, the behaviour before the limit) so that the effect of the one-thread limit is seen
in the same run.  ``--busy`` starts a CPU-bound Python process beside the benchmark (the
"other core busy" condition) and stops it at the end.  The 1-minute load average is printed
before each case (the machine may be shared).

Run: ``python benchmarks/bench_defaults.py [--cases 10000x100 1000x1000 30x5000 10000x2000
10000x5000 calibration]
[--busy] [--blas both|limited] [--methods spectral totals] [--n-boot N]``.  Peak RSS is the
process's (``ru_maxrss``): run one method per process to read each one's peak.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import privirt  # noqa: E402
from privirt import _threads  # noqa: E402
from _harness import busy_core  # noqa: E402

SIZES = {"10000x100": (10_000, 100), "1000x1000": (1_000, 1_000), "30x5000": (30, 5_000),
         "10000x2000": (10_000, 2_000), "10000x5000": (10_000, 5_000)}
EPSILON, DELTA = 0.1, 1e-4
#: Cases run at another ε than :data:`EPSILON` (the noise-aware default needs ε = 1 at n = 10⁴).
CASE_EPSILON = {"10000x2000": 1.0, "10000x5000": 1.0}


def _load() -> str:
    return "%.2f %.2f %.2f" % os.getloadavg()


def _peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _time(fn, *args, **kwargs):
    t, c = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    _time.cpu = time.process_time() - c  # this process's CPU seconds (all its threads)
    return time.perf_counter() - t, out


def warm_up() -> None:
    """Import both estimators' modules (privirt imports lazily) and their scipy parts on a tiny
    data set, so that neither timed call pays the one-off imports (~3 s, which the first call
    of the earlier runs carried)."""
    X = privirt.simulate_rasch(200, 5, seed=1)[0]
    for fn in (privirt.private_spectral_estimate, privirt.private_totals_estimate):
        for est in (("auto",) if fn is privirt.private_totals_estimate else ("spectral", "noise_aware")):
            kw = {} if fn is privirt.private_totals_estimate else {"estimator": est}
            fn(X, epsilon=1.0, delta=DELTA, seed=1, n_boot=20, progress=False, **kw)


def run_case(name: str, blas_modes: list[bool], n_boot: int, methods: tuple[str, ...] = ("spectral", "totals")) -> None:
    n, m = SIZES[name]
    eps = CASE_EPSILON.get(name, EPSILON)
    X = privirt.simulate_rasch(n, m, seed=24)[0]
    print(f"\n== {name}: n={n}, m={m}, eps={eps}, delta={DELTA}, n_boot={n_boot}  (load {_load()})")
    for limited in blas_modes:
        _threads.LIMIT_BLAS = limited
        tag = "1 BLAS thread " if limited else "BLAS's threads"
        times = {}
        for method, fn in (("spectral", privirt.private_spectral_estimate),
                           ("totals", privirt.private_totals_estimate)):
            if method not in methods:
                continue
            nb = {} if n_boot is None else {"n_boot": n_boot}  # None: the method's own default
            sec, res = _time(fn, X, epsilon=eps, delta=DELTA, seed=1, progress=False, **nb)
            times[method] = sec
            extra = f" estimator={res.info.get('estimator')}" if method == "spectral" else ""
            extra += f" n_boot={res.info.get('n_boot')}"
            print(f"  [{tag}] {method:8s} {sec:8.2f} s (cpu {_time.cpu:7.2f} s)  median se {np.nanmedian(res.se):.3f}{extra}"
                  f"  (peak RSS so far {_peak_gib():.2f} GiB, load {_load()})", flush=True)
        if len(times) == 2:
            print(f"  [{tag}] spectral / totals = {times['spectral'] / times['totals']:.2f}x")
    _threads.LIMIT_BLAS = True


def run_calibration() -> None:
    from privirt.private.measurements import TotalsGaussian
    from mechanisms.measures import ApproxDP

    print(f"\n== calibration of the totals release (before the debit)  (load {_load()})")
    for m in (100, 1000, 5000, 10_000):
        for n in (30, 1000, 100_000):
            sec, _ = _time(TotalsGaussian.calibrate, ApproxDP(EPSILON, DELTA), n_persons=n, n_items=m)
            print(f"  m={m:6d} n={n:7d}: {sec:7.3f} s (cpu {_time.cpu:6.3f} s)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=["10000x100"], choices=[*SIZES, "calibration"])
    ap.add_argument("--busy", action="store_true", help="run a CPU-bound process beside the benchmark")
    ap.add_argument("--blas", choices=("both", "limited"), default="both")
    ap.add_argument("--n-boot", type=int, default=None, help="default: each method's own default")
    ap.add_argument("--methods", nargs="+", default=["spectral", "totals"], choices=["spectral", "totals"])
    args = ap.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} cpus, "
          f"busy={'yes' if args.busy else 'no'}, load {_load()}")
    warm_up()
    with busy_core(args.busy):
        for case in args.cases:
            if case == "calibration":
                run_calibration()
            else:
                run_case(case, [False, True] if args.blas == "both" else [True], args.n_boot, tuple(args.methods))


if __name__ == "__main__":
    main()
