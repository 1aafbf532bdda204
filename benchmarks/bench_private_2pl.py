"""Accuracy and interval coverage of the private 2PNO estimator (``private_2pl_estimate``)
against the non-private Gibbs posterior mean (``gibbs_2pno``) on the same data.

Data: 2PNO, a ~ LogNormal(0, 0.3), b ~ N(0, 1), θ ~ N(0, 1); δ = 1e-4.  Tables:

* targets: relative ℓ2 error ‖â − ā‖/‖ā‖ of the private a against the Gibbs posterior mean ā
  at (n, m, ε) = (10 000, 20, 1) (target ≤ 0.15) and (100 000, 50, 1) (≤ 0.10); the same for
  b; the "all a equal" baseline (every a = the geometric mean of ā);
* ε sweep at (10 000, 20): ε ∈ {0.1, 0.3, 1, 3, 10}; difficulties beside the private totals
  estimator at the same ε, each against the non-private fit of its own estimator on the same
  data (centred vectors, relative ℓ2): the totals estimator's Rasch β against CML (a function
  of the same totals), the private b (and τ = b/√(1 + a²)) against the noise-free one-factor
  fit of the same statistics; b against the Gibbs posterior mean too;
* grid ε ∈ {0.1, 0.3, 1, 3, 10} × n ∈ {1000, 10 000, 100 000} × m ∈ {5, 20, 50}: the largest
  relative error of a against the true a over the data sets of a cell, beside all a equal
  (every a = the geometric mean of the true a) — never worse than all a equal (≤ 1);
* coverage of the 95 % intervals (200 bootstrap replicates) of a and b at (10 000, 20),
  ε ∈ {1, 3}, against the true parameters and against the Gibbs posterior mean (target 90–98 %);
* LSAT7 (n = 1000, m = 5) at ε = 1, 3: private a beside the Gibbs posterior mean (no target);
* defaults: CPU seconds of the default call (with its intervals) beside the private totals
  estimator at (n, m) = (400, 30), (10 000, 20), (10 000, 100), (1000, 5);
* mcar (``--parts mcar``, not in the default run): (10 000, 20, ε ∈ {0.3, 1, 3}) with 20 % and 50 % of the
  cells missing completely at random (independently), ``missing="mcar"``: relative ℓ2 error of
  a and b (centred) against the truth, beside the complete-data private fit on the same data
  before the cells were removed and the noise-free MCAR fit (the same ratios without noise);
  against the non-private Gibbs posterior mean on the observed cells; coverage of the 95 %
  intervals (200 replicates) against the truth; CPU seconds per call.

    python benchmarks/bench_private_2pl.py            # full run (long: Gibbs on 5 M cells)
    python benchmarks/bench_private_2pl.py --quick    # fewer trials, no (100 000, 50)
    python benchmarks/bench_private_2pl.py --parts sweep,grid   # some tables only
    python benchmarks/bench_private_2pl.py --parts mcar         # declared MCAR (issue 25)

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


def relc(x, y) -> float:
    """Relative ℓ2 error of the centred vectors."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    return rel(x - x.mean(), y - y.mean())


def totals_rel(X, eps: float) -> float:
    """Relative ℓ2 error of the private totals estimator's β against CML on the same data."""
    ref = privirt.cmle_estimate(X).beta.to_numpy()
    got = privirt.private_totals_estimate(X, epsilon=eps, delta=DELTA, n_boot=0).beta.to_numpy()
    return relc(got, ref)


def noise_free(X):
    """The one-factor fit of the exact statistics (what the private fit estimates): (a, b, τ)."""
    from privirt.private.twopl import pair_statistics
    from privirt.private.twopl.fit import fit_factor, to_2pno

    f = fit_factor(*pair_statistics(X), X.shape[0], 0.0, 0.0)
    a, b = to_2pno(f.tau[0], f.lam[0])
    return a, b, f.tau[0]


