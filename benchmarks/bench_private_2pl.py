"""Accuracy and interval coverage of the private 2PNO estimator (``private_2pl_estimate``)
against the non-private Gibbs posterior mean (``gibbs_2pno``) on the same data.

Data: 2PNO, a ~ LogNormal(0, 0.3), b ~ N(0, 1), θ ~ N(0, 1); δ = 1e-4.  Tables:

* targets: relative ℓ2 error ‖â − ā‖/‖ā‖ of the private a against the Gibbs posterior mean ā
  at (n, m, ε) = (10 000, 20, 1) (target ≤ 0.15) and (100 000, 50, 1) (≤ 0.10); the same for
  b; the "all a equal" baseline (every a = the geometric mean of ā);
* ε sweep at (10 000, 20), 8 data sets × 2 releases: ε ∈ {0.1, 0.3, 1, 3, 10}; difficulties
  beside the private totals estimator at the same ε, each against the non-private fit of its own estimator on the same
  data (centred vectors, relative ℓ2): the totals estimator's Rasch β against CML (a function
  of the same totals), the private b (and τ = b/√(1 + a²)) against the noise-free one-factor
  fit of the same statistics; b against the Gibbs posterior mean too;
* grid ε ∈ {0.1, 0.3, 1, 3, 10} × n ∈ {1000, 10 000, 100 000} × m ∈ {5, 20, 50}: the largest
  relative error of a against the true a over the data sets of a cell, beside all a equal
  (every a = the geometric mean of the true a) — never worse than all a equal (≤ 1);
* coverage of the 95 % intervals (200 bootstrap replicates) of a and b at (10 000, 20),
  ε ∈ {1, 3}, against the true parameters and against the Gibbs posterior mean (target 90–98 %);
* LSAT7 (n = 1000, m = 5) at ε = 1, 3: private a beside the Gibbs posterior mean (no target);
* defaults: CPU seconds of the default call (with its intervals) beside the same call with the
  bootstrap forced (``intervals="bootstrap"``) and the private totals estimator at
  (n, m) = (400, 30), (10 000, 20), (10 000, 100), (1000, 5);
* mcar (``--parts mcar``, not in the default run): (10 000, 20, ε ∈ {0.3, 1, 3}) with 20 % and 50 % of the
  cells missing completely at random (independently), ``missing="mcar"``: relative ℓ2 error of
  a and b (centred) against the truth, beside the complete-data private fit on the same data
  before the cells were removed and the noise-free MCAR fit (the same ratios without noise);
  against the non-private Gibbs posterior mean on the observed cells; coverage of the 95 %
  intervals (200 replicates) against the truth; CPU seconds per call;
* mcar_coverage (``--parts mcar_coverage``, not in the default run): coverage of the MCAR intervals
  at 50 % missing, ε = 0.3, 24 data sets × 2 releases, by the size of the true a;
* mcar_denominators (``--parts mcar_denominators``, not in the default run): the MCAR point
  estimate with the noisy denominators shrunk and as released, paired on the same releases;
* mcar_split (``--parts mcar_split``, not in the default run; ``--split-criterion linearised|ratios``,
  ``--cells``): a candidate MCAR budget split for the shrunk denominators
  (``mcar_split_candidate.py``, not adopted) against the package's, paired on the same data and
  seeds, with equal and unequal item answer rates; and on the same releases the answered counts
  shrunk by the totals estimator's empirical Bayes against the 2PL's James–Stein;
* coverage_paired (``--parts coverage_paired --cells 10000x20x0.3x0.5``): coverage of a and b on
  the same seeded releases for the code variants (denominators shrunk or not, log a's interval
  bias-corrected or not);
* swamped (``--parts swamped``, not in the default run): where the noise swamps the pairs, coverage
  of both interval routes (bootstrap, the fit's Laplace posterior) on the same releases.
* null_pool (``--parts null_pool [--cov-trials 6]``, not in the default run): the noise-variance
  refits pooled over τ from 100 items against each item's own 32 draws, on the same releases.
* many_items (``--parts many_items [--shapes 1000x400x1,… --busy]``, not in the default run): the
  default call at m = 100–1000, one fresh process per shape: CPU and wall seconds, peak resident
  memory, the relative error of a beside all a equal.

    python benchmarks/bench_private_2pl.py            # full run (long: Gibbs on 5 M cells)
    python benchmarks/bench_private_2pl.py --quick    # fewer trials, no (100 000, 50)
    python benchmarks/bench_private_2pl.py --parts sweep,grid   # some tables only
    python benchmarks/bench_private_2pl.py --parts mcar         # declared MCAR (issue 25)
    python benchmarks/bench_private_2pl.py --parts swamped      # both interval routes where the noise swamps
    python benchmarks/bench_private_2pl.py --parts many_items --busy   # m = 100–1000, time and memory
    python benchmarks/bench_private_2pl.py --parts sweep --trials 4 --first 4 --out r.jsonl  # data sets 4-7
    python benchmarks/bench_private_2pl.py --summarise r.jsonl  # tables with SEs over data sets

Seeds: data from 50_000 on, noise unseeded (private), Gibbs seeded.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import privirt  # noqa: E402

DELTA = 1e-4


def item_parameters(m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The design's (a, b): a ~ LogNormal(0, 0.3), b ~ N(0, 1) (the first draws of ``rng``)."""
    return np.exp(rng.normal(0.0, 0.3, m)), rng.normal(0.0, 1.0, m)


def simulate(n: int, m: int, seed: int):
    rng = np.random.default_rng(seed)
    a, b = item_parameters(m, rng)
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


def noise_bound(X, a0, b0, tau0, sigma_totals: float, sigma_pairs: float) -> tuple[float, float, float]:
    """The linearised information bound of the noise-induced relative errors (b centred, a, τ
    centred) of any unbiased post-processing of the release, at the noise-free fit
    (``privirt/private/twopl/bound.py``, ``docs/private_2pl.md``, "Difficulties")."""
    from privirt.private.twopl.bound import relative_noise_bounds

    r = relative_noise_bounds(tau0, a0, X.shape[0], sigma_totals, sigma_pairs)
    return float(r["b"]), float(r["a"]), float(r["tau"])


OUT: Path | None = None


def record(**row) -> None:
    """Append one result row to the JSON-lines file given by ``--out`` (results survive a cut-off)."""
    if OUT is not None:
        with OUT.open("a") as fh:
            fh.write(json.dumps(row) + "\n")


def mean_se(values) -> str:
    v = np.asarray(values, float)
    if v.size < 2:
        return f"{v.mean():.4f}"
    return f"{v.mean():.4f} ± {v.std(ddof=1) / np.sqrt(v.size):.4f}"


