"""One-command GPU checklist: the GPU tests, then the GPU benchmark rows, each beside the
same machine's CPU path, then a table.

Meant for one short device session (each step runs in its own process with its own time
limit, so a hang in one does not eat the others):

1. ``tests`` — every test marked ``gpu`` (in the files that hold such tests, so that test
   files needing packages the GPU machine lacks are not collected), then
   ``tests/test_gpu_static.py`` (kernel sources compiled with NVRTC/nvcc, host kernels).
2. ``counts`` — pairwise counts of 10^7 persons × 1000 items: int8 0/1 already in GPU
   memory (the target, ≤ 100 ms) and float16 with NaN = missing; a host int8 matrix copied
   chunk by chunk; the CPU path (all cores) on a slice of the rows, scaled to the full
   size; the cost of each stage of the device path (validation, conversion, GEMM) for the
   profile.  Exactness is checked against the CPU counts of a slice.
3. ``gibbs`` — the 2PNO Gibbs sampler on the GPU, the cases of Sheng, Welling & Zhu
   (2014): CBASE size 3356 × 180 for 10,000 iterations, 10,000 × 200 for 10,000, and 100
   replications of 2000 × 50 for 5000 in one batch (:func:`privirt.gibbs_2pno_replicate`);
   the CPU path (the fused numba kernel, all cores) over a short run, scaled; the GPU time
   of each kernel and of the host loop for the profile.  A recovery column (correlation
   of posterior means of b with the simulated b) catches a sampler that runs fast but wrong.
4. ``private`` — :func:`privirt.private_spectral_estimate` with ``device="gpu"`` and
   ``"cpu"`` (the counts and the point estimate run on the device; the bootstrap of the
   intervals and the private totals run on the CPU by design).

Usage::

    python benchmarks/gpu_check.py                      # everything
    python benchmarks/gpu_check.py --steps tests,gibbs --gibbs-share 20

Writes the table to stdout and, as JSON, to ``$OUT/gpu_check.json`` when ``OUT`` is set.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GIBBS_CASES = [
    # label, persons, items, replications, iterations (burn-in = half), target seconds
    ("CBASE size 3356 × 180", 3356, 180, 1, 10_000, 1.0),
    ("10000 × 200", 10_000, 200, 1, 10_000, 5.0),
    ("100 × (2000 × 50) replications", 2000, 50, 100, 5000, 60.0),
]
STEPS = ("tests", "counts", "gibbs", "private")


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------
def _run(cmd: list[str], timeout: float) -> tuple[int, str, float]:
    """``cmd`` in a child process: (return code, stdout + stderr, seconds); 124 on timeout."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        out, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        parts = [e.stdout, e.stderr]
        out = "".join(p.decode(errors="replace") if isinstance(p, bytes) else (p or "")
                      for p in parts)
        rc = 124
    return rc, out, time.perf_counter() - t0


def gpu_test_files(tests_dir: Path = ROOT / "tests") -> list[str]:
    """The test files that hold a test marked ``gpu`` (relative to the repository)."""
    return sorted(str(p.relative_to(ROOT)) for p in tests_dir.glob("test_*.py")
                  if re.search(r"pytest\.mark\.gpu\b", p.read_text(encoding="utf-8")))


def _sync() -> None:
    import cupy

    cupy.cuda.Device().synchronize()


def _timed_gpu(fn, repeat: int = 3) -> tuple[float, list[float]]:
    """Median wall seconds of ``fn()`` between device synchronisations, and all times."""
    times = []
    for _ in range(repeat):
        _sync()
        t0 = time.perf_counter()
        fn()
        _sync()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), times


def _emit(result: dict) -> None:
    """The worker's result as the last line of its output (read by the parent)."""
    print("RESULT " + json.dumps(result, default=float), flush=True)


