"""Throughput and memory of the `mechanisms` samplers against OpenDP, side by side.

For each mechanism, scale and number of draws ``n`` the script reports:

* privirt draws/s: best of ``--repeats`` timed calls of ``.sample(n)`` (native backend, secure
  OS-keyed generator, i.e. the configuration used for real releases);
* OpenDP draws/s: ``make_gaussian`` / ``make_laplace`` on an integer vector of ``min(n,
  --opendp-max)`` zeros, best of ``--repeats`` timed calls (after a warm-up, as for privirt),
  **extrapolated per draw** to ``n`` (OpenDP costs about 10 µs per draw, so 10^7 draws would
  take minutes; the per-draw cost of a vector measurement is flat in ``n``). Rows where
  OpenDP was run on fewer draws are marked ``*``;
* ratio privirt / OpenDP;
* for randomized response the peer is OpenDP's ``make_randomized_response_bool``, which takes
  one bool per call (called in a Python loop, at most 5000 calls, extrapolated);
* peak memory of ``.sample(n)``: the tracemalloc peak (numpy reports its buffers to
  tracemalloc), from a separate untimed call.

Usage::

    python benchmarks/bench_mechanisms.py                 # 10^4 .. 10^7 draws, default scales
    python benchmarks/bench_mechanisms.py --quick         # small sizes, for a smoke test
    python benchmarks/bench_mechanisms.py --sizes 1e6 --sigmas 0.5 1e6
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import tracemalloc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

import numpy as np  # noqa: E402

import mechanisms  # noqa: E402


def _opendp_rate(kind: str, scale: float, n: int, repeats: int) -> float:
    """OpenDP draws/s: after a warm-up call, the best of ``repeats`` timed calls (the same
    protocol as :func:`_native_rate`)."""
    return n / min(_opendp_seconds(kind, scale, n) for _ in range(repeats))


def _opendp_seconds(kind: str, scale: float, n: int) -> float:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    vec = dp.vector_domain(dp.atom_domain(T="i64"))
    if kind == "gaussian":
        meas = dp.m.make_gaussian(vec, dp.l2_distance(T="i64"), scale=scale)
    else:
        meas = dp.m.make_laplace(vec, dp.l1_distance(T="i64"), scale=scale)
    if kind == "rr":  # scale is epsilon; OpenDP's randomized response acts on one bool per call
        import math

        meas = dp.m.make_randomized_response_bool(prob=1.0 / (1.0 + math.exp(-scale)))
        meas(True)
        t0 = time.perf_counter()
        for _ in range(n):
            meas(True)
        return time.perf_counter() - t0
    zeros = [0] * n
    meas(zeros[: min(n, 100)])  # warm up
    t0 = time.perf_counter()
    meas(zeros)
    return time.perf_counter() - t0


def _native_rate(mech, n: int, repeats: int) -> float:
    mech.sample(min(n, 1 << 16))  # warm up (tables, page faults)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        mech.sample(n)
        best = min(best, time.perf_counter() - t0)
    return n / best


def _peak_mib(mech, n: int) -> float:
    tracemalloc.start()
    tracemalloc.reset_peak()
    mech.sample(n)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[1e4, 1e5, 1e6, 1e7],
                    help="numbers of draws (default 1e4 1e5 1e6 1e7)")
    ap.add_argument("--sigmas", type=float, nargs="+", default=[0.5, 3.7, 100.0, 1e4, 1e6],
                    help="Gaussian sigmas and Laplace scales (default 0.5 3.7 100 1e4 1e6)")
    ap.add_argument("--mechanisms", nargs="+", default=["gaussian", "laplace", "rr"],
                    choices=["gaussian", "laplace", "rr"])
    ap.add_argument("--opendp-max", type=int, default=20_000,
                    help="largest OpenDP run; its per-draw rate is extrapolated beyond (default 20000)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="sizes 1e4 1e5, two scales, OpenDP on <= 5000 draws")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.sigmas, args.opendp_max, args.repeats = [1e4, 1e5], [3.7, 1e6], 5000, 2
    sizes = [int(s) for s in args.sizes]

    print(f"# privirt mechanisms benchmark  python {platform.python_version()}  numpy {np.__version__}  "
          f"{platform.machine()}  cpus={os.cpu_count()}")
    print("# OpenDP column: '*' = measured on --opendp-max draws and extrapolated per draw")
    header = f"{'mechanism':<18}{'sigma/scale':>12}{'n draws':>11}{'privirt draws/s':>17}" \
             f"{'OpenDP draws/s':>17}{'ratio':>9}{'peak MiB':>10}"
    print(header)
    print("-" * len(header))
    for kind in args.mechanisms:
        params = [1.0, 0.1] if kind == "rr" else args.sigmas
        for p in params:
            if kind == "gaussian":
                mech, name = mechanisms.DiscreteGaussian(p), "DiscreteGaussian"
            elif kind == "laplace":
                mech, name = mechanisms.DiscreteLaplace(p), "DiscreteLaplace"
            else:
                rr, name = mechanisms.RandomizedResponse(p), "RandomizedResp."
            n_odp = min(max(sizes), args.opendp_max if kind != "rr" else min(args.opendp_max, 5000))
            odp_rate = _opendp_rate(kind, p, n_odp, args.repeats)
            for n in sizes:
                if kind == "rr":
                    bits = np.zeros(n, dtype=np.int64)

                    class _Wrap:
                        def sample(self, m, _b=bits):
                            return rr.apply(_b[:m])

                    target = _Wrap()
                else:
                    target = mech
                rate = _native_rate(target, n, args.repeats)
                peak = _peak_mib(target, n)
                star = "*" if n > n_odp else " "
                odp, ratio = f"{odp_rate:>16.3g}{star}", f"{rate / odp_rate:>9.0f}"
                print(f"{name:<18}{p:>12.4g}{n:>11.0e}{rate:>17.3g}{odp}{ratio}{peak:>10.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
