"""Pairwise counts of a wide Parquet folder on Dask against the in-memory single-process path.

A folder of ``n × m`` responses (``--missing`` of the cells null, one nullable int8 column per
item, files of ``--file-rows`` rows in row groups of ``--row-group`` rows) is generated in a
temporary folder (deleted afterwards; never committed), together with the same data as the
in-memory int8 code matrix.  Then, side by side in one run:

* ``in-memory``: :func:`privirt.pairwise_counts` (Y and B) on the code matrix already in
  memory, in this process (the peer; its load time is not counted);
* ``dask k×1``: ``pairwise_counts(folder, engine="dask")`` on a ``LocalCluster`` of ``k``
  single-threaded worker processes, reading the Parquet files (the read is counted).  Each
  configuration gets a fresh cluster (so its workers' peak RSS is its own) and one untimed
  warm-up on one file; the cluster start is reported separately.

Every Dask result is checked to equal the in-memory counts exactly.  ``peak RSS/worker`` is
the largest ``VmHWM`` of the worker processes, measured on the whole folder and on its first
quarter (a folder of hard links to those files) to show it does not grow with n.  CPU seconds
(the peer's process time, the workers' summed process time) are printed beside wall time.
The per-partition throughput (one worker, one row group, no scheduling) feeds the projection
in ``docs/scale.md``.

Usage::

    python benchmarks/bench_dask.py --n 2e7 --m 100          # the issue's target size
    python benchmarks/bench_dask.py --quick                  # 2e5 × 20, seconds
"""

from __future__ import annotations

import argparse
import glob
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import privirt  # noqa: E402
from privirt.data.responses import Responses  # noqa: E402


def generate(folder: Path, n: int, m: int, missing: float, file_rows: int, row_group: int,
             seed: int = 0) -> np.ndarray:
    """Write the Parquet folder and return the same responses as int8 codes (n × m)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    # item difficulty as a threshold on a uniform byte; 5 % missing ≈ 13/256 of the bytes
    thresholds = rng.integers(40, 216, size=m).astype(np.uint8)[:, None]
    miss_cut = int(round(missing * 256))
    codes = np.empty((n, m), dtype=np.int8)
    names = [f"item{j:03d}" for j in range(m)]
    for f, start in enumerate(range(0, n, file_rows)):
        rows = min(file_rows, n - start)
        right = rng.integers(0, 256, size=(m, rows), dtype=np.uint8) < thresholds
        null = rng.integers(0, 256, size=(m, rows), dtype=np.uint8) < miss_cut
        block = right.astype(np.int8)
        block[null] = -1
        codes[start : start + rows] = block.T
        table = pa.table({name: pa.array(right[j].astype(np.int8), mask=null[j])
                          for j, name in enumerate(names)})
        pq.write_table(table, folder / f"part-{f:05d}.parquet", row_group_size=row_group,
                       compression="snappy")
        del right, null, block, table
    return codes


def _maxrss_mib() -> float:
    """This process's peak RSS (VmHWM: reset by exec, unlike ru_maxrss, which a spawned
    worker inherits from the process it was forked from)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_dask(source, workers: int, warm: str, expected) -> dict:
    import distributed

    t0 = time.perf_counter()
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", memory_limit=0) as cluster, \
            distributed.Client(cluster) as client:
        start_s = time.perf_counter() - t0
        privirt.pairwise_counts(warm, engine="dask", client=client)  # imports, first calls
        cpu0 = sum(client.run(time.process_time).values())
        t = time.perf_counter()
        Y, B = privirt.pairwise_counts(source, engine="dask", client=client)
        wall = time.perf_counter() - t
        cpu = sum(client.run(time.process_time).values()) - cpu0
        rss = client.run(_maxrss_mib)
    exact = bool(np.array_equal(Y, expected[0]) and np.array_equal(B, expected[1]))
    return {"wall": wall, "cpu": cpu, "start": start_s, "rss": max(rss.values()), "exact": exact}


def projection_rate(tmp: Path, m: int, rows: int) -> float:
    """Persons per second per core of one row group at ``m`` items (read + all statistics)."""
    folder = tmp / f"m{m}"
    folder.mkdir()
    generate(folder, rows, m, 0.05, rows, rows, seed=1)
    seconds, _ = on_one_worker(per_partition, folder, m)
    return rows / seconds


def on_one_worker(fn, *args):
    """Run ``fn`` on a single-threaded worker process (one core, single-threaded BLAS)."""
    import distributed

    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", memory_limit=0) as cluster, \
            distributed.Client(cluster) as client:
        return client.submit(fn, *args, pure=False).result()


