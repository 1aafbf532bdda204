"""Start-up time of the ``privirt`` command line against ``python -c "import numpy"``.

Each command runs ``--runs`` times in a fresh interpreter (after ``--warmup`` untimed runs,
so the file cache is warm), alternating between the commands so that slow phases of a
shared machine hit all of them alike; the table gives the mean, standard deviation and
minimum wall time, and each command's mean and minimum as a ratio to the numpy import
(the target of issue 14: ``privirt --help`` ≤ 2×).  Commands run from the repository root
with ``python -m privirt`` so that this checkout is the one measured.

Usage::

    python benchmarks/bench_startup.py
    python benchmarks/bench_startup.py --runs 40 --all-commands
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _time(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--all-commands", action="store_true", help="also time `privirt CMD --help`")
    args = ap.parse_args(argv)
    if args.runs < 2:
        ap.error("--runs must be at least 2 (the table reports a standard deviation)")

    py = sys.executable
    commands = {
        'python -c "import numpy"': [py, "-c", "import numpy"],
        "python -m privirt --help": [py, "-m", "privirt", "--help"],
    }
    if args.all_commands:
        sys.path.insert(0, str(ROOT))
        from privirt.cli import build_parser

        sub = next(a for a in build_parser()._actions if a.dest == "command")
        for name in sub.choices:
            commands[f"python -m privirt {name} --help"] = [py, "-m", "privirt", name, "--help"]
    for cmd in commands.values():
        for _ in range(args.warmup):
            _time(cmd)
    times: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(args.runs):
        for name, cmd in commands.items():
            times[name].append(_time(cmd))

    print(f"# python {platform.python_version()}  cpus={os.cpu_count()}  runs={args.runs}"
          f"  load={os.getloadavg()[0]:.1f}"
          f"  OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}")
    base = times['python -c "import numpy"']
    b_mean, b_min = statistics.fmean(base), min(base)
    width = max(len(k) for k in commands)
    print(f"{'command':<{width}} | {'mean s':>7} {'sd s':>6} {'min s':>7} | {'mean ratio':>10} "
          f"{'min ratio':>9}")
    for name, ts in times.items():
        mean, sd, lo = statistics.fmean(ts), statistics.stdev(ts), min(ts)
        print(f"{name:<{width}} | {mean:>7.3f} {sd:>6.3f} {lo:>7.3f} | {mean / b_mean:>9.2f}x "
              f"{lo / b_min:>8.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