def _parse_result(out: str) -> dict | None:
    for line in reversed(out.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return None


# ---------------------------------------------------------------------------------------
# step 1: tests
# ---------------------------------------------------------------------------------------
def pytest_summary(lines: list[str]) -> str:
    """pytest's closing count line ("18 passed, 1 failed in 17.7s"): plugins (e.g.
    pytest-benchmark's warning on the GPU machine) may print after it."""
    counts = re.compile(r"\b\d+ (passed|failed|errors?|skipped)\b.* in [\d.]+s")
    for line in reversed(lines):
        if counts.search(line):
            return line.strip("= ")
    return lines[-1] if lines else "(no output)"


def step_tests(timeout: float) -> list[dict]:
    rows = []
    base = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"]
    try:
        import pytest_timeout  # noqa: F401

        base += ["--timeout", "120"]
    except ImportError:
        pass
    for label, cmd in (
        ("pytest -m gpu", base + ["-m", "gpu", *gpu_test_files()]),
        ("tests/test_gpu_static.py", base + ["tests/test_gpu_static.py"]),
    ):
        rc, out, secs = _run(cmd, timeout)
        lines = [ln for ln in out.strip().splitlines() if ln.strip()]
        summary = pytest_summary(lines)
        print(f"\n## {label} (rc={rc}, {secs:.0f} s)\n" + "\n".join(lines[-60:]), flush=True)
        rows.append({"step": label, "ok": rc == 0, "figure": summary, "seconds": secs})
    return rows


# ---------------------------------------------------------------------------------------
# step 2: counts
# ---------------------------------------------------------------------------------------
def _device_binary(n: int, m: int, dtype, p: float = 0.6, p_missing: float = 0.0, seed: int = 0):
    """An n × m 0/1 (NaN where missing) device array made in row blocks (no big temporaries)."""
    import cupy as cp

    rs = cp.random.RandomState(seed)
    X = cp.empty((n, m), dtype=dtype)
    step = 1 << 18
    for s in range(0, n, step):
        u = rs.random_sample((min(step, n - s), m), dtype=cp.float32)
        block = (u < p).astype(dtype)
        if p_missing:
            block[u > 1.0 - p_missing] = cp.nan
        X[s : s + step] = block
        del u, block
    return X


def worker_counts(args) -> dict:
    import cupy as cp
    from threadpoolctl import threadpool_info

    from privirt.stats import counts as cm
    from privirt.stats._counts_gpu import bytes_to_half
    from privirt.stats.api import pairwise_counts

    n, m, n_cpu = args.counts_n, args.counts_m, args.counts_cpu_n
    res: dict = {"n": n, "m": m, "blas": [(i.get("internal_api"), i.get("num_threads"))
                                          for i in threadpool_info()]}
    X = _device_binary(n, m, cp.int8)
    _sync()
    # exactness on a slice against the CPU path, which also warms up cuBLAS and the kernels
    head = X[:200_000]
    Yg, Bg = pairwise_counts(head, device="gpu")
    Yc, Bc = pairwise_counts(cp.asnumpy(head), device="cpu")
    res["exact_int8"] = bool(np.array_equal(Yg, Yc) and np.array_equal(Bg, Bc))
    res["gemm_ex"] = cm._GEMM_EX_OK
    res["gpu_int8_device_s"], res["gpu_int8_device_all"] = _timed_gpu(
        lambda: pairwise_counts(X, device="gpu"))
    _emit(res)  # what was measured so far survives a later timeout
    # the stages of the device path, for the profile (default chunk)
    chunk = cm._check_chunk(None, m, "gpu")
    res["chunk"] = chunk
    blocks = [X[s : s + chunk] for s in range(0, n, chunk)]
    bad = cp.zeros(1, dtype=cp.int32)
    # validation and conversion: one pass of privirt's kernel, against cupy's array code
    res["stage_convert_s"], _ = _timed_gpu(lambda: [bytes_to_half(cp, b, bad) for b in blocks])
    res["convert_gbps"] = 3.0 * n * m / res["stage_convert_s"] / 1e9  # 1 byte in, 2 out
    res["stage_validate_cupy_s"], _ = _timed_gpu(
        lambda: [bool(cp.any(b.view(cp.uint8) > 1)) for b in blocks])
    res["stage_convert_cupy_s"], _ = _timed_gpu(lambda: [b.astype(cp.float16) for b in blocks])
    h = blocks[0].astype(cp.float16)
    t_one, _ = _timed_gpu(lambda: cm._gemm_tn_f32(cp, h, h), repeat=5)
    res["stage_gemm_s"] = t_one * len(blocks)
    res["gemm_tflops"] = 2.0 * h.shape[0] * m * m / t_one / 1e12
    del h, blocks
    for c in (1 << 18, 1 << 20):
        try:
            res[f"gpu_int8_device_chunk{c}_s"], _ = _timed_gpu(
                lambda: pairwise_counts(X, device="gpu", chunk_size=c))
        except Exception as e:  # noqa: BLE001 - reported
            res[f"gpu_int8_device_chunk{c}_s"] = f"{type(e).__name__}: {e}"
    # host int8 codes of a slice: the GPU path (copy chunk by chunk) and the CPU path
    host = cp.asnumpy(X[:n_cpu])
    del X
    cp.get_default_memory_pool().free_all_blocks()
    pairwise_counts(host[:10_000], device="cpu")
    res["cpu_n"] = n_cpu
    t0 = time.perf_counter()
    Yc, _ = pairwise_counts(host, device="cpu")
    res["cpu_slice_s"] = time.perf_counter() - t0
    res["cpu_full_est_s"] = res["cpu_slice_s"] * n / n_cpu
    res["gpu_host_slice_s"], _ = _timed_gpu(lambda: pairwise_counts(host, device="gpu"), 2)
    res["gpu_host_full_est_s"] = res["gpu_host_slice_s"] * n / n_cpu
    res["exact_host"] = bool(np.array_equal(pairwise_counts(host, device="gpu")[0], Yc))
    del host
    _emit(res)
    # float16 with NaN = missing, on the device (three indicators, two GEMMs)
    Xf = _device_binary(n, m, cp.float16, p_missing=0.1, seed=1)
    head = Xf[:100_000]
    Yg, Bg = pairwise_counts(head, device="gpu")
    hc = cp.asnumpy(head).astype(np.float64)
    Yc, Bc = pairwise_counts(hc, device="cpu")
    res["exact_f16_missing"] = bool(np.array_equal(Yg, Yc) and np.array_equal(Bg, Bc))
    res["gpu_f16_missing_device_s"], _ = _timed_gpu(lambda: pairwise_counts(Xf, device="gpu"), 2)
    return res


def _counts_rows(r: dict) -> list[dict]:
    n, m = r["n"], r["m"]
    if "cpu_full_est_s" not in r:  # cut off after the device figure
        return [{"step": f"counts {n:.0e} × {m} int8 on the GPU (partial)",
                 "ok": bool(r.get("exact_int8")), "seconds": r.get("gpu_int8_device_s"),
                 "figure": json.dumps(r, default=float)[:400]}]
    r.setdefault("exact_f16_missing", False)
    r.setdefault("gpu_f16_missing_device_s", float("nan"))
    ratio = r["cpu_full_est_s"] / r["gpu_int8_device_s"]
    rows = [{
        "step": f"counts {n:.0e} × {m} int8 on the GPU (target ≤ 0.1 s)",
        "ok": bool(r["exact_int8"] and r["exact_host"] and r["exact_f16_missing"]),
        "seconds": r["gpu_int8_device_s"],
        "figure": (f"{r['gpu_int8_device_s'] * 1e3:.0f} ms (exact: {r['exact_int8']}); CPU "
                   f"{r['cpu_full_est_s']:.1f} s (scaled from {r['cpu_n']:.0e} rows) → ×{ratio:.0f}; "
                   f"stages: validate+convert {r['stage_convert_s'] * 1e3:.0f} ms "
                   f"({r['convert_gbps']:.0f} GB/s; cupy's any + astype: "
                   f"{r['stage_validate_cupy_s'] * 1e3:.0f} + {r['stage_convert_cupy_s'] * 1e3:.0f} ms), "
                   f"GEMM {r['stage_gemm_s'] * 1e3:.0f} ms ({r['gemm_tflops']:.0f} TFLOP/s), "
                   f"chunk {r['chunk']}"),
    }, {
        "step": f"counts {n:.0e} × {m} host int8 → GPU, and float16+NaN on the GPU",
        "ok": bool(r["exact_host"] and r["exact_f16_missing"]),
        "seconds": r["gpu_host_full_est_s"],
        "figure": (f"host: {r['gpu_host_full_est_s']:.2f} s (scaled from {r['cpu_n']:.0e} rows, "
                   f"×{r['cpu_full_est_s'] / r['gpu_host_full_est_s']:.1f} vs CPU); device "
                   f"float16+NaN: {r['gpu_f16_missing_device_s'] * 1e3:.0f} ms "
                   f"(exact: {r['exact_f16_missing']})"),
    }]
    return rows


# ---------------------------------------------------------------------------------------
# step 3: Gibbs
# ---------------------------------------------------------------------------------------
def _gibbs(X, R: int, n_iter: int, seed: int, device: str):
    import privirt

    if R == 1:
        return privirt.gibbs_2pno(X[0], n_iter=n_iter, warmup=n_iter // 2, device=device,
                                  seed=seed, progress=False, keep_draws=False)
    return privirt.gibbs_2pno_replicate(X, n_iter=n_iter, warmup=n_iter // 2, device=device,
                                        seed=seed, progress=False)


def _kernel_profile(codes: np.ndarray, n_steps: int = 300) -> dict:
    """GPU milliseconds per iteration of each kernel (device events), and the host loop's
    wall time per iteration without and with the streaming summary update."""
    import cupy as cp

    from privirt.bayes import driver, gibbs as gmod, twopno

    init = twopno.default_init(codes, np.random.default_rng(0), jitter=False)
    batch = gmod._Batch(codes[None], 1, {"a": None, "b": None}, [init],
                        [np.random.SeedSequence(1)], "gpu")
    for _ in range(5):
        batch.step()
    names = ("z", "theta", "item_sums", "item")
    acc = dict.fromkeys(names, 0.0)
    plain = batch.gpu._kernels

    class Timed:
        def __init__(self, fn, name):
            self.fn, self.name = fn, name

        def __call__(self, *a):
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            self.fn(*a)
            e1.record()
            e1.synchronize()
            acc[self.name] += cp.cuda.get_elapsed_time(e0, e1)

    batch.gpu._kernels = tuple(Timed(f, nm) for f, nm in zip(plain, names))
    for _ in range(n_steps):
        batch.step()
    batch.gpu._kernels = plain
    out = {f"kernel_{k}_ms": v / n_steps for k, v in acc.items()}
    _sync()
    t0 = time.perf_counter()
    for _ in range(n_steps):
        batch.step()
    _sync()
    out["loop_ms"] = (time.perf_counter() - t0) / n_steps * 1e3
    sink = driver.DrawSink(cp, 1, {"a": batch.k, "b": batch.k, "theta": batch.n}, n_steps,
                           keep_draws=False)
    _sync()
    t0 = time.perf_counter()
    for _ in range(n_steps):
        batch.step()
        sink.update({"a": batch.a, "b": batch.b, "theta": batch.theta})
    _sync()
    out["loop_with_summary_ms"] = (time.perf_counter() - t0) / n_steps * 1e3
    return out


def worker_gibbs(args) -> dict:
    import privirt

    res: dict = {"cases": []}
    for label, n, k, R, n_iter, target in GIBBS_CASES:
        row: dict = {"label": label, "n": n, "k": k, "R": R, "n_iter": n_iter, "target_s": target}
        try:
            sims = [privirt.simulate_2pno(n, k, seed=r) for r in range(R)]
            X = [s[0] for s in sims]
            t0 = time.perf_counter()
            _gibbs(X[: min(R, 2)], min(R, 2), 4, 0, "gpu")  # kernel compilation, first calls
            row["gpu_first_call_s"] = time.perf_counter() - t0
            probe = 200
            t0 = time.perf_counter()
            _gibbs(X, R, probe, 1, "gpu")
            per_it = (time.perf_counter() - t0) / probe
            run_it = n_iter if per_it * n_iter <= args.gibbs_share else max(
                probe, int(args.gibbs_share / per_it))
            t0 = time.perf_counter()
            post = _gibbs(X, R, run_it, 2, "gpu")
            secs = time.perf_counter() - t0
            posts = post if isinstance(post, list) else [post]
            row["corr_b"] = float(np.mean([
                np.corrcoef(p.summary("b")["mean"].to_numpy(), s[3])[0, 1]
                for p, s in zip(posts, sims)]))
            row.update(gpu_s=secs, gpu_iter=run_it, gpu_full_s=secs * n_iter / run_it,
                       gpu_info_s=float(posts[0].info["seconds"]))
            # the CPU path (fused numba kernel, all cores): a short run, scaled
            _gibbs(X[: min(R, 2)], min(R, 2), 4, 0, "cpu")  # numba compilation / cache load
            cpu_it = args.gibbs_cpu_iter
            t0 = time.perf_counter()
            cpost = _gibbs(X, R, cpu_it, 3, "cpu")
            csecs = time.perf_counter() - t0
            cp0 = cpost[0] if isinstance(cpost, list) else cpost
            row.update(cpu_s=csecs, cpu_iter=cpu_it, cpu_full_s=csecs * n_iter / cpu_it,
                       cpu_engine=cp0.info.get("engine"))
            if R == 1 and k >= 100:
                row["profile"] = _kernel_profile(_codes(X[0]))
        except Exception as e:  # report and go on to the next case
            import traceback

            traceback.print_exc()
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        res["cases"].append(row)
        _emit(res)
    return res


def _codes(X) -> np.ndarray:
    from privirt.data.responses import as_responses

    return as_responses(X).codes


def _gibbs_rows(r: dict) -> list[dict]:
    rows = []
    for c in r["cases"]:
        step = f"gibbs {c['label']}, {c['n_iter']} it (target ≤ {c['target_s']:g} s)"
        if "error" in c and "gpu_full_s" not in c:
            rows.append({"step": step, "ok": False, "figure": "error: " + c["error"]})
            continue
        fig = (f"GPU {c['gpu_full_s']:.2f} s"
               + ("" if c["gpu_iter"] == c["n_iter"] else f" (scaled from {c['gpu_iter']} it)")
               + f", {c['gpu_full_s'] / c['n_iter'] * 1e3:.3f} ms/it, corr(b̂, b) = {c['corr_b']:.3f}")
        if "cpu_full_s" in c:
            fig += (f"; CPU ({c['cpu_engine']}) {c['cpu_full_s']:.1f} s (scaled from "
                    f"{c['cpu_iter']} it) → ×{c['cpu_full_s'] / c['gpu_full_s']:.1f}")
        if "profile" in c:
            p = c["profile"]
            fig += ("; per it: kernels " + ", ".join(
                f"{k[7:-3]} {v * 1e3:.0f} µs" for k, v in p.items() if k.startswith("kernel_"))
                + f", host loop {p['loop_ms'] * 1e3:.0f} µs, with summaries "
                f"{p['loop_with_summary_ms'] * 1e3:.0f} µs")
        if "error" in c:
            fig += f"; error: {c['error']}"
        rows.append({"step": step, "ok": bool(c["corr_b"] > 0.9 and "error" not in c),
                     "seconds": c["gpu_full_s"], "figure": fig})
    return rows


# ---------------------------------------------------------------------------------------
# step 4: private estimates
# ---------------------------------------------------------------------------------------
def worker_private(args) -> dict:
    import privirt

    n, m = args.private_n, args.private_m
    X, _, _ = privirt.simulate_rasch(n, m, seed=5)
    res: dict = {"n": n, "m": m}
    for dev in ("gpu", "cpu"):
        privirt.private_spectral_estimate(X[:2000], epsilon=1.0, seed=1, device=dev, n_boot=0,
                                          progress=False)
        t0 = time.perf_counter()
        r = privirt.private_spectral_estimate(X, epsilon=1.0, seed=1, device=dev, n_boot=0,
                                              progress=False)
        res[f"{dev}_point_s"] = time.perf_counter() - t0
        res[f"{dev}_beta"] = r.beta.to_numpy().tolist()
    res["max_beta_diff"] = float(np.max(np.abs(np.subtract(res["gpu_beta"], res["cpu_beta"]))))
    del res["gpu_beta"], res["cpu_beta"]
    _emit(res)
    t0 = time.perf_counter()
    privirt.private_spectral_estimate(X, epsilon=1.0, seed=1, device="gpu", progress=False)
    res["gpu_with_bootstrap_s"] = time.perf_counter() - t0
    return res


def _private_rows(r: dict) -> list[dict]:
    r.setdefault("gpu_with_bootstrap_s", float("nan"))
    return [{
        "step": f"private_spectral_estimate {r['n']:.0e} × {r['m']}, ε = 1",
        "ok": r["max_beta_diff"] < 1e-8,
        "seconds": r["gpu_point_s"],
        "figure": (f"point estimate GPU {r['gpu_point_s']:.2f} s, CPU {r['cpu_point_s']:.2f} s "
                   f"(×{r['cpu_point_s'] / r['gpu_point_s']:.1f}), max |Δβ| "
                   f"{r['max_beta_diff']:.1e}; with the default bootstrap (CPU) "
                   f"{r['gpu_with_bootstrap_s']:.1f} s"),
    }]


NUMBA_WARMUP = ("import privirt; X = privirt.simulate_2pno(60, 6, seed=0)[0]; "
                "privirt.gibbs_2pno(X, n_iter=4, warmup=2, device='cpu', progress=False); "
                "privirt.gibbs_2pno_replicate([X, X], n_iter=4, warmup=2, device='cpu', "
                "progress=False)")
#: the options a worker process is given
WORKER_OPTIONS = ("gibbs_share", "gibbs_cpu_iter", "counts_n", "counts_m", "counts_cpu_n",
                  "private_n", "private_m")
WORKERS = {"counts": (worker_counts, _counts_rows), "gibbs": (worker_gibbs, _gibbs_rows),
           "private": (worker_private, _private_rows)}


def step_worker(name: str, args, timeout: float) -> list[dict]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name]
    for opt in WORKER_OPTIONS:
        cmd += ["--" + opt.replace("_", "-"), str(getattr(args, opt))]
    rc, out, secs = _run(cmd, timeout)
    print(f"\n## {name} (rc={rc}, {secs:.0f} s)\n" + out[-6000:], flush=True)
    res = _parse_result(out)
    if res is None:
        why = f"timeout after {timeout:.0f} s" if rc == 124 else f"rc={rc}"
        return [{"step": name, "ok": False, "figure": f"no result ({why})", "seconds": secs}]
    try:
        return WORKERS[name][1](res)
    except Exception as e:  # noqa: BLE001 - a missing figure is reported, not fatal
        return [{"step": name, "ok": False, "figure": f"{type(e).__name__}: {e}; raw {res}"[:400]}]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, of {STEPS}")
    ap.add_argument("--test-timeout", type=float, default=150.0, help="seconds per test step")
    ap.add_argument("--counts-timeout", type=float, default=120.0)
    ap.add_argument("--gibbs-timeout", type=float, default=180.0)
    ap.add_argument("--private-timeout", type=float, default=90.0)
    ap.add_argument("--gibbs-share", type=float, default=30.0,
                    help="seconds of GPU sampling per Gibbs case before scaling")
    ap.add_argument("--gibbs-cpu-iter", type=int, default=100,
                    help="iterations of the CPU run per Gibbs case (scaled to the full run)")
    ap.add_argument("--counts-n", type=int, default=10_000_000)
    ap.add_argument("--counts-m", type=int, default=1000)
    ap.add_argument("--counts-cpu-n", type=int, default=1_000_000,
                    help="rows of the CPU (and host-input) counts, scaled to --counts-n")
    ap.add_argument("--private-n", type=int, default=1_000_000)
    ap.add_argument("--private-m", type=int, default=100)
    ap.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        _emit(WORKERS[args.worker][0](args))
        return 0

    import privirt

    header = (f"# privirt GPU check — {platform.node()}, {os.cpu_count()} CPU(s), "
              f"numpy {np.__version__}")
    try:
        import cupy

        dev = cupy.cuda.runtime.getDeviceProperties(0)
        header += (f", cupy {cupy.__version__}, {dev['name'].decode()}, "
                   f"{dev['totalGlobalMem'] / 2**30:.0f} GiB")
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        header += f", cupy unusable: {type(e).__name__}: {e}"
    print(header, flush=True)
    if not privirt.gpu_available():
        print("no CUDA GPU visible to cupy: nothing to check", flush=True)
        return 2

    steps = [s for s in args.steps.split(",") if s]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        ap.error(f"unknown steps {unknown}; choose from {STEPS}")
    timeouts = {"counts": args.counts_timeout, "gibbs": args.gibbs_timeout,
                "private": args.private_timeout}
    warm = None
    if "gibbs" in steps:
        # compile the CPU kernel (numba, cached on disk) while the earlier steps run, so that
        # the Gibbs step's CPU peer is timed warm and its time limit is not spent compiling
        warm = subprocess.Popen([sys.executable, "-c", NUMBA_WARMUP], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows: list[dict] = []
    for s in steps:
        if s == "gibbs" and warm is not None:
            try:
                warm.wait(timeout=120)
            except subprocess.TimeoutExpired:
                warm.kill()
        rows += step_tests(args.test_timeout) if s == "tests" else step_worker(s, args, timeouts[s])

    print("\n| step | ok | result |\n|---|---|---|")
    for r in rows:
        print(f"| {r['step']} | {'yes' if r['ok'] else 'NO'} | {r['figure']} |")
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "gpu_check.json").write_text(json.dumps({"header": header, "rows": rows},
                                                             indent=1, default=float))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
