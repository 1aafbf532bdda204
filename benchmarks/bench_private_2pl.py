"""Accuracy and interval coverage of the private 2PNO estimator (``private_2pl_estimate``)
against the non-private Gibbs posterior mean (``gibbs_2pno``) on the same data.

Data: 2PNO, a ~ LogNormal(0, 0.3), b ~ N(0, 1), θ ~ N(0, 1); δ = 1e-4.  Tables:

* targets: relative ℓ2 error ‖â − ā‖/‖ā‖ of the private a against the Gibbs posterior mean ā
  at (n, m, ε) = (10 000, 20, 1) (target ≤ 0.15) and (100 000, 50, 1) (≤ 0.10); the same for
  b; the "all a equal" baseline (every a = the geometric mean of ā);
* ε sweep at (10 000, 20): ε ∈ {0.1, 0.3, 1, 3, 10} — never worse than all a equal (≤ 1);
  difficulties beside the private totals estimator at the same ε (its Rasch β against the
  non-private CML β on the same data, relative ℓ2 of the centred vectors);
* coverage of the 95 % intervals (200 bootstrap replicates) of a and b at (10 000, 20),
  ε ∈ {1, 3}, against the true parameters and against the Gibbs posterior mean (target 90–98 %);
* LSAT7 (n = 1000, m = 5) at ε = 1, 3: private a beside the Gibbs posterior mean (no target).

    python benchmarks/bench_private_2pl.py            # full run (long: Gibbs on 5 M cells)
    python benchmarks/bench_private_2pl.py --quick    # fewer trials, no (100 000, 50)

Seeds: data from 50_000 on, noise unseeded (private), Gibbs seeded.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import privirt  # noqa: E402

DELTA = 1e-4


def simulate(n: int, m: int, seed: int):
    rng = np.random.default_rng(seed)
    a = np.exp(rng.normal(0.0, 0.3, m))
    b = rng.normal(0.0, 1.0, m)
    theta = rng.standard_normal(n)
    X = (rng.random((n, m)) < special.ndtr(theta[:, None] * a - b)).astype(np.int8)
    return X, a, b


def gibbs_mean(X, n_iter: int, warmup: int, seed: int):
    post = privirt.gibbs_2pno(X, n_iter=n_iter, warmup=warmup, seed=seed, progress=False, keep_draws=False)
    return post.mean("a").to_numpy(), post.mean("b").to_numpy()


def rel(x, y) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    return float(np.linalg.norm(x - y) / np.linalg.norm(y))


def equal_a(a_ref) -> np.ndarray:
    return np.full(len(a_ref), float(np.exp(np.mean(np.log(a_ref)))))


def totals_rel(X, eps: float) -> float:
    """Relative ℓ2 error of the private totals estimator's β against CML on the same data."""
    ref = privirt.cmle_estimate(X).beta.to_numpy()
    got = privirt.private_totals_estimate(X, epsilon=eps, delta=DELTA, n_boot=0).beta.to_numpy()
    return rel(got - got.mean(), ref - ref.mean())


