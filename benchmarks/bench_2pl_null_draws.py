"""The private 2PL's noise-variance refits from ``NULL_FEWER_FROM`` items: 2 × NULL_REPLICATES_MOST
(4) draws pooled over the 32 items nearest in τ (the default) against 2 × NULL_REPLICATES_MANY (8)
pooled over 16 (``NULL_FEWER_FROM`` raised past m), on the SAME releases.

Data ``bench_private_2pl.simulate(n, m, seed)`` (a ~ LogNormal(0, 0.3), b ~ N(0, 1)), one
``release_2pl(..., seed=seed + 1)`` per data set (δ = 1e-4), seeds 11 000 000 + 1000·cell + k.
Per data set and variant: the relative ℓ2 error of the shrunk a and of the centred b against the
true parameters, the coverage of the Laplace intervals (``intervals="laplace"``: centred at the
shrunk estimates, so they see the shrinkage), the CPU seconds of the point estimate, and the
per-item noise SDs (``info["noise_sd_log_a"]``, ``info["noise_sd_tau"]``) and the level's.

Run (one JSON line per data set, then the table)::

    nice -n 10 python benchmarks/bench_2pl_null_draws.py --cells 1000,400,1 2000,500,1 --sets 4 --out nd.jsonl
    python benchmarks/bench_2pl_null_draws.py --summary nd.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import privirt.private.twopl.estimate as E  # noqa: E402
from bench_private_2pl import DELTA, covered, rel, relc, simulate  # noqa: E402
from privirt.private.twopl import estimate_2pl_from_release, release_2pl  # noqa: E402

SEED0 = 11_000_000
VARIANTS = {"eight": 10**9, "four": None}  # NULL_FEWER_FROM per variant (None: the module's)


def one_set(n: int, m: int, eps: float, seed: int) -> dict:
    X, a, b = simulate(n, m, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rl = release_2pl(X, epsilon=eps, delta=DELTA, seed=seed + 1)
    out: dict = {"n": n, "m": m, "eps": eps, "seed": seed, "load": os.getloadavg()[0]}
    keep = E.NULL_FEWER_FROM
    for name, value in VARIANTS.items():
        E.NULL_FEWER_FROM = keep if value is None else value
        try:
            t0 = time.process_time()
            fit = estimate_2pl_from_release(rl, intervals="laplace", n_boot=20, progress=False)
            cpu = time.process_time() - t0
        finally:
            E.NULL_FEWER_FROM = keep
        out[name] = {"cpu": cpu, "reps": E.null_replicates(m, "none") if value is None else E.NULL_REPLICATES_MANY,
                     "err_a": rel(fit.a.to_numpy(), a), "err_b": relc(fit.b.to_numpy(), b),
                     "cov_a": float(covered(fit.ci["a"], a).mean()), "cov_b": float(covered(fit.ci["b"], b).mean()),
                     "sd_log_a": fit.info["noise_sd_log_a"], "sd_tau": fit.info["noise_sd_tau"],
                     "sd_level": fit.info["noise_sd_mean_log_a"], "bias_level": fit.info["noise_bias_mean_log_a"]}
    return out


def summary(path: str) -> None:
    rows = [json.loads(line) for line in open(path) if line.strip()]
    cells: dict = {}
    for r in rows:
        cells.setdefault((r["n"], r["m"], r["eps"]), []).append(r)
    print("| (n, m, ε) | sets | draws | rel. error a: 8 | 4 | Δ (SE) | rel. error b: 8 | 4 | Δ (SE) "
          "| Laplace cover a: 8 | 4 | b: 8 | 4 | noise SD ratio 4/8, log a | τ | level SD: 8 | 4 "
          "| CPU s: 8 | 4 | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key, rs in cells.items():
        def col(v, k):
            return np.array([r[v][k] for r in rs])

        def diff(k):
            d = col("four", k) - col("eight", k)
            se = d.std(ddof=1) / np.sqrt(d.size) if d.size > 1 else float("nan")
            return f"{d.mean():+.4f} ({se:.4f})"

        def ratio(k):
            x = np.concatenate([np.divide(r["four"][k], r["eight"][k]) for r in rs])
            lo, med, hi = np.percentile(x, [5, 50, 95])
            return f"{med:.3f} ({lo:.3f}–{hi:.3f})"

        print(f"| {key} | {len(rs)} | {rs[0]['four']['reps']} | {col('eight', 'err_a').mean():.4f} "
              f"| {col('four', 'err_a').mean():.4f} | {diff('err_a')} | {col('eight', 'err_b').mean():.4f} "
              f"| {col('four', 'err_b').mean():.4f} | {diff('err_b')} | {col('eight', 'cov_a').mean():.3f} "
              f"| {col('four', 'cov_a').mean():.3f} | {col('eight', 'cov_b').mean():.3f} | {col('four', 'cov_b').mean():.3f} "
              f"| {ratio('sd_log_a')} | {ratio('sd_tau')} | {col('eight', 'sd_level').mean():.4f} "
              f"| {col('four', 'sd_level').mean():.4f} | {np.median(col('eight', 'cpu')):.1f} "
              f"| {np.median(col('four', 'cpu')):.1f} | {np.mean([r['load'] for r in rs]):.2f} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", nargs="*", default=[], help="n,m,eps triples")
    ap.add_argument("--sets", type=int, default=4)
    ap.add_argument("--first", type=int, default=0, help="first data set index (to extend a cell)")
    ap.add_argument("--out", default=None, help="append JSON lines here")
    ap.add_argument("--summary", default=None, help="print the table of a JSON-lines file")
    args = ap.parse_args(argv)
    if args.summary:
        summary(args.summary)
        return
    for cell in args.cells:
        n, m, eps = cell.split(",")
        n, m, eps = int(n), int(m), float(eps)
        if m < E.NULL_FEWER_FROM:
            raise SystemExit(f"--cells {cell}: m must be at least NULL_FEWER_FROM = {E.NULL_FEWER_FROM}")
        c = n * 7 + m * 13 + int(round(eps * 10)) * 17
        for k in range(args.first, args.first + args.sets):
            row = one_set(n, m, eps, SEED0 + 1000 * (c % 1000) + k)
            print(f"# {cell} set {k}: " + ", ".join(f"{v} {row[v]['cpu']:.1f}s a {row[v]['err_a']:.4f} "
                                                    f"b {row[v]['err_b']:.4f}" for v in VARIANTS)
                  + f" (load {row['load']:.2f})", flush=True)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
