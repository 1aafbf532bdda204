"""The remaining ε of a ledger or a service allowance: cached against computed afresh.

``Ledger.remaining_epsilon`` and every ``GET /v1/datasets`` of ``privirt serve`` find the largest
pure-ε spend that still fits by bisection on the composed total (each step one tight zCDP → (ε, δ)
conversion).  Since session 26 that bisection stops once its midpoint equals an end, and its
result is cached by the summed spends and the target (a pure function of them: never stale).

Peers, side by side in one run, on the same sums: the full 100-step bisection (as every request
computed it before session 26, restated here), the bisection with its early stop computed afresh
(the cache's ``__wrapped__``: a first request on new sums) and the cached call (a repeat on
unchanged sums).  Spends: ``k`` alternating Gaussian (ρ) and Laplace (ε) debits, budget (ε, δ) = (10, 1e-6).
Nothing is asserted here.

    python benchmarks/bench_remaining_epsilon.py            # k = 10, 100, 1000
    python benchmarks/bench_remaining_epsilon.py --k 100
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from privirt.private import _sums  # noqa: E402
from privirt.private._sums import SpendSums  # noqa: E402


def _sums_of(k: int) -> SpendSums:
    costs = [(1e-4, 0.0, 0.0) if i % 2 else (0.0, 1e-3, 0.0) for i in range(k)]
    return SpendSums.of(costs)


def _full_bisection(sums: SpendSums, epsilon: float, delta: float) -> float:
    """The bisection before session 26: 100 halvings whatever they still move (also the
    reference of ``tests/test_serve_remaining.py``)."""
    used = sums.total(delta)
    if not math.isfinite(used) or used >= epsilon:
        return 0.0
    lo, hi = 0.0, float(epsilon)
    if sums.plus((0.0, hi, 0.0)).total(delta) <= epsilon:
        return hi
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if sums.plus((0.0, mid, 0.0)).total(delta) <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo


def _time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", type=int, nargs="*", default=[10, 100, 1000])
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    eps, delta = 10.0, 1e-6
    print("| spends | remaining ε | 100 steps (ms) | early stop, afresh (ms) | cached (µs) |")
    print("|---|---|---|---|---|")
    for k in args.k:
        sums = _sums_of(k)
        fresh = _sums._largest_pure_fit.__wrapped__
        value = fresh(sums, eps, delta)
        assert _full_bisection(sums, eps, delta) == value
        t_full = _time(lambda: _full_bisection(sums, eps, delta), args.repeat)
        t_fresh = _time(lambda: fresh(sums, eps, delta), args.repeat)
        sums.largest_pure_fit(eps, delta)  # fills the cache
        t_cached = _time(lambda: sums.largest_pure_fit(eps, delta), args.repeat * 20)
        assert sums.largest_pure_fit(eps, delta) == value
        print(f"| {k} | {value:.6f} | {1e3 * t_full:.1f} | {1e3 * t_fresh:.1f} | {1e6 * t_cached:.1f} |")


if __name__ == "__main__":
    main()