def grid(trials: int) -> None:
    """Largest relative error of a against the true a per (ε, n, m) cell."""
    print(f"\ngrid: largest relative ℓ2 error of a against the true a over {trials} data sets per cell "
          "(all a equal: every a = the geometric mean of the true a); s per private call (median)")
    print("| n | m | ε = 0.1 | ε = 0.3 | ε = 1 | ε = 3 | ε = 10 | all a equal | s / call |")
    print("|---|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for n in (1000, 10_000, 100_000):
        for m in (5, 20, 50):
            data = [simulate(n, m, 53_000 + 100 * m + k) for k in range(trials)]
            cells, ts = [], []
            for e in (0.1, 0.3, 1.0, 3.0, 10.0):
                errs = []
                for X, a, _ in data:
                    t0 = time.time()
                    fit = privirt.private_2pl_estimate(X, epsilon=e, delta=DELTA, n_boot=0)
                    ts.append(time.time() - t0)
                    errs.append(rel(fit.a, a))
                cells.append(max(errs))
            base = max(rel(equal_a(a), a) for _, a, _ in data)
            worst = max(worst, max(cells))
            print(f"| {n} | {m} | " + " | ".join(f"{c:.3f}" for c in cells) + f" | {base:.3f} | "
                  f"{np.median(ts):.1f} |", flush=True)
    print(f"largest over the grid: {worst:.3f} (target ≤ 1)", flush=True)


def defaults() -> None:
    """CPU seconds (``time.process_time``: the VM is shared, wall time says little) of the default
    calls, with their intervals, beside the private totals estimator on the same data."""
    print("\ndefault calls (n_boot = 200, δ = 1e-4), CPU seconds, one process, beside "
          "private_totals_estimate on the same data")
    print("| n | m | ε | private_2pl_estimate | private_totals_estimate | fit iterations (point) |")
    print("|---|---|---|---|---|---|")
    import warnings

    for n, m, e in ((400, 30, 0.1), (400, 30, 1.0), (10_000, 20, 1.0), (10_000, 20, 0.1), (10_000, 100, 1.0),
                    (1000, 5, 1.0), (1000, 5, 0.1)):
        X, _, _ = simulate(n, m, 54_000 + m)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.process_time()
            fit = privirt.private_2pl_estimate(X, epsilon=e, delta=DELTA)
            t1 = time.process_time()
            privirt.private_totals_estimate(X, epsilon=e, delta=DELTA)
            t2 = time.process_time()
        print(f"| {n} | {m} | {e:g} | {t1 - t0:.2f} | {t2 - t1:.2f} | {fit.info['iterations']} |", flush=True)


def covered(ci, truth) -> np.ndarray:
    return (ci["lo"].to_numpy() <= truth) & (truth <= ci["hi"].to_numpy())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--parts", default="defaults,sweep,coverage,lsat7,grid,large",
                    help="comma-separated tables: defaults, sweep, coverage, lsat7, grid, large, mcar")
    args = ap.parse_args()
    quick = args.quick
    parts = set(args.parts.split(","))
    t_start = time.time()
    print(f"load average at start: {os.getloadavg()[0]:.1f}, {os.getloadavg()[1]:.1f}, {os.getloadavg()[2]:.1f}")

    if "defaults" in parts:
        defaults()

    # -- (10 000, 20): Gibbs reference, ε sweep, difficulties beside totals --------------------
    trials = 2 if quick else 3
    sweep = (0.1, 0.3, 1.0, 3.0, 10.0)
    rows = {e: [] for e in sweep}
    for k in range(trials if "sweep" in parts else 0):
        X, a, b = simulate(10_000, 20, 50_000 + k)
        t0 = time.time()
        ga, gb = gibbs_mean(X, 1500, 500, k)
        t_gibbs = time.time() - t0
        a0, b0, tau0 = noise_free(X)
        for e in sweep:
            for _ in range(2):  # two releases per data set
                t0 = time.time()
                fit = privirt.private_2pl_estimate(X, epsilon=e, delta=DELTA, n_boot=0)
                t_fit = time.time() - t0
                tau = fit.b.to_numpy() / np.sqrt(1.0 + fit.a.to_numpy() ** 2)
                rows[e].append([rel(fit.a, ga), rel(equal_a(ga), ga), relc(fit.b, gb), relc(fit.b, b0),
                                relc(tau, tau0), totals_rel(X, e), rel(ga, a), t_fit, t_gibbs])
        print(f"  trial {k}: Gibbs {t_gibbs:.0f} s", flush=True)
    if "sweep" in parts:
        print(f"\n(n, m) = (10000, 20): mean over {trials} data sets × 2 releases (relative ℓ2 errors; "
              "b, τ and β centred)")
        print("| ε | a vs Gibbs ā | all a equal vs ā | b vs Gibbs b̄ | b vs noise-free fit | τ vs noise-free fit "
              "| totals β vs CML | Gibbs ā vs true a | s / private call (no bootstrap) |")
        print("|---|---|---|---|---|---|---|---|---|")
        for e in sweep:
            r = np.mean(rows[e], axis=0)
            print(f"| {e:g} | {r[0]:.3f} | {r[1]:.3f} | {r[2]:.3f} | {r[3]:.3f} | {r[4]:.3f} | {r[5]:.3f} | "
                  f"{r[6]:.3f} | {r[7]:.2f} |")
        print(f"Gibbs (1500 iterations, 500 warmup): {np.mean([x[8] for x in rows[1.0]]):.0f} s per data set",
              flush=True)

    if "grid" in parts:
        grid(1 if quick else 3)

    # -- coverage at (10 000, 20), ε ∈ {1, 3} ----------------------------------------------------
    cov_trials = 4 if quick else 10
    if "coverage" not in parts:
        cov_trials = 0
    print(f"\ncoverage of 95 % intervals at (10000, 20), {cov_trials} data sets × 20 items, 200 bootstrap replicates")
    print("| ε | a: covers true a | b: covers true b | s / call |")
    print("|---|---|---|---|")
    for e in (1.0, 3.0) if cov_trials else ():
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
    for e in (1.0, 3.0) if cov_trials and "sweep" in parts else ():  # needs the Gibbs runs
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
    if "lsat7" in parts:
        lsat7()
    if "large" in parts and not quick:
        large()
    if "mcar" in parts:
        mcar(3 if quick else 6, 1 if quick else 2)
    print(f"\ntotal {time.time() - t_start:.0f} s; load average at end: {os.getloadavg()[0]:.1f}, "
          f"{os.getloadavg()[1]:.1f}, {os.getloadavg()[2]:.1f}")


