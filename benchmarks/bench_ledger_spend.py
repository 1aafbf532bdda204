"""One more ``Ledger.spend`` (and the readers) on ledgers of N spends.

A ledger of (ε, δ) = (1e6, 1e-5) gets one spend through the API and N − 1 more by bulk
inserts into its ``spends`` table (alternating Laplace ε, Gaussian ρ and approximate (ε, δ) rows,
far from the limit); then one more ``spend`` is timed (CPU and wall ms, the median of
``--repeat``), with ``remaining_epsilon()``, ``account()`` and ``summary()`` (``privirt budget
show``) once each.  Nothing is asserted here.

    python benchmarks/bench_ledger_spend.py                     # N = 10², 10³, 10⁴, 10⁵
    python benchmarks/bench_ledger_spend.py --n 1000 --readers
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from privirt.private.accounting import PrivacyCost  # noqa: E402
from privirt.private.ledger import Ledger  # noqa: E402


def _ledger(folder: Path, n: int) -> Ledger:
    led = Ledger(folder / f"n{n}.ledger", epsilon=1e6, delta=1e-5)
    led.spend(PrivacyCost(epsilon=1e-3), mechanism="laplace")
    rows = [("2026-01-01T00:00:00", "bulk", *((0.0, 1e-3, 0.0), (1e-4, 0.0, 0.0), (0.0, 1e-3, 1e-12))[i % 3], "")
            for i in range(n - 1)]
    con = sqlite3.connect(led.path)
    with con:
        con.executemany("INSERT INTO spends (time, mechanism, rho, epsilon, delta, note) VALUES (?, ?, ?, ?, ?, ?)",
                        rows)
    con.close()
    return led


def _timed(fn) -> tuple[float, float]:
    c, w = time.process_time(), time.perf_counter()
    fn()
    return 1e3 * (time.process_time() - c), 1e3 * (time.perf_counter() - w)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, nargs="+", default=[100, 1000, 10_000, 100_000])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--readers", action="store_true", help="also time remaining_epsilon, account, summary")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.n:
            led = _ledger(Path(tmp), n)
            runs = [_timed(lambda: led.spend(PrivacyCost(epsilon=1e-3), mechanism="laplace"))
                    for _ in range(args.repeat)]
            cpu, wall = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
            line = f"N={n:>7}: spend {cpu:8.1f} CPU ms, {wall:8.1f} wall ms"
            if args.readers:
                for name in ("remaining_epsilon", "account", "summary"):
                    line += f"; {name} {_timed(getattr(led, name))[0]:.0f} CPU ms"
            print(line, flush=True)


if __name__ == "__main__":
    main()