def per_partition(folder: Path, m: int, repeat: int = 3) -> tuple[float, int]:
    """Seconds for one row group on one core, in this process (no scheduler)."""
    import fsspec
    import pyarrow.parquet as pq

    from privirt.stats.counts import default_chunk_size
    from privirt.stats.dask_engine import _parquet_part

    fs = fsspec.filesystem("file")
    path = sorted(glob.glob(str(folder / "*.parquet")))[0]
    rows = pq.ParquetFile(path).metadata.row_group(0).num_rows
    cols = [f"item{j:03d}" for j in range(m)]
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        _parquet_part(fs, path, 0, cols, list(range(m)), m, 0, default_chunk_size(m), True, None)
        best = min(best, time.perf_counter() - t)
    return best, rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=float, default=2e7)
    ap.add_argument("--m", type=int, default=100)
    ap.add_argument("--missing", type=float, default=0.05)
    ap.add_argument("--file-rows", type=float, default=1e6)
    ap.add_argument("--row-group", type=float, default=2**18)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--repeat", type=int, default=2, help="in-memory: best of this many")
    ap.add_argument("--quick", action="store_true", help="2e5 × 20: a smoke run")
    ap.add_argument("--tmp", default=None, help="parent folder of the temporary data")
    ap.add_argument("--project-m", type=int, default=200,
                    help="also measure one row group at this many items (the projection)")
    args = ap.parse_args(argv)
    if args.quick:
        args.n, args.m, args.file_rows, args.row_group = 2e5, 20, 5e4, 2e4
    n, m = int(args.n), args.m
    file_rows, row_group = int(args.file_rows), int(args.row_group)

    load_before = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="privirt-bench-dask-", dir=args.tmp))
    try:
        t = time.perf_counter()
        data, qdir = tmp / "all", tmp / "quarter"
        data.mkdir()
        qdir.mkdir()
        codes = generate(data, n, m, args.missing, file_rows, row_group)
        gen_s = time.perf_counter() - t
        size_mib = sum(p.stat().st_size for p in data.glob("*.parquet")) / 2**20
        files = sorted(data.glob("*.parquet"))
        quarter = files[: max(1, len(files) // 4)]
        for p in quarter:  # the first quarter of the files, as a folder of its own
            os.link(p, qdir / p.name)
        n_quarter = min(n, len(quarter) * file_rows)
        resp = Responses(codes, pd.RangeIndex(n), pd.Index([f"item{j:03d}" for j in range(m)]))
        privirt.pairwise_counts(Responses(codes[:1000], pd.RangeIndex(1000), resp.items))
        best, best_cpu = np.inf, np.inf
        for _ in range(args.repeat):
            t, c = time.perf_counter(), time.process_time()
            expected = privirt.pairwise_counts(resp, device="cpu")
            best = min(best, time.perf_counter() - t)
            best_cpu = min(best_cpu, time.process_time() - c)
        mem_s = best
        q_expected = privirt.pairwise_counts(
            Responses(codes[:n_quarter], pd.RangeIndex(n_quarter), resp.items), device="cpu")
        del codes, resp
        part_s, part_rows = on_one_worker(per_partition, data, m)
        proj_rate = projection_rate(tmp, args.project_m, min(row_group, n))

        rows = [("in-memory (this process)", n, mem_s, best_cpu, None, None, True)]
        sources = [("n/4", str(qdir), n_quarter, q_expected), ("n", str(data), n, expected)]
        for k in (int(w) for w in args.workers.split(",")):
            for _, src, nn, exp in sources:
                r = run_dask(src, k, str(files[0]), exp)
                rows.append((f"dask {k} worker(s) × 1 thread", nn, r["wall"], r["cpu"],
                             r["start"], r["rss"], r["exact"]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    load = os.getloadavg()
    print(f"# bench_dask: n = {n:,} × m = {m}, {args.missing:.0%} missing; Parquet {size_mib:,.0f} MiB "
          f"in {len(files)} files, row groups of {row_group:,} rows (generated in {gen_s:.0f} s)")
    print(f"# machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"numpy {np.__version__}; 1-min load average {load_before:.2f} before, {load[0]:.2f} after "
          f"(OPENBLAS_CORETYPE={'set' if os.environ.get('OPENBLAS_CORETYPE') else 'not set'})")
    print(f"{'path':<30} {'n':>12} {'wall s':>8} {'Mcells/s':>9} {'vs mem':>7} {'cpu s':>8} "
          f"{'Mcells/cpu-s':>12} {'vs mem':>7} {'start s':>8} {'peak RSS/worker MiB':>20} {'exact':>6}")
    for name, nn, wall, cpu, start, rss, exact in rows:
        rate = nn * m / wall / 1e6
        ratio = (nn / wall) / (n / mem_s)
        cpu_rate = nn * m / cpu / 1e6
        cpu_ratio = (nn / cpu) / (n / best_cpu)
        print(f"{name:<30} {nn:>12,} {wall:>8.2f} {rate:>9.1f} {ratio:>7.2f} {cpu:>8.2f} "
              f"{cpu_rate:>12.1f} {cpu_ratio:>7.2f} "
              f"{'' if start is None else f'{start:.1f}':>8} "
              f"{'' if rss is None else f'{rss:,.0f}':>20} {str(exact):>6}")
    print(f"per-partition (one worker process, one row group of {part_rows:,} rows, read + count): "
          f"{part_s:.3f} s = {part_rows * m / part_s / 1e6:.1f} Mcells/s; "
          f"bench process peak RSS {_maxrss_mib():,.0f} MiB")
    workers = 1e9 / proj_rate / 3600
    print(f"per-partition at m = {args.project_m}: {proj_rate:,.0f} persons/s per core -> "
          f"n = 1e9 needs {1e9 / proj_rate:,.0f} core-seconds ({workers:.1f} core-hours): "
          f"{workers * 60 / 10:.0f} cores for 10 minutes, {workers:.1f} cores for an hour")
    ok = all(r[-1] for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
