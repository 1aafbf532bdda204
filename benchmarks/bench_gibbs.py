"""Benchmark of the 2PNO Gibbs sampler and of its posterior summaries.

In one run, for every (n persons, k items) cell of the grid, this times

* ``peer``: a strong vectorised numpy sampler written below (:func:`peer_gibbs`), what a
  careful user writes in ~40 lines: inverse-CDF truncated normals on the whole matrix
  (``scipy.special.ndtr``/``ndtri``), θ drawn vectorised, all (a, b) drawn at once from the
  2 × 2 posterior the items share, with rejection for a ≤ 0 (the default flat priors);
* ``privirt-cpu-fused`` / ``privirt-cpu-numpy``: :func:`privirt.gibbs_2pno` with
  ``device="cpu"`` and ``engine="fused"`` (the numba kernel, the default when numba is
  installed) or ``engine="numpy"`` (batched numpy/scipy), the whole public call: validation,
  starting values, draw store, timing;
* ``fused-numba`` / ``fused-numpy``: the fused CPU engine :mod:`privirt.bayes.twopno_fused`
  alone (:func:`~privirt.bayes.twopno_fused.run_chain`) with its numba kernel and its numpy
  fallback;
* ``privirt-gpu``: ``device="gpu"`` when cupy sees a CUDA GPU.

All run the same conditionals on the same simulated data, one chain.  Times are wall-clock
seconds per iteration after a warm-up (best of ``--repeat``); "10k it" is that × 10,000,
**extrapolated** whenever fewer iterations were run.  ``--issue14`` also prints the process
CPU seconds of the same run (all threads), whose ratio to the peer's is the single-core
comparison on a machine shared with other jobs.

``--issue14`` instead times issue 14's rows in full: 2000 × 30 for 1500 iterations (peer,
privirt-cpu-fused, privirt-cpu-numpy, fused-numba, fused-numpy), numba's first-call cost (compilation into an empty
cache, then loading from the cache, each in a fresh process), and ``Posterior.summary`` of
a, b and θ after 4 chains × 2000 kept draws on 1000 × 20, against the sampling time.

``--r-peer 2000x50,102x596`` instead times privirt against R's MCMCpack ``MCMCirt1d`` (the
same Gibbs sampler in C++; skipped with a note where R or MCMCpack is missing) on simulated
2PNO data of each size with slopes of both signs: ``gibbs_2pno(slopes="free")`` with
MCMCirt1d's priors and the same two sign constraints, ``--r-burnin`` discarded iterations
and ``--r-iter`` kept draws each, **one thread each** (privirt's sweep on the calling thread,
BLAS limited by threadpoolctl; R with ``OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1``), CPU
seconds from the process (Python) and ``proc.time()`` (R), ESS = privirt's bulk ESS on both
samplers' draws (the runners are those of ``bench_rollcall.py``).

Usage::

    python benchmarks/bench_gibbs.py --issue14 --repeat 3
    python benchmarks/bench_gibbs.py --r-peer 2000x50,102x596 --r-burnin 1000 --r-iter 5000
    python benchmarks/bench_gibbs.py --grid quick
    python benchmarks/bench_gibbs.py --grid paper --iter 100 --peer-iter 20 --cbase --reps 100
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import privirt  # noqa: E402

GRIDS = {
    "quick": ([500, 2000], [20, 100]),
    "paper": ([500, 1000, 2000, 5000, 10000], [20, 50, 100, 200]),
}


# ---------------------------------------------------------------------------------------
# the peer: a strong vectorised numpy sampler
# ---------------------------------------------------------------------------------------
def peer_gibbs(Y: np.ndarray, n_iter: int, warmup: int, seed: int = 0) -> dict[str, np.ndarray]:
    """2PNO Gibbs sampler for complete 0/1 data, flat priors (a > 0), as privirt's defaults.

    Starts from b = −√2 Φ⁻¹(p̂_j), a = 1, θ = Φ⁻¹(person proportion correct); keeps the
    ``n_iter − warmup`` last draws, shaped (draw, ·).
    """
    rng = np.random.default_rng(seed)
    n, k = Y.shape
    s = np.where(Y == 1, 1.0, -1.0)
    a = np.ones(k)
    b = -np.sqrt(2.0) * special.ndtri(np.clip(Y.mean(axis=0), 0.02, 0.98))
    theta = special.ndtri(np.clip(Y.mean(axis=1), 0.02, 0.98))
    n_keep = n_iter - warmup
    out = {"a": np.empty((n_keep, k)), "b": np.empty((n_keep, k)), "theta": np.empty((n_keep, n))}
    for it in range(n_iter):
        # Z | y, θ, a, b by the inverse CDF: Z = μ − s Φ⁻¹(U Φ(s μ)), U ~ U(0, 1)
        mu = np.multiply.outer(theta, a)
        mu -= b
        u = rng.random((n, k))
        u *= special.ndtr(s * mu)
        Z = mu - s * special.ndtri(u, out=u)
        # θ | Z, a, b
        prec = 1.0 + a @ a
        theta = (Z @ a + a @ b) / prec + rng.standard_normal(n) / np.sqrt(prec)
        # (a, b) | Z, θ: x_i = (θ_i, −1), every item has the same P = Σ x xᵀ
        st = theta.sum()
        cov = np.linalg.inv(np.array([[theta @ theta, -st], [-st, float(n)]]))
        mean = cov @ np.vstack([theta @ Z, -Z.sum(axis=0)])  # (2, k)
        chol = np.linalg.cholesky(cov)
        todo = np.arange(k)
        while todo.size:  # redraw the items whose a came out ≤ 0
            xi = mean[:, todo] + chol @ rng.standard_normal((2, todo.size))
            ok = xi[0] > 0
            a[todo[ok]], b[todo[ok]] = xi[0, ok], xi[1, ok]
            todo = todo[~ok]
        if it >= warmup:
            out["a"][it - warmup], out["b"][it - warmup] = a, b
            out["theta"][it - warmup] = theta
    return out


# ---------------------------------------------------------------------------------------
# timing helpers
# ---------------------------------------------------------------------------------------
def _best(fn, repeat: int) -> float:
    return _best_wall_cpu(fn, repeat)[0]


def _best_wall_cpu(fn, repeat: int) -> tuple[float, float]:
    """Best wall-clock seconds of ``repeat`` runs and the process CPU seconds of that run."""
    best = (np.inf, np.inf)
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        if wall < best[0]:
            best = (wall, cpu)
    return best


def _codes(X: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(X), -1, X).astype(np.int8)


def run_fused(X: np.ndarray, n_iter: int, warmup: int, engine: str, n_chains: int = 1,
              seed: int = 1, threads: int | None = None) -> dict[str, np.ndarray]:
    """The fused engine with gibbs_2pno's default starting values and seed layout."""
    from privirt.bayes.twopno_fused import run_chain
    from privirt._seeds import child as _child
    from privirt.bayes.twopno import default_init as _default_init

    codes = _codes(X)
    ss = np.random.SeedSequence(seed)
    inits = [_default_init(codes, np.random.Generator(np.random.Philox(_child(ss, c, 0))),
                           jitter=n_chains > 1) for c in range(n_chains)]
    return run_chain(codes, n_iter=n_iter, warmup=warmup, n_chains=n_chains, inits=inits,
                     seeds=[_child(ss, c, 1) for c in range(n_chains)], engine=engine,
                     threads=threads)