def grid(trials: int) -> None:
    """Largest relative error of a against the true a per (ε, n, m) cell."""
    print(f"\ngrid: largest relative ℓ2 error of a against the true a over {trials} data sets per cell "
          "(all a equal: every a = the geometric mean of the true a); s per private call (median)")
    print("| n | m | ε = 0.1 | ε = 0.3 | ε = 1 | ε = 3 | ε = 10 | all a equal | CPU s / call |")
    print("|---|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for n in (1000, 10_000, 100_000):
        for m in (5, 20, 50):
            data = [simulate(n, m, 53_000 + 100 * m + k) for k in range(trials)]
            cells, ts = [], []
            for e in (0.1, 0.3, 1.0, 3.0, 10.0):
                errs = []
                for k, (X, a, _) in enumerate(data):
                    t0 = time.process_time()
                    fit = privirt.private_2pl_estimate(X, epsilon=e, delta=DELTA, n_boot=0)
                    ts.append(time.process_time() - t0)
                    errs.append(rel(fit.a, a))
                    record(part="grid", n=n, m=m, eps=e, k=k, a_true=errs[-1], all_equal=rel(equal_a(a), a),
                           cpu=ts[-1])
                cells.append(max(errs))
            base = max(rel(equal_a(a), a) for _, a, _ in data)
            worst = max(worst, max(cells))
            print(f"| {n} | {m} | " + " | ".join(f"{c:.3f}" for c in cells) + f" | {base:.3f} | "
                  f"{np.median(ts):.1f} |", flush=True)
    print(f"largest over the grid: {worst:.3f} (target ≤ 1)", flush=True)


def defaults() -> None:
    """CPU seconds (``time.process_time``: the VM is shared, wall time says little) of the default
    calls, with their intervals, beside the same call with the bootstrap forced (the previous
    default's route) and the private totals estimator, on the same data, in one process."""
    print("\ndefault calls (n_boot = 200, δ = 1e-4), CPU seconds, one process, beside the same call with "
          "intervals='bootstrap' and private_totals_estimate on the same data")
    print("| n | m | ε | private_2pl_estimate | its intervals (release's share of log-a precision) "
          "| intervals='bootstrap' | private_totals_estimate | fit iterations (point) |")
    print("|---|---|---|---|---|---|---|---|")
    import inspect
    import warnings

    # the code before the `intervals` option (a checkout of an older commit on PYTHONPATH) had
    # the bootstrap only: its default call is then the forced column
    routes = "intervals" in inspect.signature(privirt.private_2pl_estimate).parameters
    with warnings.catch_warnings():  # one-time costs (imports, samplers' tables) out of the first row
        warnings.simplefilter("ignore")
        Xw, _, _ = simulate(300, 5, 1)
        privirt.private_2pl_estimate(Xw, epsilon=1.0, delta=DELTA, n_boot=20)
        privirt.private_totals_estimate(Xw, epsilon=1.0, delta=DELTA, n_boot=20)
    for n, m, e in ((400, 30, 0.1), (400, 30, 1.0), (10_000, 20, 1.0), (10_000, 20, 0.1), (10_000, 100, 1.0),
                    (1000, 5, 1.0), (1000, 5, 0.1)):
        X, _, _ = simulate(n, m, 54_000 + m)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.process_time()
            fit = privirt.private_2pl_estimate(X, epsilon=e, delta=DELTA)
            t1 = time.process_time()
            if routes:
                privirt.private_2pl_estimate(X, epsilon=e, delta=DELTA, intervals="bootstrap")
            t2 = time.process_time()
            privirt.private_totals_estimate(X, epsilon=e, delta=DELTA)
            t3 = time.process_time()
        route = f"{fit.info['intervals']} ({fit.info['data_share_log_a']:.2f})" if routes else "bootstrap (–)"
        forced = f"{t2 - t1:.2f}" if routes else f"{t1 - t0:.2f}"
        print(f"| {n} | {m} | {e:g} | {t1 - t0:.2f} | {route} | {forced} | {t3 - t2:.2f} | {fit.info['iterations']} |",
              flush=True)


def swamped(trials: int) -> None:
    """Where the noise swamps the pairs: coverage of the 95 % intervals of both routes on the same
    releases (``estimate_2pl_from_release(..., intervals="bootstrap" / "laplace")``), the
    release's share of the precision of log a (``auto`` takes the Laplace route below ½) and CPU s."""
    import warnings

    from privirt.private.twopl import estimate_2pl_from_release

    print(f"\nswamped: coverage of the 95 % intervals by route, {trials} data sets per cell (seeds 57 000 on), "
          "one release each; share = the release's share of the precision of log a (median item)")
    print("| n | m | ε | share | route of auto | bootstrap: a | b | log-width a | CPU s | laplace: a | b "
          "| log-width a | CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, m, e in ((400, 30, 0.1), (400, 30, 0.3), (1000, 50, 0.1), (1000, 20, 0.1), (1000, 5, 0.1),
                    (1000, 20, 0.3)):
        rows = []
        for k in range(trials):
            X, a, b = simulate(n, m, 57_000 + k)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rel = privirt.release_2pl(X, epsilon=e, delta=DELTA)
                row = []
                for route in ("bootstrap", "laplace"):
                    t0 = time.process_time()
                    fit = estimate_2pl_from_release(rel, intervals=route)
                    row += [covered(fit.ci["a"], a).mean(), covered(fit.ci["b"], b).mean(),
                            float(np.median(np.log(fit.ci["a"]["hi"] / fit.ci["a"]["lo"]))),
                            time.process_time() - t0]
            rows.append([fit.info["data_share_log_a"]] + row)
            record(part="swamped", n=n, m=m, eps=e, k=k, share=rows[-1][0], boot_a=row[0], boot_b=row[1],
                   lap_a=row[4], lap_b=row[5])
        r = np.mean(rows, axis=0)
        auto = f"laplace in {sum(x[0] < 0.5 for x in rows)}/{len(rows)}"
        print(f"| {n} | {m} | {e:g} | {r[0]:.2f} | {auto} | {r[1]:.3f} | {r[2]:.3f} | {r[3]:.2f} | {r[4]:.2f} "
              f"| {r[5]:.3f} | {r[6]:.3f} | {r[7]:.2f} | {r[8]:.2f} |", flush=True)


#: null_pool's cells (n, m, ε): m ≥ NULL_POOL_FROM, both interval routes' regimes
NULL_POOL_CELLS = ((1000, 100, 1.0), (1000, 200, 0.3), (2000, 300, 1.0), (10_000, 200, 1.0), (1000, 400, 3.0),
                   (5000, 150, 0.3))


def null_pool(trials: int) -> None:
    """The noise-variance refits from NULL_POOL_FROM items: 2 × NULL_REPLICATES_MANY draws with the
    per-item variances pooled over τ (the default) against 2 × NULL_REPLICATES draws each item on
    its own (``NULL_POOL_FROM`` raised past m), on the same releases (fresh seeds 58 000 on):
    relative ℓ2 error of the shrunk a and of the centred b against the true parameters, coverage
    of the Laplace intervals (``intervals="laplace"``: centred at the shrunk estimates, so they
    see the shrinkage), CPU s of the point estimate; paired differences (pooled − own) with
    their SE over data sets."""
    import warnings

    from privirt.private.twopl import estimate as E

    print(f"\nnull_pool: noise-variance refits pooled over τ (2 × {E.NULL_REPLICATES_MANY}) vs each item's own "
          f"(2 × {E.NULL_REPLICATES}), same releases, {trials} data sets per cell (seeds 58 000 on)")
    print("| n | m | ε | rel. error a: own | pooled | Δ (SE) | rel. error b: own | pooled | Δ (SE) "
          "| Laplace cover a: own | pooled | b: own | pooled | CPU s: own | pooled |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    keep = E.NULL_POOL_FROM
    for n, m, e in NULL_POOL_CELLS:
        rows = []
        for k in range(trials):
            X, a, b = simulate(n, m, 58_000 + 97 * k + m)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rl = privirt.release_2pl(X, epsilon=e, delta=DELTA)
                row = []
                for pool_from in (10**9, keep):
                    E.NULL_POOL_FROM = pool_from
                    try:
                        t0 = time.process_time()
                        fit = E.estimate_2pl_from_release(rl, intervals="laplace", n_boot=20, progress=False)
                        cpu = time.process_time() - t0
                    finally:
                        E.NULL_POOL_FROM = keep
                    row += [rel(fit.a.to_numpy(), a), relc(fit.b.to_numpy(), b), covered(fit.ci["a"], a).mean(),
                            covered(fit.ci["b"], b).mean(), cpu]
            rows.append(row)
            record(part="null_pool", n=n, m=m, eps=e, k=k, own=row[:5], pooled=row[5:])
        r = np.array(rows)

        def diff(c):
            d = r[:, 5 + c] - r[:, c]
            return f"{d.mean():+.4f} ({d.std(ddof=1) / np.sqrt(len(d)):.4f})"

        print(f"| {n} | {m} | {e:g} | {r[:, 0].mean():.4f} | {r[:, 5].mean():.4f} | {diff(0)} | {r[:, 1].mean():.4f} "
              f"| {r[:, 6].mean():.4f} | {diff(1)} | {r[:, 2].mean():.3f} | {r[:, 7].mean():.3f} | {r[:, 3].mean():.3f} "
              f"| {r[:, 8].mean():.3f} | {np.median(r[:, 4]):.1f} | {np.median(r[:, 9]):.1f} |", flush=True)


def mcar_coverage(trials: int, frac: float = 0.5, eps: float = 0.3) -> None:
    """Coverage of the MCAR intervals at (10 000, 20), ``frac`` of the cells missing, one ε: two
    releases per data set (the mcar table's data sets and masks), SE over data sets (a data
    set's items share its errors); the z-scores (interval centre − truth)/se of log a by item."""
    import warnings

    n, m = 10_000, 20
    ca, cb, zs, za = [], [], [], []
    for k in range(trials):
        _, Xm, a, b = mcar_data(n, m, frac, 55_000 + k, 56_000 + k)
        per_a, per_b = [], []
        for r in range(2):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = privirt.private_2pl_estimate(Xm, epsilon=eps, delta=DELTA, missing="mcar")
            per_a.append(covered(fit.ci["a"], a).mean())
            per_b.append(covered(fit.ci["b"], b).mean())
            c = 0.5 * np.log(fit.ci["a"]["lo"].to_numpy() * fit.ci["a"]["hi"].to_numpy())
            zs.append((c - np.log(a)) / fit.se["log_a"].to_numpy())
            za.append(np.log(a))
            record(part="mcar_coverage", n=n, m=m, eps=eps, frac=frac, k=k, r=r, cov_a=per_a[-1], cov_b=per_b[-1],
                   route=fit.info["intervals"])
        ca.append(np.mean(per_a))
        cb.append(np.mean(per_b))
    z, la = np.concatenate(zs), np.concatenate(za)
    print(f"\nMCAR coverage at ({n}, {m}), {frac:.0%} missing, ε = {eps:g}: {trials} data sets × 2 releases: "
          f"a {mean_se(ca)}, b {mean_se(cb)}; rms z of log a {np.sqrt(np.mean(z * z)):.2f}, mean z {z.mean():+.2f}")
    for lo, hi in zip(np.quantile(la, [0, 1 / 3, 2 / 3]), np.quantile(la, [1 / 3, 2 / 3, 1])):
        s = (la >= lo) & (la <= hi)
        print(f"  true log a in [{lo:.2f}, {hi:.2f}]: coverage {np.mean(np.abs(z[s]) <= 1.96):.3f}, "
              f"rms z {np.sqrt(np.mean(z[s] ** 2)):.2f}", flush=True)


def mcar_denominators(trials: int) -> None:
    """Paired: the MCAR point estimate with the noisy denominators shrunk
    (``twopl.mcar.SHRINK_DENOMINATORS``, the default) and as released, on the same releases
    (seeded, so not private; post-processing only), at four MCAR cells; relative ℓ2 errors of a
    and of b (centred) against the truth and the noise-free MCAR fit; MSE ratio old/new."""
    import warnings

    from privirt.private.twopl import estimate_2pl_from_release
    from privirt.private.twopl import mcar as mc

    print(f"\nmcar_denominators: {trials} data sets × 2 releases per cell (data seeds 58 000 + k, masks 59 000 + k); "
          "relative ℓ2 error, mean over data sets ± SE; paired")
    print("| n | m | ε | missing | a vs truth: released → shrunk | a vs noise-free | b vs truth | b vs noise-free "
          "| MSE(a) ratio released/shrunk vs noise-free | MSE(b) ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n, m, e, frac in ((2000, 10, 0.3, 0.2), (2000, 20, 1.0, 0.5), (10_000, 20, 1.0, 0.2), (1000, 10, 0.3, 0.3),
                          (10_000, 20, 0.3, 0.5), (2000, 5, 0.3, 0.2)):
        res = []  # per data set: [old a_t, new a_t, old a_nf, new a_nf, old b_t, new b_t, old b_nf, new b_nf, ...]
        for k in range(trials):
            _, Xm, a, b = mcar_data(n, m, frac, 58_000 + k, 59_000 + k)
            a0, b0 = noise_free_mcar(Xm)
            row = []
            for r in range(2):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    rel_ = privirt.release_2pl(Xm, epsilon=e, delta=DELTA, missing="mcar", seed=7_000_000 + 10 * k + r)
                    fits = []
                    for flag in (False, True):
                        mc.SHRINK_DENOMINATORS = flag
                        fits.append(estimate_2pl_from_release(rel_, n_boot=0))
                    mc.SHRINK_DENOMINATORS = True
                row.append([rel(f.a, a) for f in fits] + [rel(f.a, a0) for f in fits]
                           + [relc(f.b, b) for f in fits] + [relc(f.b, b0) for f in fits]
                           + [float(np.sum((f.a.to_numpy() - a0) ** 2)) for f in fits]
                           + [float(np.sum((f.b.to_numpy() - b0) ** 2)) for f in fits])
            res.append(np.mean(row, axis=0))
            record(part="mcar_denominators", n=n, m=m, eps=e, frac=frac, k=k, values=res[-1].tolist())
        R = np.array(res)
        cols = [f"{mean_se(R[:, c])} → {mean_se(R[:, c + 1])}" for c in (0, 2, 4, 6)]
        print(f"| {n} | {m} | {e:g} | {frac:.0%} | " + " | ".join(cols)
              + f" | {R[:, 8].mean() / R[:, 9].mean():.2f} | {R[:, 10].mean() / R[:, 11].mean():.2f} |", flush=True)


def _eb_answered(a, sigma_a, n):
    """The totals estimator's empirical-Bayes shrinkage of the answered counts
    (``totals.marginal_missing.answered_counts``) row by row, in the 2PL's call shape
    (``twopl.mcar.shrink_answered``) once ``n`` is bound."""
    from privirt.private.totals.marginal_missing import answered_counts

    a = np.asarray(a, float)
    flat = a.reshape(-1, a.shape[-1])
    out, var = np.empty_like(flat), np.empty_like(flat)
    for r in range(flat.shape[0]):
        out[r], var[r] = answered_counts(flat[r], n, float(sigma_a) ** 2)
    return out.reshape(a.shape), var.reshape(a.shape)


CELLS_DEFAULT = "10000x20x0.3x0.5"
MCAR_SPLIT_CELLS = ((1000, 10, 0.3, 0.3), (1000, 10, 1.0, 0.3), (2000, 20, 1.0, 0.5), (10_000, 20, 0.3, 0.5),
                    (10_000, 20, 1.0, 0.5), (10_000, 20, 1.0, 0.2))


def mcar_split(trials: int, cells=MCAR_SPLIT_CELLS, n_boot: int = 200, criterion: str = "linearised") -> None:
    """Paired, on the same data sets and seeds: a candidate MCAR split (g, h) priced at what the
    shrinkage of the denominators leaves (``mcar_split_candidate.py``, ``criterion``; §6.2) against
    the package's split (for the denominators as released); and, on each of those releases, the answered counts shrunk by the
    2PL's James–Stein or the totals estimator's empirical Bayes (point estimates only).  Cells
    missing independently, every item at the same rate and at rates spread over 0.2–1.8× the
    mean.  Relative ℓ2 errors of a and of b (centred) against the truth, MSE against the
    noise-free MCAR fit, coverage of the 95 % intervals (``n_boot`` replicates) of the true a, b;
    means over data sets ± SE (a data set's 2 releases averaged first)."""

    from mcar_split_candidate import candidate_scales

    from privirt.private.twopl import estimate_2pl_from_release
    from privirt.private.twopl import mcar as mc

    js = mc.shrink_answered
    print(f"\nmcar_split: {trials} data sets × 2 releases per cell (data seeds 60 000 + k, masks 61 000 + k, "
          "release seeds 8 100 000 + 10k + r, bootstrap 8 200 000 + 10k + r); old = the package's split, new = "
          f"the candidate (criterion {criterion!r}); EB/JS: the answered counts shrunk by the totals' empirical "
          "Bayes over the 2PL's James–Stein, on the old and on the new split's releases; paired")
    print("| n | m | ε | missing | rates | g, h old → new | a vs truth old → new | b vs truth old → new "
          "| MSE(a) old/new (noise-free) | MSE(b) old/new | coverage a old → new | coverage b old → new "
          "| MSE(a) EB/JS (old, new split) | MSE(b) EB/JS |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, m, e, frac in cells:
        for unequal in (False, True):
            shares = {}

            def release_row(k, r, Xm, a, b, a0, b0):
                row = []
                for candidate in (False, True):
                    package_scales = mc.McarPairsGaussian.__dict__["_scales"]
                    if candidate:
                        mc.McarPairsGaussian._scales = candidate_scales(n, criterion)
                    try:
                        rel_ = privirt.release_2pl(Xm, epsilon=e, delta=DELTA, missing="mcar",
                                                   seed=8_100_000 + 10 * k + r)
                    finally:
                        mc.McarPairsGaussian._scales = package_scales
                    shares[candidate] = _shares(rel_)
                    f = estimate_2pl_from_release(rel_, n_boot=n_boot, seed=8_200_000 + 10 * k + r)
                    pts = []
                    for shrinker in (js, functools.partial(_eb_answered, n=rel_.n_persons)):
                        mc.shrink_answered = shrinker
                        try:
                            pts.append(estimate_2pl_from_release(rel_, n_boot=0))
                        finally:
                            mc.shrink_answered = js
                    row += _paired_metrics(f, a, b, a0, b0)
                    row += [float(np.sum((p.a.to_numpy() - a0) ** 2)) for p in pts]
                    row += [float(np.sum((p.b.to_numpy() - b0) ** 2)) for p in pts]
                return row

            R = _paired_mcar_rows(n, m, e, frac, unequal, trials, release_row, {"part": "mcar_split",
                                                                                 "criterion": criterion})
            # columns: per split (old: 0–9, new: 10–19)
            old, new = shares[False], shares[True]
            print(f"| {n} | {m} | {e:g} | {frac:.0%} | {'unequal' if unequal else 'equal'} "
                  f"| {old[0]:.2f}, {old[1]:.2f} → {new[0]:.2f}, {new[1]:.2f} "
                  f"| {mean_se(R[:, 0])} → {mean_se(R[:, 10])} | {mean_se(R[:, 1])} → {mean_se(R[:, 11])} "
                  f"| {ratio_se(R[:, 2], R[:, 12])} | {ratio_se(R[:, 3], R[:, 13])} "
                  f"| {mean_se(R[:, 4])} → {mean_se(R[:, 14])} | {mean_se(R[:, 5])} → {mean_se(R[:, 15])} "
                  f"| {ratio_se(R[:, 7], R[:, 6])}, {ratio_se(R[:, 17], R[:, 16])} "
                  f"| {ratio_se(R[:, 9], R[:, 8])}, {ratio_se(R[:, 19], R[:, 18])} |", flush=True)


def mcar_co_variance(trials: int, cells, n_boot: int = 200, new: str = "given_c") -> None:
    """Paired, on the same releases (the package's split; the data, release and bootstrap seeds
    of :func:`mcar_split`) and bootstrap seeds: the noise variance left in the shrunk co-answered
    counts reported as the package does (``twopl.mcar.shrink_co_answered``) against ``new``:
    c²σ_C² + (1 − c)² Var T (``"given_c"``, ``mcar_split_candidate.shrink_co_answered_given_c``)
    or c²σ_C² + (1 − c)²(Var T + A) (``"given_c_sampling"``, A the sampling spread of C about T;
    ``shrink_co_answered_given_c_sampling``; §6.2).  Relative
    ℓ2 errors against the truth, MSE against the noise-free MCAR fit (ratio old/new ± SE,
    > 1: given c better), coverage of the true a and b by the 95 % intervals."""

    import mcar_split_candidate as cand

    from privirt.private.twopl import estimate_2pl_from_release
    from privirt.private.twopl import mcar as mc

    package = mc.shrink_co_answered
    variant_new = getattr(cand, f"shrink_co_answered_{new}")
    print(f"\nmcar_co_variance: {trials} data sets × 2 releases per cell (data seeds 60 000 + k, masks 61 000 + k, "
          "release seeds 8 100 000 + 10k + r, bootstrap 8 200 000 + 10k + r); old = the package's reported "
          f"variance left, new = {new}; paired")
    print("| n | m | ε | missing | rates | a vs truth old → new | b vs truth old → new | MSE(a) old/new (noise-free) "
          "| MSE(b) old/new | coverage a old → new | coverage b old → new |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n, m, e, frac in cells:
        for unequal in (False, True):

            def release_row(k, r, Xm, a, b, a0, b0):
                row = []
                rel_ = privirt.release_2pl(Xm, epsilon=e, delta=DELTA, missing="mcar", seed=8_100_000 + 10 * k + r)
                for variant in (package, variant_new):
                    mc.shrink_co_answered = variant
                    try:
                        f = estimate_2pl_from_release(rel_, n_boot=n_boot, seed=8_200_000 + 10 * k + r)
                    finally:
                        mc.shrink_co_answered = package
                    row += _paired_metrics(f, a, b, a0, b0)
                return row

            R = _paired_mcar_rows(n, m, e, frac, unequal, trials, release_row, {"part": "mcar_co_variance",
                                                                                 "new": new})
            # columns: old 0–5, new 6–11
            print(f"| {n} | {m} | {e:g} | {frac:.0%} | {'unequal' if unequal else 'equal'} "
                  f"| {mean_se(R[:, 0])} → {mean_se(R[:, 6])} | {mean_se(R[:, 1])} → {mean_se(R[:, 7])} "
                  f"| {ratio_se(R[:, 2], R[:, 8])} | {ratio_se(R[:, 3], R[:, 9])} "
                  f"| {mean_se(R[:, 4])} → {mean_se(R[:, 10])} | {mean_se(R[:, 5])} → {mean_se(R[:, 11])} |",
                  flush=True)


def _paired_mcar_rows(n, m, e, frac, unequal, trials, release_row, tags: dict) -> np.ndarray:
    """The loop :func:`mcar_split` and :func:`mcar_co_variance` share: per data set of
    :func:`_paired_mcar_sets`, the mean over its 2 releases r of ``release_row(k, r, Xm, a, b, a0, b0)``
    (warnings silenced), each recorded with ``tags`` first; (data sets, columns)."""
    import warnings

    res = []
    for k, Xm, a, b, a0, b0 in _paired_mcar_sets(n, m, frac, unequal, trials):
        rows = []
        for r in range(2):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rows.append(release_row(k, r, Xm, a, b, a0, b0))
        res.append(np.mean(rows, axis=0))
        record(**tags, n=n, m=m, eps=e, frac=frac, unequal=unequal, k=k, values=res[-1].tolist())
    return np.array(res)


def _paired_mcar_sets(n, m, frac, unequal, trials):
    """The data sets that :func:`mcar_split` and :func:`mcar_co_variance` pair on: (k, masked
    responses, true a, true b, the noise-free MCAR fit's a and b) for k < ``trials``."""
    for k in range(trials):
        _, Xm, a, b = mcar_data(n, m, frac, 60_000 + k, 61_000 + k, unequal=unequal)
        yield (k, Xm, a, b, *noise_free_mcar(Xm))


def _paired_metrics(f, a, b, a0, b0) -> list:
    """Relative errors of a and (centred) b against the truth, squared errors against the
    noise-free fit, and the coverage of the true a and b by ``f``'s intervals."""
    return [rel(f.a, a), relc(f.b, b), float(np.sum((f.a.to_numpy() - a0) ** 2)),
            float(np.sum((f.b.to_numpy() - b0) ** 2)), covered(f.ci["a"], a).mean(), covered(f.ci["b"], b).mean()]


def _shares(release) -> tuple[float, float]:
    """(g, h) of an MCAR release from its four noise scales (the parts' ρ ∝ L/σ²)."""
    m = release.totals.size
    LD, LC = m * m // 3, m * (m - 1) // 2
    ia, is_ = 1.0 / release.sigma_answered**2, 1.0 / release.sigma_totals**2
    ic, id_ = LC / release.sigma_co_answered**2, LD / release.sigma_pairs**2
    return ia / (ia + is_), ic / (ic + id_)


def ratio_se(x, y) -> str:
    """mean(x)/mean(y) ± its delta-method SE over paired data sets."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    r = x.mean() / y.mean()
    se = np.std(x - r * y, ddof=1) / np.sqrt(x.size) / y.mean() if x.size > 1 else float("nan")
    return f"{r:.3f} ± {se:.3f}"


#: code variants: (denominators shrunk, log a's bootstrap interval bias-corrected)
VARIANTS = {"main": (False, True), "denominators": (True, True), "final": (True, False)}


def _variant(name: str) -> None:
    from privirt.private.twopl import estimate as es
    from privirt.private.twopl import mcar as mc

    mc.SHRINK_DENOMINATORS, es.BIAS_CORRECT_LOG_A = VARIANTS[name]


def coverage_paired(trials: int, cells, variants=("main", "denominators", "final")) -> None:
    """Paired coverage of the 95 % intervals (200 replicates) of the true a and b over the code
    variants of :data:`VARIANTS` (the denominators shrunk or not, log a's interval bias-corrected
    or not) on the same seeded releases and bootstrap seeds: ``cells`` of
    (n, m, ε, missing fraction; 0 = complete data), 2 releases per data set, SE over data sets;
    rms z of log a (centre − truth)/se."""
    import warnings

    from privirt.private.twopl import estimate_2pl_from_release

    print(f"\ncoverage_paired: {trials} data sets × 2 releases (data seeds 55 000 + k, masks 56 000 + k; seeded "
          "releases), the same releases and bootstrap seeds for every variant")
    print("| n | m | ε | missing | variant | coverage a | coverage b | rms z log a | mean z | median width log a "
          "| route |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n, m, e, frac in cells:
        vs = variants if frac else tuple(v for v in variants if v != "denominators")  # same without MCAR
        out = {v: [] for v in vs}
        for k in range(trials):
            X, a, b = simulate(n, m, 55_000 + k)
            Xm = X.astype(float)
            if frac:
                Xm[np.random.default_rng(56_000 + k).random(X.shape) < frac] = np.nan
            for r in range(2):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    rel_ = privirt.release_2pl(Xm, epsilon=e, delta=DELTA, missing="mcar" if frac else "none",
                                               seed=8_000_000 + 10 * k + r)
                    for v in vs:
                        _variant(v)
                        fit = estimate_2pl_from_release(rel_, seed=9_000_000 + 10 * k + r)
                        c = 0.5 * np.log(fit.ci["a"]["lo"].to_numpy() * fit.ci["a"]["hi"].to_numpy())
                        z = (c - np.log(a)) / fit.se["log_a"].to_numpy()
                        # the same se about the unshrunk estimate (no bias correction)
                        zu = (np.log(fit.a_unshrunk.to_numpy()) - np.log(a)) / fit.se["log_a"].to_numpy()
                        zb = (fit.b_unshrunk.to_numpy() - b) / fit.se["b"].to_numpy()
                        row = [covered(fit.ci["a"], a).mean(), covered(fit.ci["b"], b).mean(), float(np.mean(z * z)),
                               float(z.mean()), float(np.median(np.log(fit.ci["a"]["hi"] / fit.ci["a"]["lo"]))),
                               float(np.mean(np.abs(zu) <= 1.96)), float(np.mean(np.abs(zb) <= 1.96)),
                               float(np.mean(zu * zu)), float(np.mean(zb * zb))]
                        out[v].append((k, row, fit.info["intervals"]))
                        record(part="coverage_paired", n=n, m=m, eps=e, frac=frac, k=k, r=r, variant=v, values=row,
                               route=fit.info["intervals"])
                    _variant("final")
        for v in vs:
            per = np.array([np.mean([row for kk, row, _ in out[v] if kk == k], axis=0) for k in range(trials)])
            routes = sorted({rt for _, _, rt in out[v]})
            print(f"| {n} | {m} | {e:g} | {frac:.0%} | {v} | {mean_se(per[:, 0])} | {mean_se(per[:, 1])} "
                  f"| {np.sqrt(per[:, 2].mean()):.2f} | {per[:, 3].mean():+.3f} | {per[:, 4].mean():.3f} "
                  f"| {','.join(routes)} |", flush=True)


def covered(ci, truth) -> np.ndarray:
    return (ci["lo"].to_numpy() <= truth) & (truth <= ci["hi"].to_numpy())


def sweep_part(ks, gibbs_cache: dict) -> None:
    """(10 000, 20): Gibbs reference, ε sweep, difficulties beside the totals estimator, the
    information bound; one row per release (two per data set), printed with SEs over data sets."""
    sweep = (0.1, 0.3, 1.0, 3.0, 10.0)
    rows = {e: {} for e in sweep}
    t_gibbs = []
    for k in ks:
        X, a, b = simulate(10_000, 20, 50_000 + k)
        t0 = time.process_time()
        ga, gb = gibbs_mean(X, 1500, 500, k)
        t_gibbs.append(time.process_time() - t0)
        gibbs_cache[k] = (ga, gb)
        a0, b0, tau0 = noise_free(X)
        for e in sweep:
            for r in range(2):  # two releases per data set
                t0 = time.process_time()
                fit = privirt.private_2pl_estimate(X, epsilon=e, delta=DELTA, n_boot=0)
                t_fit = time.process_time() - t0
                a_hat, b_hat = fit.a.to_numpy(), fit.b.to_numpy()
                tau = b_hat / np.sqrt(1.0 + a_hat**2)
                bb, ba, bt = noise_bound(X, a0, b0, tau0, fit.release.sigma_totals, fit.release.sigma_pairs)
                row = dict(a_gibbs=rel(a_hat, ga), all_equal=rel(equal_a(ga), ga), b_gibbs=relc(b_hat, gb),
                           b_nf=relc(b_hat, b0), tau_nf=relc(tau, tau0), a_nf=rel(a_hat, a0),
                           beta_cml=totals_rel(X, e), gibbs_true=rel(ga, a), bound_b=bb, bound_a=ba, bound_tau=bt,
                           cpu=t_fit)
                rows[e].setdefault(k, []).append(row)
                record(part="sweep", n=10_000, m=20, eps=e, k=k, r=r, cpu_gibbs=t_gibbs[-1], **row)
        print(f"  data set {k}: Gibbs {t_gibbs[-1]:.0f} CPU s", flush=True)
    print(f"\n(n, m) = (10000, 20): {len(ks)} data sets × 2 releases; mean ± SE over data sets (the two "
          "releases of a data set averaged first); relative ℓ2 errors, b, τ and β centred")
    cols = ["a_gibbs", "all_equal", "b_gibbs", "b_nf", "tau_nf", "beta_cml", "bound_b", "a_nf", "bound_a"]
    print("| ε | " + " | ".join(cols) + " | b_nf − beta_cml (paired) | CPU s / call |")
    print("|---" * (len(cols) + 3) + "|")
    for e in sweep:
        per = {c: [np.mean([x[c] for x in v]) for v in rows[e].values()] for c in cols + ["cpu"]}
        diff = np.subtract(per["b_nf"], per["beta_cml"])
        print(f"| {e:g} | " + " | ".join(mean_se(per[c]) for c in cols) + f" | {mean_se(diff)} | "
              f"{np.mean(per['cpu']):.2f} |", flush=True)
    print(f"Gibbs (1500 iterations, 500 warmup): {np.mean(t_gibbs):.0f} CPU s per data set", flush=True)


def coverage_part(ks, gibbs_cache: dict) -> None:
    """Coverage of the 95 % intervals at (10 000, 20), ε ∈ {1, 3}, per data set (SE over data sets:
    the items of one data set share its errors), against the truth and, where the sweep ran on the
    same data sets, against the Gibbs posterior mean."""
    print(f"\ncoverage of 95 % intervals at (10000, 20), {len(ks)} data sets × 20 items, 200 bootstrap replicates")
    print("| ε | a: covers true a | b: covers true b | τ: covers true τ | CPU s / call |")
    print("|---|---|---|---|---|")
    for e in (1.0, 3.0):
        ha, hb, ht, ts = [], [], [], []
        for k in ks:
            X, a, b = simulate(10_000, 20, 51_000 + k)
            t0 = time.process_time()
            fit = privirt.private_2pl_estimate(X, epsilon=e, delta=DELTA, n_boot=200)
            ts.append(time.process_time() - t0)
            ha.append(covered(fit.ci["a"], a).mean())
            hb.append(covered(fit.ci["b"], b).mean())
            ht.append(covered(fit.ci["tau"], b / np.sqrt(1.0 + a * a)).mean())
            record(part="coverage", n=10_000, m=20, eps=e, k=k, cov_a=ha[-1], cov_b=hb[-1], cov_tau=ht[-1],
                   cpu=ts[-1])
        print(f"| {e:g} | {mean_se(ha)} | {mean_se(hb)} | {mean_se(ht)} | {np.median(ts):.1f} |", flush=True)
    for e in (1.0, 3.0) if gibbs_cache else ():
        ha, hb = [], []
        for k, (ga, gb) in gibbs_cache.items():
            X, a, b = simulate(10_000, 20, 50_000 + k)
            fit = privirt.private_2pl_estimate(X, epsilon=e, delta=DELTA, n_boot=200)
            ha.append(covered(fit.ci["a"], ga).mean())
            hb.append(covered(fit.ci["b"], gb).mean())
            record(part="coverage_gibbs", n=10_000, m=20, eps=e, k=k, cov_a=ha[-1], cov_b=hb[-1])
        print(f"ε = {e:g}: intervals cover the Gibbs posterior mean: a {mean_se(ha)}, b {mean_se(hb)} "
              f"({len(ha)} data sets)", flush=True)


def summarise(path: str) -> None:
    """Print the tables, with standard errors over data sets, from a ``--out`` JSON-lines file
    (several processes may have appended to it)."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]

    def by(part):
        return [r for r in rows if r["part"] == part]

    def per_set(rs, col):  # a data set's releases averaged first: SEs over data sets
        ks = sorted({r["k"] for r in rs})
        return [np.mean([r[col] for r in rs if r["k"] == k]) for k in ks]

    sw = by("sweep")
    if sw:
        cols = ["a_gibbs", "all_equal", "b_gibbs", "b_nf", "tau_nf", "beta_cml", "bound_b", "a_nf", "bound_a"]
        print(f"sweep (10000, 20): {len({r['k'] for r in sw})} data sets; mean ± SE over data sets")
        print("| ε | " + " | ".join(cols) + " | b_nf − beta_cml | tau_nf − beta_cml | b_nf / bound_b | CPU s |")
        print("|---" * (len(cols) + 5) + "|")
        for e in sorted({r["eps"] for r in sw}):
            rs = [r for r in sw if r["eps"] == e]
            per = {c: per_set(rs, c) for c in cols + ["cpu"]}
            print(f"| {e:g} | " + " | ".join(mean_se(per[c]) for c in cols)
                  + f" | {mean_se(np.subtract(per['b_nf'], per['beta_cml']))}"
                  + f" | {mean_se(np.subtract(per['tau_nf'], per['beta_cml']))}"
                  + f" | {mean_se(np.divide(per['b_nf'], per['bound_b']))} | {np.mean(per['cpu']):.2f} |")
        print(f"Gibbs: {np.mean(per_set(sw, 'cpu_gibbs')):.0f} CPU s per data set; n = {len(sw)} releases")
    for part in ("coverage", "coverage_gibbs"):
        cv = by(part)
        if cv:
            print(f"\n{part}: mean ± SE over data sets")
            for e in sorted({r["eps"] for r in cv}):
                rs = [r for r in cv if r["eps"] == e]
                cs = [c for c in ("cov_a", "cov_b", "cov_tau") if c in rs[0]]
                print(f"ε = {e:g} ({len(rs)} data sets): "
                      + ", ".join(f"{c} {mean_se([r[c] for r in rs])}" for c in cs)
                      + (f", CPU s {np.median([r['cpu'] for r in rs]):.1f}" if "cpu" in rs[0] else ""))
    gr = by("grid")
    if gr:
        print("\ngrid: relative error of a against the true a: largest over the data sets (mean ± SE); "
              "all a equal (largest)")
        print("| n | m | ε = 0.1 | ε = 0.3 | ε = 1 | ε = 3 | ε = 10 | all a equal | data sets "
              "| CPU s / call (median) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for n, m in sorted({(r["n"], r["m"]) for r in gr}):
            rs = [r for r in gr if (r["n"], r["m"]) == (n, m)]
            cells = []
            for e in (0.1, 0.3, 1.0, 3.0, 10.0):
                v = [r["a_true"] for r in rs if r["eps"] == e]
                cells.append(f"{max(v):.3f} ({mean_se(v)})" if v else "–")
            print(f"| {n} | {m} | " + " | ".join(cells) + f" | {max(r['all_equal'] for r in rs):.3f} | "
                  f"{len({r['k'] for r in rs})} | {np.median([r['cpu'] for r in rs]):.1f} |")
        print(f"largest over the grid: {max(r['a_true'] for r in gr):.3f} (target ≤ 1)")
    lg = by("large")
    if lg:
        print(f"\n(100000, 50, ε = 1): {len({r['k'] for r in lg})} data sets × 2 releases: "
              + ", ".join(f"{c} {mean_se(per_set(lg, c))}" for c in ("a_gibbs", "b_gibbs", "all_equal",
                                                                       "gibbs_true", "a_true", "cpu", "cpu_gibbs")))


#: (1000, 1000, 1) is left out: 24 CPU minutes since session 15 (it did not finish in 43 before; BENCHMARKS.md);
#: name it in --shapes
MANY_ITEMS_SHAPES = "10000x100x1,10000x200x1,10000x500x1,1000x400x1"

_MANY_ITEMS_CHILD = """
import json, resource, sys, time, warnings
sys.path.insert(0, {bench!r})
import numpy as np
import privirt
from bench_private_2pl import simulate, rel, relc, equal_a
n, m, e = {n}, {m}, {e}
X, a, b = simulate(n, m, 56_000 + m)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    privirt.private_2pl_estimate(X[:300, :5], epsilon=1.0, delta={delta}, n_boot=20)  # imports out of the figures
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    t0, w0 = time.process_time(), time.perf_counter()
    fit = privirt.private_2pl_estimate(X, epsilon=e, delta={delta})
    t1, w1 = time.process_time(), time.perf_counter()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(dict(n=n, m=m, eps=e, cpu=t1 - t0, wall=w1 - w0, peak_mb=peak / 1024, call_mb=(peak - base) / 1024,
                      route=fit.info["intervals"], rel_a=rel(fit.a.to_numpy(), a), rel_b=relc(fit.b.to_numpy(), b),
                      equal=rel(equal_a(a), a))))
"""


def many_items(shapes: str, busy: bool, baseline: str | None = None) -> None:
    """The default call (n_boot = 200) at many items, each shape in a fresh process: CPU and wall
    seconds of the call, the process's peak resident memory (and its rise during the call), the
    interval route, the relative error of a (and of the centred b) against the true parameters,
    beside all a equal.  ``busy``: a spinning process on the machine's other core throughout.
    ``baseline``: a checkout of other code (e.g. an earlier commit) run on the same shapes, its
    rows marked "baseline"."""
    from _harness import busy_core, run_in_tree

    with busy_core(busy):
        print(f"\ndefault call at many items (n_boot = 200, δ = {DELTA:g}), one fresh process each"
              f"{'; a spinning process beside it' if busy else ''}")
        print("| n | m | ε | CPU s | wall s | peak RSS (MB) | rise in the call (MB) | intervals | rel. error a "
              "| all a equal | rel. error b (centred) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        here = Path(__file__).resolve().parent
        trees = [("", here.parent)] + ([("baseline ", Path(baseline).resolve())] if baseline else [])
        for cell in shapes.split(","):
            n, m, e = cell.split("x")
            code = _MANY_ITEMS_CHILD.format(bench=str(here), n=int(n), m=int(m), e=float(e), delta=DELTA)
            for tag, tree in trees:  # the child imports privirt from `tree` (its working directory)
                stdout, why = run_in_tree(tree, code)
                if stdout is None:
                    print(f"| {tag}{n} | {m} | {e} | failed: {why} |", flush=True)
                    continue
                r = json.loads(stdout.strip().splitlines()[-1])
                record(part="many_items", code=tag.strip() or "this", **r)
                print(f"| {tag}{r['n']} | {r['m']} | {r['eps']:g} | {r['cpu']:.1f} | {r['wall']:.1f} | {r['peak_mb']:.0f} "
                      f"| {r['call_mb']:.0f} | {r['route']} | {r['rel_a']:.3f} | {r['equal']:.3f} | {r['rel_b']:.3f} |",
                      flush=True)


def main() -> None:
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--parts", default="defaults,sweep,coverage,lsat7,grid,large",
                    help="comma-separated tables: defaults, sweep, coverage, lsat7, grid, large, mcar, "
                    "mcar_coverage, mcar_denominators, mcar_split, mcar_co_variance, swamped, many_items, null_pool, "
                    "coverage_paired")
    ap.add_argument("--shapes", default=MANY_ITEMS_SHAPES, help="many_items: shapes n x m x eps")
    ap.add_argument("--busy", action="store_true", help="many_items: a spinning process on the other core")
    ap.add_argument("--baseline", default=None, metavar="DIR",
                    help="many_items: also run a checkout of other code (e.g. an earlier commit) on the same shapes")
    ap.add_argument("--trials", type=int, default=None, help="data sets of the sweep (default 8; 2 with --quick)")
    ap.add_argument("--first", type=int, default=0, help="first data set of the sweep, coverage and large parts "
                    "(to split a run over processes)")
    ap.add_argument("--cov-trials", type=int, default=None, help="coverage data sets (default 10; 4 with --quick; "
                    "mcar_coverage: 24, 6; swamped: 6, 3; null_pool: 6, 2)")
    ap.add_argument("--grid-trials", type=int, default=None, help="data sets per grid cell (default 3; 1 with --quick)")
    ap.add_argument("--large-trials", type=int, default=None, help="data sets at (100 000, 50) (default 8)")
    ap.add_argument("--cells", default=CELLS_DEFAULT,
                    help="coverage_paired, mcar_split, mcar_co_variance: cells n x m x eps x missing")
    ap.add_argument("--split-criterion", default="linearised", choices=("linearised", "ratios"),
                    help="mcar_split: the candidate split's criterion")
    ap.add_argument("--co-answered-variance", default="reported",
                    choices=("reported", "given_c", "given_c_sampling"),
                    help="mcar_split: the noise variance left in the shrunk co-answered counts as the package "
                    "reports it, or c²σ² + (1 − c)² Var T (mcar_split_candidate.shrink_co_answered_given_c; "
                    "both splits, exploratory)")
    ap.add_argument("--variants", default="main,denominators,final", help="coverage_paired: code variants")
    ap.add_argument("--out", default=None, help="append one JSON line per result to this file")
    ap.add_argument("--summarise", default=None, metavar="FILE",
                    help="print the tables with standard errors from a --out file and exit")
    args = ap.parse_args()
    if args.summarise:
        summarise(args.summarise)
        return
    quick = args.quick
    parts = set(args.parts.split(","))
    known = {"defaults", "sweep", "coverage", "lsat7", "grid", "large", "mcar", "mcar_coverage", "mcar_denominators",
             "mcar_split", "mcar_co_variance", "swamped", "many_items", "null_pool", "coverage_paired"}
    if parts - known:
        ap.error(f"--parts: unknown {', '.join(sorted(parts - known))}; choose from {', '.join(sorted(known))}")
    OUT = Path(args.out) if args.out else None
    t_start = time.time()
    print(f"load average at start: {os.getloadavg()[0]:.1f}, {os.getloadavg()[1]:.1f}, {os.getloadavg()[2]:.1f}")

    if "defaults" in parts:
        defaults()
    gibbs_cache: dict = {}
    if "sweep" in parts:
        trials = args.trials or (2 if quick else 8)
        sweep_part(range(args.first, args.first + trials), gibbs_cache)
    if "grid" in parts:
        grid(args.grid_trials or (1 if quick else 3))
    if "coverage" in parts:
        cov = args.cov_trials or (4 if quick else 10)
        coverage_part(range(args.first, args.first + cov), dict(list(gibbs_cache.items())[:2]))
    if "lsat7" in parts:
        lsat7()
    if "large" in parts and not quick:
        large(range(args.first, args.first + (args.large_trials or 8)))
    if "mcar" in parts:
        mcar(3 if quick else 6, 1 if quick else 2)
    if "mcar_coverage" in parts:
        mcar_coverage(args.cov_trials or (6 if quick else 24))
    if "coverage_paired" in parts:
        cells = [tuple(float(x) if "." in x else int(x) for x in c.split("x")) for c in args.cells.split(",")]
        coverage_paired(args.cov_trials or (6 if quick else 24), cells, tuple(args.variants.split(",")))
    if "mcar_denominators" in parts:
        mcar_denominators(args.cov_trials or (3 if quick else 8))
    if "mcar_split" in parts and args.co_answered_variance == "given_c":
        from mcar_split_candidate import shrink_co_answered_given_c

        from privirt.private.twopl import mcar as mc

        mc.shrink_co_answered = shrink_co_answered_given_c
    if "mcar_split" in parts:
        cells = MCAR_SPLIT_CELLS if args.cells == CELLS_DEFAULT else [
            tuple(float(x) if "." in x else int(x) for x in c.split("x")) for c in args.cells.split(",")]
        mcar_split(args.cov_trials or (2 if quick else 16), cells, criterion=args.split_criterion)
    if "mcar_co_variance" in parts:
        cells = [tuple(float(x) if "." in x else int(x) for x in c.split("x")) for c in args.cells.split(",")]
        new = "given_c" if args.co_answered_variance == "reported" else args.co_answered_variance
        mcar_co_variance(args.cov_trials or (2 if quick else 16), cells, new=new)
    if "swamped" in parts:
        swamped(args.cov_trials or (3 if quick else 6))
    if "many_items" in parts:
        many_items(args.shapes, args.busy, args.baseline)
    if "null_pool" in parts:
        null_pool(args.cov_trials or (2 if quick else 6))
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



def mcar_data(n, m, frac, seed, mask_seed, unequal: bool = False):
    """(X, Xm, a, b): a 2PNO data set (:func:`simulate`) and the same with a share ``frac`` of its
    cells missing completely at random (NaN), independently; ``unequal``: item i's missing rate
    ``frac`` × U(0.2, 1.8) (drawn from the mask's seed) instead of ``frac`` for every item."""
    X, a, b = simulate(n, m, seed)
    Xm = X.astype(float)
    rng = np.random.default_rng(mask_seed)
    rate = frac * rng.uniform(0.2, 1.8, m) if unequal else np.full(m, frac)
    Xm[rng.random(X.shape) < rate] = np.nan
    return X, Xm, a, b


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
            X, Xm, a, b = mcar_data(n, m, frac, 55_000 + k, 56_000 + k)
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


def large(ks) -> None:
    """(100 000, 50, ε = 1) against the Gibbs posterior mean, one data set per k, 2 releases each."""
    errs = []
    for k in ks:
        X, a, b = simulate(100_000, 50, 52_000 + k)
        t0 = time.process_time()
        ga, gb = gibbs_mean(X, 500, 250, k)
        t_gibbs = time.process_time() - t0
        for r in range(2):
            t0 = time.process_time()
            fit = privirt.private_2pl_estimate(X, epsilon=1.0, delta=DELTA, n_boot=0)
            row = dict(a_gibbs=rel(fit.a, ga), b_gibbs=relc(fit.b, gb), all_equal=rel(equal_a(ga), ga),
                       gibbs_true=rel(ga, a), a_true=rel(fit.a, a), cpu=time.process_time() - t0)
            errs.append(row)
            record(part="large", n=100_000, m=50, eps=1.0, k=k, r=r, cpu_gibbs=t_gibbs, **row)
        print(f"  (100000, 50) data set {k}: Gibbs {t_gibbs:.0f} CPU s", flush=True)
    print(f"\n(100000, 50, ε = 1), {len(ks)} data sets × 2 releases: "
          + ", ".join(f"{c} {mean_se([x[c] for x in errs])}" for c in ("a_gibbs", "b_gibbs", "all_equal",
                                                                         "gibbs_true", "a_true", "cpu")),
          flush=True)


if __name__ == "__main__":
    main()
