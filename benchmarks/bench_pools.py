"""How sweeps and the embedded Dask cluster start their workers: old against new, side by side.

Issue 21 item 5: spawned workers re-run a user's script from the top, so sweeps now fork their
worker processes (Linux) and the embedded Dask cluster runs threads in the calling process.
This script times, interleaved (A B A B ...) so that a shared machine's slow phases hit every
variant alike, the best of ``--repeat`` runs of:

* **sweep** (a synthetic grid; default 2 data sets n = 1000 × m ∈ {20, 100}, 4 mechanisms,
  3 ε, 3 trials = 60 cells), through :func:`privirt.sweeps.runner._run_in`, with workers
  started by ``spawn`` (before), ``fork`` (now), a thread pool (considered, not used) and
  ``jobs=1`` in this process (the floor);
* **dask** (``privirt.sufficient_statistics(folder, engine="dask")`` on a generated wide
  Parquet folder, whole call including the cluster start and close): the embedded
  ``LocalCluster`` of one single-threaded worker process per core (before) against one
  in-process worker with a thread per core (now).  Both results are checked to be equal.

Usage::

    python benchmarks/bench_pools.py                 # ~2-4 minutes on 2 busy cores
    python benchmarks/bench_pools.py --quick         # a smoke run
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import logging
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import privirt  # noqa: E402
from privirt.sweeps import runner  # noqa: E402
from privirt.sweeps.config import parse_config  # noqa: E402

SWEEP = """
seed = 1
trials = {trials}
epsilons = [0.3, 1.0, 3.0]
mechanisms = ["spectral", "gaussian", "laplace", "rr"]
device = "cpu"
{datasets}
"""


def _thread_rows(args, bases, jobs):
    """The sweep's cells on a thread pool (one BLAS thread each): the variant not chosen."""
    from threadpoolctl import threadpool_limits

    from privirt.sweeps.execute import init_worker, worker

    init_worker(bases)
    with threadpool_limits(1), cf.ThreadPoolExecutor(jobs) as pool:
        for fut in cf.as_completed([pool.submit(worker, *a) for a in args]):
            yield fut.result()


def time_sweep(config, variant: str, jobs: int, tmp: Path) -> float:
    out = Path(tempfile.mkdtemp(dir=tmp))
    saved = runner._pool_rows
    try:
        if variant == "thread":
            runner._pool_rows = _thread_rows
        elif variant in ("spawn", "fork"):
            runner._pool_rows = lambda a, b, j: saved(a, b, j, method=variant)
        t = time.perf_counter()
        stats = runner.run_sweep(config, out, jobs=1 if variant == "jobs=1" else jobs, progress=False)
        wall = time.perf_counter() - t
    finally:
        runner._pool_rows = saved
        shutil.rmtree(out, ignore_errors=True)
    assert stats.failed == 0 and stats.computed == stats.total
    return wall


@contextlib.contextmanager
def process_cluster():
    """The embedded cluster as it was: one single-threaded worker process per core."""
    import distributed

    workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster) as client:
        yield client


def time_dask(folder: Path, variant: str) -> tuple[float, float, object]:
    """(whole call with the cluster's start and close, a second call on the running
    cluster, the statistics)."""
    from privirt.stats.dask_engine import embedded_client

    t = time.perf_counter()
    if variant == "processes":
        with process_cluster() as client:
            st = privirt.sufficient_statistics(str(folder), engine="dask", client=client)
            whole = time.perf_counter() - t
            t = time.perf_counter()
            privirt.sufficient_statistics(str(folder), engine="dask", client=client)
            warm = time.perf_counter() - t
    else:
        st = privirt.sufficient_statistics(str(folder), engine="dask")
        whole = time.perf_counter() - t
        with embedded_client() as client:
            t = time.perf_counter()
            privirt.sufficient_statistics(str(folder), engine="dask", client=client)
            warm = time.perf_counter() - t
    return whole, warm, st


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--n", type=float, default=2e6, help="Dask: persons in the Parquet folder")
    ap.add_argument("--m", type=int, default=50, help="Dask: items")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-sweep", action="store_true", help="time the Dask count only")
    args = ap.parse_args(argv)
    if args.quick:
        args.trials, args.repeat, args.n, args.m = 1, 1, 1e5, 20
    sizes = [(1000, 20), (1000, 100)]
    datasets = "".join(f"\n[[datasets]]\nsource = \"synthetic\"\nn = {n}\nm = {m}\n"
                       for n, m in sizes)
    import tomllib

    config = parse_config(tomllib.loads(SWEEP.format(trials=args.trials, datasets=datasets)))
    load0 = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="privirt-bench-pools-"))
    try:
        sweep_variants = [] if args.skip_sweep else ["spawn", "fork", "thread", "jobs=1"]
        sweep_t = {v: [] for v in sweep_variants}
        for _ in range(args.repeat):
            for v in sweep_variants:
                sweep_t[v].append(time_sweep(config, v, args.jobs, tmp))

        from bench_dask import generate  # the same data generator as bench_dask.py

        folder = tmp / "parquet"
        folder.mkdir()
        n = int(args.n)
        generate(folder, n, args.m, 0.05, max(n // 8, 1), max(n // 16, 1))
        dask_variants = ["processes", "threads"]
        dask_t = {v: [] for v in dask_variants}
        dask_warm = {v: [] for v in dask_variants}
        results = {}
        for _ in range(args.repeat):
            for v in dask_variants:
                wall, warm, results[v] = time_dask(folder, v)
                dask_t[v].append(wall)
                dask_warm[v].append(warm)
        same = bool(np.array_equal(results["processes"].counts[0], results["threads"].counts[0])
                    and np.array_equal(results["processes"].counts[1],
                                       results["threads"].counts[1]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load1 = os.getloadavg()
    cells = len(__import__("privirt.sweeps.grid", fromlist=["expand_grid"]).expand_grid(config))
    print(f"# bench_pools  python {platform.python_version()}  numpy {np.__version__}  "
          f"cpus={os.cpu_count()}  jobs={args.jobs}  repeat={args.repeat}  "
          f"load average {load0[0]:.2f} before, {load1[0]:.2f} after")
    if sweep_variants:
        print(f"sweep: {cells} cells, data sets n×m = {sizes}")
    base = min(sweep_t["spawn"]) if sweep_variants else 0.0
    for v in sweep_variants:
        print(f"  {v:<8} best {min(sweep_t[v]):7.2f} s  median {np.median(sweep_t[v]):7.2f} s  "
              f"cells/s {cells / min(sweep_t[v]):6.2f}  vs spawn {base / min(sweep_t[v]):5.2f}×")
    print(f"dask: sufficient_statistics of {int(args.n):,} × {args.m} Parquet (16 row groups), "
          f"cluster start and close included; results equal: {same}")
    base, base_warm = min(dask_t["processes"]), min(dask_warm["processes"])
    for v in dask_variants:
        print(f"  {v:<9} whole call: best {min(dask_t[v]):7.2f} s  median "
              f"{np.median(dask_t[v]):7.2f} s  vs processes {base / min(dask_t[v]):5.2f}×;  "
              f"cluster running: best {min(dask_warm[v]):7.2f} s  median "
              f"{np.median(dask_warm[v]):7.2f} s  vs processes "
              f"{base_warm / min(dask_warm[v]):5.2f}×")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