def covered(ci, truth) -> np.ndarray:
    return (ci["lo"].to_numpy() <= truth) & (truth <= ci["hi"].to_numpy())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    quick = args.quick
    t_start = time.time()
    print(f"load average at start: {os.getloadavg()[0]:.1f}, {os.getloadavg()[1]:.1f}, {os.getloadavg()[2]:.1f}")

    # -- (10 000, 20): Gibbs reference, ε sweep, difficulties beside totals --------------------
    trials = 2 if quick else 3
    sweep = (0.1, 0.3, 1.0, 3.0, 10.0)
    rows = {e: [] for e in sweep}
    for k in range(trials):
        X, a, b = simulate(10_000, 20, 50_000 + k)
        t0 = time.time()
        ga, gb = gibbs_mean(X, 1500, 500, k)
        t_gibbs = time.time() - t0
        for e in sweep:
            t0 = time.time()
            fit = privirt.private_2pl_estimate(X, epsilon=e, delta=DELTA, n_boot=0)
            t_fit = time.time() - t0
            rows[e].append([rel(fit.a, ga), rel(equal_a(ga), ga), rel(fit.b, gb), totals_rel(X, e),
                            rel(ga, a), t_fit, t_gibbs])
        print(f"  trial {k}: Gibbs {t_gibbs:.0f} s", flush=True)
    print("\n(n, m) = (10000, 20): mean over", trials, "data sets (relative ℓ2 errors against the Gibbs posterior mean)")
    print("| ε | a: private | a: all equal | b: private | totals β vs CML | Gibbs ā vs true a | s / private call (no bootstrap) |")
    print("|---|---|---|---|---|---|---|")
    for e in sweep:
        r = np.mean(rows[e], axis=0)
        print(f"| {e:g} | {r[0]:.3f} | {r[1]:.3f} | {r[2]:.3f} | {r[3]:.3f} | {r[4]:.3f} | {r[5]:.2f} |")
    print(f"Gibbs (1500 iterations, 500 warmup): {np.mean([x[6] for x in rows[1.0]]):.0f} s per data set", flush=True)

    # -- coverage at (10 000, 20), ε ∈ {1, 3} ----------------------------------------------------
    cov_trials = 4 if quick else 10
    print(f"\ncoverage of 95 % intervals at (10000, 20), {cov_trials} data sets × 20 items, 200 bootstrap replicates")
    print("| ε | a: covers true a | b: covers true b | s / call |")
    print("|---|---|---|---|")
    for e in (1.0, 3.0):
        ha, hb, ts = [], [], []
        for k in range(cov_trials):
            X, a, b = simulate(10_000, 20, 51_000 + k)
            t0 = time.time()
            fit = privirt.private_2pl_estimate(X, epsilon=e, delta=DELTA, n_boot=200)
            ts.append(time.time() - t0)
            ha.append(covered(fit.ci["a"], a))
            hb.append(covered(fit.ci["b"], b))
        print(f"| {e:g} | {np.mean(ha):.3f} | {np.mean(hb):.3f} | {np.median(ts):.1f} |", flush=True)
    # against the Gibbs posterior mean, on the data sets of the first block
    for e in (1.0, 3.0):
        ha, hb = [], []
        for k in range(min(trials, 2)):
            X, a, b = simulate(10_000, 20, 50_000 + k)
            ga, gb = gibbs_mean(X, 1500, 500, k)
            fit = privirt.private_2pl_estimate(X, epsilon=e, delta=DELTA, n_boot=200)
            ha.append(covered(fit.ci["a"], ga))
            hb.append(covered(fit.ci["b"], gb))
        print(f"ε = {e:g}: intervals cover the Gibbs posterior mean: a {np.mean(ha):.3f}, b {np.mean(hb):.3f} "
              f"({len(ha)} data sets)", flush=True)

    # -- LSAT7 --------------------------------------------------------------------------------------
    X = privirt.load_dataset("lsat7")
    post = privirt.gibbs_2pno(X, n_iter=6000, warmup=2000, seed=1, progress=False, keep_draws=False)
    ga = post.mean("a")
    print("\nLSAT7 (n = 1000, m = 5): a (2PNO) — Gibbs posterior mean (6000 iterations) and private, 95 % intervals")
    line = "| item | Gibbs ā | " + " | ".join(f"ε = {e:g}: a [lo, hi]" for e in (1.0, 3.0)) + " |"
    print(line)
    print("|---|---|---|---|")
    fits = {e: privirt.private_2pl_estimate(X, epsilon=e, delta=DELTA, n_boot=200) for e in (1.0, 3.0)}
    for item in ga.index:
        cells = [f"{f.a[item]:.2f} [{f.ci['a'].loc[item, 'lo']:.2f}, {f.ci['a'].loc[item, 'hi']:.2f}]"
                 for f in fits.values()]
        print(f"| {item} | {ga[item]:.2f} | " + " | ".join(cells) + " |")
    print("relative ℓ2 error against ā: " + ", ".join(f"ε = {e:g}: {rel(f.a, ga):.3f}" for e, f in fits.items()),
          flush=True)

    # -- (100 000, 50, 1) -------------------------------------------------------------------------
    if not quick:
        X, a, b = simulate(100_000, 50, 52_000)
        t0 = time.time()
        ga, gb = gibbs_mean(X, 500, 250, 0)
        t_gibbs = time.time() - t0
        errs = []
        for r in range(3):
            t0 = time.time()
            fit = privirt.private_2pl_estimate(X, epsilon=1.0, delta=DELTA, n_boot=0)
            errs.append([rel(fit.a, ga), rel(fit.b, gb), time.time() - t0])
        e = np.mean(errs, axis=0)
        print(f"\n(100000, 50, ε = 1), one data set, 3 releases: a {e[0]:.3f} (target ≤ 0.10), b {e[1]:.3f}, "
              f"all a equal {rel(equal_a(ga), ga):.3f}, Gibbs ā vs true a {rel(ga, a):.3f}; "
              f"{e[2]:.1f} s per private call (no bootstrap); Gibbs (500 iterations, 250 warmup) {t_gibbs:.0f} s")
    print(f"\ntotal {time.time() - t_start:.0f} s; load average at end: {os.getloadavg()[0]:.1f}, "
          f"{os.getloadavg()[1]:.1f}, {os.getloadavg()[2]:.1f}")


if __name__ == "__main__":
    main()