def time_impl(impl: str, X: np.ndarray, n_iter: int, repeat: int = 1) -> float:
    """Best wall-clock seconds of ``n_iter`` iterations (half warm-up), after a warm-up."""
    return time_impl_cpu(impl, X, n_iter, repeat)[0]


def time_impl_cpu(impl: str, X: np.ndarray, n_iter: int, repeat: int = 1) -> tuple[float, float]:
    """Best wall-clock seconds of ``n_iter`` iterations (half warm-up), after a warm-up, and
    the process CPU seconds of that run."""
    if impl == "peer":
        Y = _codes(X)
        peer_gibbs(Y, 2, 1)
        return _best_wall_cpu(lambda: peer_gibbs(Y, n_iter, n_iter // 2), repeat)
    if impl.startswith("fused-"):  # fused-numba, fused-numba-1thread, fused-numpy
        engine = impl.split("-")[1]
        threads = 1 if impl.endswith("1thread") else None
        run_fused(X, 2, 1, engine, threads=threads)
        return _best_wall_cpu(
            lambda: run_fused(X, n_iter, n_iter // 2, engine, threads=threads), repeat)
    # privirt-cpu-fused, privirt-cpu-numpy, privirt-cpu (engine "auto"), privirt-gpu
    parts = impl.split("-")
    dev, engine = parts[1], (parts[2] if len(parts) > 2 else "auto")
    privirt.gibbs_2pno(X, n_iter=2, warmup=1, device=dev, seed=0, progress=False,
                       engine=engine)
    return _best_wall_cpu(
        lambda: privirt.gibbs_2pno(X, n_iter=n_iter, warmup=n_iter // 2, device=dev, seed=1,
                                   progress=False, engine=engine), repeat)


def _first_call_cost() -> tuple[float, float]:
    """Seconds of the first fused-numba iteration in a fresh process: with an empty numba
    cache (compilation), then with the cache it left (loading)."""
    code = (
        "import time, numpy as np, privirt\n"
        "from privirt.bayes.twopno_fused import FusedGibbs\n"
        "codes = np.zeros((200, 10), np.int8); codes[::2] = 1\n"
        "t = time.perf_counter()\n"
        "FusedGibbs(codes, theta=np.zeros((1, 200)), a=np.ones((1, 10)), b=np.zeros((1, 10)),\n"
        "           keys=np.ones((1, 2)), engine='numba').step()\n"
        "print(time.perf_counter() - t)\n"
    )
    root = str(Path(__file__).resolve().parent.parent)
    out = []
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=root)
        for _ in range(2):
            res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                 text=True, check=True, cwd=root)
            out.append(float(res.stdout.strip().splitlines()[-1]))
    return out[0], out[1]


def _load() -> str:
    try:
        return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover - not on every platform
        return "load average unavailable"


def issue14(repeat: int) -> None:
    """Issue 14's Gibbs and summary rows, in full."""
    from privirt.bayes.twopno_fused import numba_available

    n_iter = 1500
    X, *_ = privirt.simulate_2pno(2000, 30, seed=1)
    print(f"# issue 14 — 2PNO Gibbs, 2000 × 30, {n_iter} iterations (half warm-up), one chain, "
          f"best of {repeat}; {_load()}; OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', 'not set')}")
    fused = ["privirt-cpu-fused"] if numba_available() else []
    kernels = ["fused-numba", "fused-numba-1thread"] if numba_available() else []
    impls = ["peer", *fused, "privirt-cpu-numpy", *kernels, "fused-numpy"]
    print("| impl | total s | ms / it | speed-up vs peer | CPU s | CPU-time ratio vs peer |")
    print("|---|---|---|---|---|---|")
    peer, peer_cpu = np.nan, np.nan
    for impl in impls:
        sec, cpu = time_impl_cpu(impl, X, n_iter, repeat)
        if impl == "peer":
            peer, peer_cpu = sec, cpu
        print(f"| {impl} | {sec:.2f} | {sec / n_iter * 1e3:.2f} | {peer / sec:.2f}× | "
              f"{cpu:.2f} | {peer_cpu / cpu:.2f}× |", flush=True)
    if numba_available():
        cold, warm = _first_call_cost()
        print(f"\n# numba first call in a fresh process: {cold:.1f} s compiling into an empty "
              f"cache, {warm:.2f} s loading from the cache ({_load()})")
    # summaries against the sampling they summarise
    X, *_ = privirt.simulate_2pno(1000, 20, seed=2)
    print(f"\n# Posterior.summary of a, b, θ — 1000 × 20, 4 chains × 2000 kept draws "
          f"(4000 iterations, 2000 warm-up); best of {repeat}; {_load()}")
    print("| step | s | summary / sampling |")
    print("|---|---|---|")
    post = None
    samp = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        post = privirt.gibbs_2pno(X, n_iter=4000, warmup=2000, n_chains=4, seed=3,
                                  progress=False, device="cpu", engine="numpy")
        samp = min(samp, time.perf_counter() - t)
    summ, summ_cpu = _best_wall_cpu(lambda: [post.summary(p) for p in ("a", "b", "theta")],
                                    repeat)
    print(f"| sampling, gibbs_2pno CPU engine=numpy | {samp:.2f} | |")
    print(f"| summary (R-hat, ESS, MCSE, quantiles) | {summ:.2f} (CPU {summ_cpu:.2f}) "
          f"| {summ / samp:.0%} |")
    if numba_available():
        fused, fused_cpu = _best_wall_cpu(
            lambda: privirt.gibbs_2pno(X, n_iter=4000, warmup=2000, n_chains=4, seed=3,
                                       progress=False, device="cpu", engine="fused"), repeat)
        print(f"| sampling, gibbs_2pno CPU engine=fused | {fused:.2f} (CPU {fused_cpu:.2f}) | "
              f"summary = {summ / fused:.0%} of it (CPU: {summ_cpu / fused_cpu:.0%}) |")
    print(f"({_load()} after)")


def r_peer(sizes: str, burnin: int, n_keep: int, seed: int = 1) -> None:
    """privirt's fused sampler against MCMCirt1d, one thread each, ESS per CPU second."""
    import importlib.util

    import pandas as pd

    spec = importlib.util.spec_from_file_location(
        "bench_rollcall", Path(__file__).resolve().parent / "bench_rollcall.py")
    rc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rc)
    why = rc.r_available("MCMCpack")
    print(f"# privirt gibbs_2pno(slopes=\"free\") vs MCMCpack MCMCirt1d, one thread each; "
          f"burn-in {burnin}, {n_keep} kept draws, 1 chain; {_load()}")
    if why:
        print(f"MCMCirt1d not run: {why}")
    print("| n × k | sampler | CPU s | CPU ms / it | ESS θ median | ESS a median "
          "| ESS θ / CPU s | ESS a / CPU s | privirt × (θ, a, CPU / it) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for part in filter(None, sizes.split(",")):
        n, k = (int(float(v)) for v in part.lower().split("x"))
        rng = np.random.default_rng(n + k)
        theta = rng.standard_normal(n)
        a = rng.uniform(0.5, 2.0, k) * rng.choice([-1.0, 1.0], k)
        b = rng.normal(0.0, 0.7, k)
        X = (rng.random((n, k)) < special.ndtr(np.outer(theta, a) - b)).astype(float)
        names = [f"p{i}" for i in range(n)]
        votes = pd.DataFrame(X, index=names, columns=[f"i{j}" for j in range(k)])
        p = votes.mean()
        votes = votes.loc[:, (p > 0) & (p < 1)]
        anchors = {names[int(np.argmin(theta))]: "-", names[int(np.argmax(theta))]: "+"}
        res = {"privirt": rc.run_privirt(votes, burnin, n_keep, seed, anchors=anchors)}
        if not why:
            res["MCMCirt1d"] = rc.run_r("MCMCpack", votes, burnin, n_keep, seed, anchors)
        rates = {}
        for name, r in res.items():
            e = rc.ess_row(r, r["cpu_s"])
            per = r["cpu_s"] / r["n_iter"] * 1e3
            rates[name] = (e["theta"][2], e["a"][2], per)
            tail = ""
            if name != "privirt":
                o = rates["privirt"]
                tail = (f"{o[0] / rates[name][0]:.2f}×, {o[1] / rates[name][1]:.2f}×, "
                        f"{per / o[2]:.2f}×")
            print(f"| {n} × {votes.shape[1]} | {name} | {r['cpu_s']:.1f} | {per:.2f} "
                  f"| {e['theta'][0]:.0f} | {e['a'][0]:.0f} | {e['theta'][2]:.1f} "
                  f"| {e['a'][2]:.1f} | {tail} |", flush=True)
    print(f"({_load()} after)")


def _fmt(x: float) -> str:
    if not np.isfinite(x):
        return "—"
    return f"{x:.3g}" if x < 100 else f"{x:,.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--issue14", action="store_true",
                    help="time issue 14's rows (2000 × 30 × 1500 iterations; summaries)")
    ap.add_argument("--grid", choices=sorted(GRIDS), default="quick")
    ap.add_argument("--iter", type=int, default=100,
                    help="iterations timed per cell for privirt (default 100)")
    ap.add_argument("--peer-iter", type=int, default=100,
                    help="iterations timed per cell for the peer (default 100)")
    ap.add_argument("--repeat", type=int, default=1, help="best of this many timed runs")
    ap.add_argument("--device", choices=["auto", "cpu", "gpu", "both"], default="auto",
                    help="privirt device(s): auto = CPU, plus GPU when available")
    ap.add_argument("--no-peer", action="store_true", help="skip the peer")
    ap.add_argument("--cbase", action="store_true",
                    help="also time the paper's CBASE size, 3356 × 180")
    ap.add_argument("--reps", type=int, default=0,
                    help="also time R replications of 2000 × 50 (5000 iterations)")
    ap.add_argument("--reps-iter", type=int, default=20,
                    help="iterations timed for the replication study (default 20)")
    ap.add_argument("--r-peer", default="",
                    help="sizes n x k (comma-separated) to time against R's MCMCirt1d")
    ap.add_argument("--r-burnin", type=int, default=1000)
    ap.add_argument("--r-iter", type=int, default=5000, help="kept draws for --r-peer")
    args = ap.parse_args(argv)

    print(f"# 2PNO Gibbs benchmark — {platform.machine()} {platform.system()}, "
          f"{os.cpu_count()} CPU(s), numpy {np.__version__}, "
          f"GPU available: {privirt.gpu_available()}")
    if args.issue14:
        issue14(args.repeat)
        return 0
    if args.r_peer:
        r_peer(args.r_peer, args.r_burnin, args.r_iter)
        return 0
    from privirt.bayes.twopno_fused import numba_available

    devices = ["cpu"]
    if args.device in ("gpu", "both") or (args.device == "auto" and privirt.gpu_available()):
        devices.append("gpu")
    if args.device == "gpu":
        devices = ["gpu"]
    impls = [f"privirt-{d}" for d in devices if d != "cpu"]
    if "cpu" in devices:
        impls = (["privirt-cpu-fused"] if numba_available() else []) + ["privirt-cpu-numpy",
                                                                       *impls, "fused-numpy"]
    print(f"# privirt timed over {args.iter} iterations, peer over {args.peer_iter}; "
          "'10k it' = seconds per iteration × 10,000 (extrapolated)")
    header = ["n", "k", "impl", "measured it", "s / it", "10k it (s)", "speed-up vs peer"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    ns, ks = GRIDS[args.grid]
    for n in ns:
        for k in ks:
            X, *_ = privirt.simulate_2pno(n, k, seed=n + k)
            ref = np.nan
            if not args.no_peer:
                ref = time_impl("peer", X, args.peer_iter, args.repeat) / args.peer_iter
                print(f"| {n} | {k} | peer (vectorised numpy) | {args.peer_iter} | "
                      f"{ref:.4f} | {_fmt(ref * 1e4)} | 1 |", flush=True)
            for impl in impls:
                per = time_impl(impl, X, args.iter, args.repeat) / args.iter
                ratio = ref / per if np.isfinite(ref) else np.nan
                print(f"| {n} | {k} | {impl} | {args.iter} | {per:.4f} | "
                      f"{_fmt(per * 1e4)} | {_fmt(ratio)} |", flush=True)
    if args.cbase:
        X, *_ = privirt.simulate_2pno(3356, 180, seed=1)
        for dev in devices:
            per = time_impl(f"privirt-{dev}", X, args.iter) / args.iter
            print(f"| 3356 | 180 (CBASE size) | privirt-{dev} | {args.iter} | {per:.4f} | "
                  f"{_fmt(per * 1e4)} | paper: 40 s (K20c GPU), 17 min (serial C) |", flush=True)
    if args.reps:
        R = args.reps
        data = [privirt.simulate_2pno(2000, 50, seed=r)[0] for r in range(R)]
        for dev in devices:
            privirt.gibbs_2pno_replicate(data[:2], n_iter=2, warmup=1, device=dev,
                                         progress=False)
            t = time.perf_counter()
            privirt.gibbs_2pno_replicate(data, n_iter=args.reps_iter,
                                         warmup=args.reps_iter // 2, device=dev,
                                         seed=1, progress=False)
            per = (time.perf_counter() - t) / args.reps_iter
            print(f"| 2000 | 50 × {R} replications | privirt-{dev} (one batch) | "
                  f"{args.reps_iter} | {per:.4f} | 5000 it: {_fmt(per * 5000)} | target ≤ 60 s "
                  "on an H100 |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