def lsat7() -> None:
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



def noise_free_mcar(Xm):
    """The one-factor fit of the exact MCAR ratios (s/a, D/C; what the private MCAR fit estimates)."""
    from privirt.private.twopl.fit import fit_factor, to_2pno
    from privirt.private.twopl.mcar import mcar_statistics, ratio_inputs

    codes = np.where(np.isnan(Xm), -1, Xm).astype(np.int8)
    s, a, D, C = mcar_statistics(codes)
    f = fit_factor(*ratio_inputs(s, a, D, C, codes.shape[0], (0.0, 0.0, 0.0, 0.0)))
    return to_2pno(f.tau[0], f.lam[0])


def mcar(trials: int, gibbs_trials: int, eps: tuple = (0.3, 1.0, 3.0)) -> None:
    """Declared MCAR at (10 000, 20), 20 % and 50 % of the cells missing (issue 25)."""
    import warnings

    n, m = 10_000, 20
    print(f"\nMCAR (missing=\"mcar\") at (n, m) = ({n}, {m}), cells missing independently; "
          f"{trials} data sets (Gibbs on the observed cells: the first {gibbs_trials}, 1000 iterations, "
          "300 warmup); relative ℓ2 errors, b centred; 95 % intervals with 200 replicates")
    print("| missing | ε | a vs true: MCAR private | complete-data private | MCAR noise-free | b vs true: MCAR "
          "private | complete-data private | MCAR noise-free | a vs Gibbs ā (observed cells) | b vs Gibbs b̄ "
          "| all a equal vs ā | coverage a | coverage b | CPU s / MCAR call | CPU s / complete call |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for frac in (0.2, 0.5):
        rows = {e: [] for e in eps}
        gib = {e: [] for e in eps}
        ha = {e: [] for e in eps}
        hb = {e: [] for e in eps}
        for k in range(trials):
            X, a, b = simulate(n, m, 55_000 + k)
            rng = np.random.default_rng(56_000 + k)
            Xm = X.astype(float)
            Xm[rng.random(X.shape) < frac] = np.nan
            a0, b0 = noise_free_mcar(Xm)
            ga = gb = None
            if k < gibbs_trials:
                ga, gb = gibbs_mean(Xm, 1000, 300, k)
            for e in eps:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t0 = time.process_time()
                    fit = privirt.private_2pl_estimate(Xm, epsilon=e, delta=DELTA, missing="mcar", n_boot=200)
                    t1 = time.process_time()
                    full = privirt.private_2pl_estimate(X, epsilon=e, delta=DELTA, n_boot=200)
                    t2 = time.process_time()
                rows[e].append([rel(fit.a, a), rel(full.a, a), rel(a0, a), relc(fit.b, b), relc(full.b, b),
                                relc(b0, b), t1 - t0, t2 - t1])
                ha[e].append(covered(fit.ci["a"], a))
                hb[e].append(covered(fit.ci["b"], b))
                if ga is not None:
                    gib[e].append([rel(fit.a, ga), relc(fit.b, gb), rel(equal_a(ga), ga)])
        for e in eps:
            r = np.mean(rows[e], axis=0)
            g = np.mean(gib[e], axis=0) if gib[e] else np.full(3, np.nan)
            print(f"| {frac:.0%} | {e:g} | {r[0]:.3f} | {r[1]:.3f} | {r[2]:.3f} | {r[3]:.3f} | {r[4]:.3f} | "
                  f"{r[5]:.3f} | {g[0]:.3f} | {g[1]:.3f} | {g[2]:.3f} | {np.mean(ha[e]):.3f} | "
                  f"{np.mean(hb[e]):.3f} | {r[6]:.2f} | {r[7]:.2f} |", flush=True)


def large() -> None:
    """(100 000, 50, ε = 1) against the Gibbs posterior mean."""
    X, a, b = simulate(100_000, 50, 52_000)
    t0 = time.time()
    ga, gb = gibbs_mean(X, 500, 250, 0)
    t_gibbs = time.time() - t0
    errs = []
    for r in range(3):
        t0 = time.time()
        fit = privirt.private_2pl_estimate(X, epsilon=1.0, delta=DELTA, n_boot=0)
        errs.append([rel(fit.a, ga), relc(fit.b, gb), time.time() - t0])
    e = np.mean(errs, axis=0)
    print(f"\n(100000, 50, ε = 1), one data set, 3 releases: a {e[0]:.3f} (target ≤ 0.10), b (centred) {e[1]:.3f}, "
          f"all a equal {rel(equal_a(ga), ga):.3f}, Gibbs ā vs true a {rel(ga, a):.3f}; "
          f"{e[2]:.1f} s per private call (no bootstrap); Gibbs (500 iterations, 250 warmup) {t_gibbs:.0f} s",
          flush=True)


if __name__ == "__main__":
    main()
