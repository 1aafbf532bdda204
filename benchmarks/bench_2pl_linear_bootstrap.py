"""The private 2PL bootstrap's replicates refitted in full (the default below 10 000 persons and
200 items) beside the linearised refits of ``privirt.private.twopl.estimate.BOOTSTRAP_REFITS``
("one_step", the default from 10 000 persons or 200 items: one Gauss–Newton step with
the simulation point's Jacobian, weights and Cholesky factor; "chord2": one more chord step), on
the SAME releases and the same bootstrap draws (the seed of ``estimate_2pl_from_release``).

Data: ``bench_private_2pl.simulate(n, m, seed)`` (a ~ LogNormal(0, 0.3), b ~ N(0, 1)), one
``release_2pl(..., seed=seed + 1)`` per data set, δ = 1e-4, seeds 300 000 + 100·(crc32 of the cell % 10⁵) + k.  Per
data set and mode: se(log a), se(b), se(τ), the interval centres, whether the 95 % intervals of a,
b and τ cover the TRUE values, the interval route, and the CPU seconds (``time.process_time``) of
``estimate_2pl_from_release`` (defaults: n_boot = 200, intervals = "auto").  The point fit
(``_point``: the fit, the all-equal fit and the 2 × 32 noise-variance refits) is the same in every
mode: it is computed once per release, timed, and its CPU added to each mode's.

Run (one JSON line per data set, then the tables)::

    nice -n 10 python benchmarks/bench_2pl_linear_bootstrap.py --cells 10000,20,1 10000,50,1 \\
        --sets 4 --out linboot.jsonl
    python benchmarks/bench_2pl_linear_bootstrap.py --summary linboot.jsonl

``--modes full,one_step`` runs a subset of the modes (``--modes one_step`` alone: coverage and CPU
only, where the full refits would take too long).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import by_cell, jsonl_rows  # noqa: E402
import privirt.private.twopl.estimate as E  # noqa: E402
from bench_private_2pl import DELTA, simulate  # noqa: E402
from privirt.private.twopl import estimate_2pl_from_release, release_2pl  # noqa: E402

MODES = ("full", "one_step", "chord2")
SEED0 = 300_000


def _cached_point():
    """``E._point`` computed once per release (its CPU recorded in ``cache['cpu']``)."""
    original = E._point
    cache: dict = {}

    def point(release, tick=None):
        key = id(release)
        if cache.get("key") != key:
            t0 = time.process_time()
            value = original(release, tick)
            cache.update(key=key, value=value, cpu=time.process_time() - t0)
            cache["fresh"] = True
        else:
            cache["fresh"] = False
        return cache["value"]

    return point, cache


def one_set(n: int, m: int, eps: float, seed: int, cache: dict, modes=MODES) -> dict:
    X, a, b = simulate(n, m, seed)
    tau = b / np.sqrt(1.0 + a * a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = release_2pl(X, epsilon=eps, delta=DELTA, seed=seed + 1)
    out: dict = {"n": n, "m": m, "eps": eps, "seed": seed, "load": os.getloadavg()[0]}
    default = E.BOOTSTRAP_REFITS
    for mode in modes:
        E.BOOTSTRAP_REFITS = mode
        t0 = time.process_time()
        fit = estimate_2pl_from_release(rel, seed=seed + 2, progress=False)
        cpu = time.process_time() - t0
        point_cpu = cache["cpu"]
        if not cache["fresh"]:
            cpu += point_cpu
        lo_a, hi_a = fit.ci["a"]["lo"].to_numpy(), fit.ci["a"]["hi"].to_numpy()
        lo_b, hi_b = fit.ci["b"]["lo"].to_numpy(), fit.ci["b"]["hi"].to_numpy()
        lo_t, hi_t = fit.ci["tau"]["lo"].to_numpy(), fit.ci["tau"]["hi"].to_numpy()
        out[mode] = {
            "cpu": cpu, "point_cpu": point_cpu, "route": fit.info["intervals"],
            "refits": fit.info["bootstrap_refits"],
            "se_log_a": fit.se["log_a"].tolist(), "se_b": fit.se["b"].tolist(), "se_tau": fit.se["tau"].tolist(),
            "c_log_a": (0.5 * (np.log(lo_a) + np.log(hi_a))).tolist(), "c_b": (0.5 * (lo_b + hi_b)).tolist(),
            "c_tau": (0.5 * (lo_t + hi_t)).tolist(),
            "cov_a": float(np.mean((lo_a <= a) & (a <= hi_a))), "cov_b": float(np.mean((lo_b <= b) & (b <= hi_b))),
            "cov_tau": float(np.mean((lo_t <= tau) & (tau <= hi_t))),
        }
    E.BOOTSTRAP_REFITS = default
    return out


def _q(x) -> str:
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    if not x.size:
        return "–"
    lo, med, hi = np.percentile(x, [5, 50, 95])
    return f"{med:.3f} ({lo:.3f}–{hi:.3f})"


def summary(path: str) -> None:
    cells = by_cell(jsonl_rows(path))
    print("| (n, m, ε) | sets | route | mode | se(log a) ratio | se(b) ratio | se(τ) ratio "
          "| shift log a /se | shift b /se | shift τ /se |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for key, rs in cells.items():
        for mode in [md for md in MODES[1:] if all(md in r for r in rs)]:
            if not all("full" in r for r in rs):
                break
            ratio = {k: np.concatenate([np.divide(r[mode][k], r["full"][k]) for r in rs])
                     for k in ("se_log_a", "se_b", "se_tau")}
            shift = {k: np.concatenate([np.divide(np.subtract(r[mode]["c_" + k], r["full"]["c_" + k]),
                                                  r["full"]["se_" + k]) for r in rs])
                     for k in ("log_a", "b", "tau")}
            route = "/".join(sorted({r[mode]["route"] for r in rs}))
            print(f"| {key} | {len(rs)} | {route} | {mode} | {_q(ratio['se_log_a'])} | {_q(ratio['se_b'])} "
                  f"| {_q(ratio['se_tau'])} | {_q(np.abs(shift['log_a']))} | {_q(np.abs(shift['b']))} "
                  f"| {_q(np.abs(shift['tau']))} |")
    print()
    print("| (n, m, ε) | sets | mode | coverage a | coverage b | coverage τ | CPU s (mean) | of which point fit "
          "| speed-up | bootstrap part CPU s | its speed-up | load | Δ coverage a, b (paired) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key, rs in cells.items():
        has_full = all("full" in r for r in rs)
        full_cpu = np.mean([r["full"]["cpu"] for r in rs]) if has_full else float("nan")
        full_boot = full_cpu - np.mean([r["full"]["point_cpu"] for r in rs]) if has_full else float("nan")
        for mode in [md for md in MODES if all(md in r for r in rs)]:
            def cov(k):
                v = np.array([r[mode][k] for r in rs])
                se = v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
                return f"{v.mean():.3f} ± {se:.3f}"
            def diff(k):
                if not has_full:
                    return "–"
                v = np.array([r[mode][k] - r["full"][k] for r in rs])
                se = v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
                return f"{v.mean():+.3f} ± {se:.3f}"
            cpu = np.mean([r[mode]["cpu"] for r in rs])
            pt = np.mean([r[mode]["point_cpu"] for r in rs])
            load = np.mean([r["load"] for r in rs])
            print(f"| {key} | {len(rs)} | {mode} | {cov('cov_a')} | {cov('cov_b')} | {cov('cov_tau')} | {cpu:.1f} "
                  f"| {pt:.1f} | {full_cpu / cpu:.2f}× | {cpu - pt:.1f} | {full_boot / max(cpu - pt, 1e-9):.1f}× "
                  f"| {load:.2f} | {diff('cov_a')}, {diff('cov_b')} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", nargs="*", default=[], help="n,m,eps triples")
    ap.add_argument("--sets", type=int, default=4)
    ap.add_argument("--modes", default=",".join(MODES), help="refit modes to run, comma-separated")
    ap.add_argument("--first", type=int, default=0, help="first data set index (to extend a cell)")
    ap.add_argument("--out", default=None, help="append JSON lines here")
    ap.add_argument("--summary", default=None, help="print the tables of a JSON-lines file")
    args = ap.parse_args(argv)
    if args.summary:
        summary(args.summary)
        return
    point, cache = _cached_point()
    E._point = point
    for c, cell in enumerate(args.cells):
        n, m, eps = cell.split(",")
        n, m, eps = int(n), int(m), float(eps)
        for k in range(args.first, args.first + args.sets):
            seed = SEED0 + 100 * (zlib.crc32(f"{n},{m},{eps:g}".encode()) % 100_000) + k
            modes = tuple(args.modes.split(","))
            row = one_set(n, m, eps, seed, cache, modes)
            line = json.dumps(row)
            print(f"# {cell} set {k}: " + ", ".join(f"{mode} {row[mode]['cpu']:.1f}s" for mode in modes)
                  + f" (point {row[modes[0]]['point_cpu']:.1f}s, load {row['load']:.2f})", flush=True)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(line + "\n")


if __name__ == "__main__":
    main()
