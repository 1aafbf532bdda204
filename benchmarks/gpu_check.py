"""One-command GPU checklist: the GPU tests, then the GPU benchmark cases, then a table.

Meant for a single device session of at most ten minutes (each step has its own time
limit, so a hang in one does not eat the others):

1. ``python -m pytest -m gpu -q`` — every test marked ``gpu`` (CPU/GPU agreement of the
   counts, spectral estimator, private release, Gibbs and MH samplers), plus
   ``tests/test_gpu_static.py`` (kernel sources compiled with NVRTC/nvcc).
2. The 2PNO Gibbs sampler on the GPU, the cases of Sheng, Welling & Zhu (2014):
   CBASE size 3356 × 180 for 10,000 iterations, 10,000 × 200 for 10,000 iterations, and
   100 replications of 2000 × 50 for 5000 iterations in one batch
   (:func:`privirt.gibbs_2pno_replicate`).  Each case is first timed over a short run;
   when the full run would not fit its time share, the measured part is extrapolated
   and the table says so.  A recovery column (correlation of posterior means of b with the
   simulated b) catches a sampler that runs fast but wrong.
3. ``benchmarks/bench_spectral.py --sizes 1e7x1000 --device gpu --no-baseline`` (pairwise
   counts and spectral estimate of 10^7 persons × 1000 items, host and device-resident
   input).

Usage::

    python benchmarks/gpu_check.py                 # everything, about 10 minutes at most
    python benchmarks/gpu_check.py --skip-spectral --gibbs-share 60

Writes the table to stdout and, as JSON, to ``$OUT/gpu_check.json`` when ``OUT`` is set.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GIBBS_CASES = [
    # label, persons, items, replications, iterations (burn-in = half)
    ("CBASE size 3356 × 180", 3356, 180, 1, 10_000),
    ("10000 × 200", 10_000, 200, 1, 10_000),
    ("100 × (2000 × 50) replications", 2000, 50, 100, 5000),
]


def _run(cmd: list[str], timeout: float) -> tuple[int, str, float]:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        out = proc.stdout + proc.stderr
        rc = proc.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc = 124
    return rc, out, time.perf_counter() - t0


def step_tests(timeout: float) -> list[dict]:
    rows = []
    for label, cmd in (
        ("pytest -m gpu", [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-rs", "-p", "no:cacheprovider"]),
        ("tests/test_gpu_static.py", [sys.executable, "-m", "pytest", "tests/test_gpu_static.py",
                                      "-q", "-rs", "-p", "no:cacheprovider"]),
    ):
        rc, out, secs = _run(cmd, timeout)
        lines = [ln for ln in out.strip().splitlines() if ln.strip()]
        summary = lines[-1] if lines else "(no output)"
        print(f"\n## {label} (rc={rc}, {secs:.0f} s)\n" + "\n".join(lines[-40:]), flush=True)
        rows.append({"step": label, "ok": rc == 0, "figure": summary, "seconds": secs})
    return rows


def _gibbs_once(X, R: int, n_iter: int, seed: int):
    import privirt

    if R == 1:
        return privirt.gibbs_2pno(X[0], n_iter=n_iter, warmup=n_iter // 2, device="gpu",
                                  seed=seed, progress=False, keep_draws=False)
    return privirt.gibbs_2pno_replicate(X, n_iter=n_iter, warmup=n_iter // 2, device="gpu",
                                        seed=seed, progress=False)


def step_gibbs(share: float) -> list[dict]:
    import privirt

    rows = []
    for label, n, k, R, n_iter in GIBBS_CASES:
        row = {"step": f"gibbs GPU {label}, {n_iter} it", "ok": False}
        try:
            sims = [privirt.simulate_2pno(n, k, seed=r) for r in range(R)]
            X = [s[0] for s in sims]
            _gibbs_once(X[: min(R, 2)], min(R, 2), 4, 0)  # kernel compilation, cuBLAS handles
            probe = 200
            t0 = time.perf_counter()
            _gibbs_once(X, R, probe, 1)
            per_it = (time.perf_counter() - t0) / probe
            run_it = n_iter if per_it * n_iter <= share else max(probe, int(share / per_it))
            t0 = time.perf_counter()
            post = _gibbs_once(X, R, run_it, 2)
            secs = time.perf_counter() - t0
            posts = post if isinstance(post, list) else [post]
            corr = float(np.mean([
                np.corrcoef(p.summary("b")["mean"].to_numpy(), s[3])[0, 1]
                for p, s in zip(posts, sims)
            ]))
            full = secs * n_iter / run_it
            row.update(ok=bool(corr > 0.9), seconds=secs, iterations=run_it,
                       per_iteration_s=secs / run_it, full_run_s=full, corr_b=corr,
                       figure=(f"{full:.1f} s for {n_iter} it"
                               + ("" if run_it == n_iter else f" (extrapolated from {run_it} it)")
                               + f", {secs / run_it * 1e3:.2f} ms/it, corr(b̂, b) = {corr:.3f}"))
        except Exception as e:  # report and go on to the next case
            row.update(figure=f"error: {type(e).__name__}: {e}"[:300])
        print(f"\n## {row['step']}: {row['figure']}", flush=True)
        rows.append(row)
    return rows


def step_spectral(timeout: float) -> list[dict]:
    cmd = [sys.executable, "benchmarks/bench_spectral.py", "--sizes", "1e7x1000", "--device",
           "gpu", "--no-baseline"]
    rc, out, secs = _run(cmd, timeout)
    print("\n## " + " ".join(cmd[1:]) + f" (rc={rc}, {secs:.0f} s)\n" + out, flush=True)
    figure = "; ".join(ln.strip() for ln in out.splitlines()
                       if ln.strip() and not ln.startswith("-") and not ln.lstrip().startswith("n "))
    return [{"step": "bench_spectral 1e7x1000 GPU", "ok": rc == 0 and "failed" not in out,
             "figure": figure[:300] if rc != 124 else f"timeout after {timeout:.0f} s",
             "seconds": secs}]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--test-timeout", type=float, default=150.0, help="seconds per test step")
    ap.add_argument("--gibbs-share", type=float, default=45.0,
                    help="seconds of measured sampling per Gibbs case before extrapolating")
    ap.add_argument("--spectral-timeout", type=float, default=260.0)
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--skip-gibbs", action="store_true")
    ap.add_argument("--skip-spectral", action="store_true")
    args = ap.parse_args(argv)

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

    rows: list[dict] = []
    if not args.skip_tests:
        rows += step_tests(args.test_timeout)
    if not args.skip_gibbs:
        rows += step_gibbs(args.gibbs_share)
    if not args.skip_spectral:
        rows += step_spectral(args.spectral_timeout)

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
