"""Accuracy and interval coverage of the private-totals estimator against Algorithm 2.

Prints tables (mean over trials, same data and δ = 1e-4 for both estimators):

* target cells: relative ℓ2 error ‖β̂ − β‖/‖β‖ (centred vectors) of ``private_totals_estimate``
  and of ``private_spectral_estimate`` (dense discrete Gaussian), and the MSE ratio
  Alg. 2 / totals (> 1: totals better);
* non-normal abilities (bimodal, skewed) and the LSAT6/LSAT7 data (truth: the non-private CML
  estimate on the full data);
* the paper's grid (n ∈ {200, 1000}, m ∈ {10, 50, 100}, 13 ε from 0.01 to 10): worst mean
  relative error of the totals estimator per (n, m);
* coverage of the nominal 95% intervals at n = 2000, m = 20, ε ∈ {0.3, 1, 3}, and at
  n = 10 000, m = 50, ε = 10 with normal, bimodal and skewed abilities (``coverage_large``:
  where free ability weights replace the mixture);
* speed: seconds per ``private_totals_estimate`` call (200 bootstrap replicates) at n = 2000,
  m = 20, beside ``private_spectral_estimate`` on the same data (best and median of 5);
* ``shapes_grid`` (issue 26): non-normal abilities (:data:`GRID_SHAPES`: bimodal at three
  separations, skewed, uniform, a point mass plus a normal) × m ∈ {5, 10, 20} ×
  n ∈ {200, 500, 1000, 5000} × ε ∈ {0.3, 1, 3}, fresh seeds (30 000 on): per cell the MSE
  ratio Alg. 2 / totals, the same for the default method (``private.choose``), and the
  coverage of the totals estimator's 95% intervals (real intervals, 200 bootstrap replicates,
  the point estimate of the same call is the one scored). ``--grid-trials`` data sets per
  cell, ``--jobs`` worker processes, ``--grid-shapes``/``--grid-m``/``--grid-n``/``--grid-eps``
  or ``--grid-cells shape:m:n:eps,...`` to run a part, ``--grid-seed`` the first seed,
  ``--grid-out`` a JSON-lines file each cell is appended to when done (per-data-set errors,
  coverage and width).  Each ratio comes with its delta-method standard error over the data
  sets, each coverage with its SE over the data sets (the items of one data set share its
  scale error) and the half-width of the binomial 95% band; a cell counts as missing a target
  only when ±2 SE excludes it (:func:`coverage_outside`). ``--design-nodes K`` runs the grid with
  the design's predicted error averaged over the prior on log τ (``docs/totals.md`` §4.2; 0: at τ = 1);
  ``--noisy-scores-ratio X`` with ``marginal.NOISY_SCORES_RATIO = X`` (§4.1; ``inf``: short tests never merge scores).

    python benchmarks/bench_private_totals.py            # full run
    python benchmarks/bench_private_totals.py --quick    # fewer trials
    python benchmarks/bench_private_totals.py --tune     # the tuning seeds (not reported)
    python benchmarks/bench_private_totals.py --only shapes_grid --grid-trials 12 --jobs 2
    python benchmarks/bench_private_totals.py --only shapes_grid --grid-trials 32 --grid-boot 0 \
        --grid-shapes bimodal1,bimodal1.5,bimodal2.5,skewed,uniform,pointmass,normal --grid-out ratios.jsonl

Seeds: reported runs use seeds from 20_000 on (10_000 on were used once to diagnose a cell); ``--tune`` uses seeds from 0 (the ones the
constants were tuned on).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import privirt  # noqa: E402
from privirt.private.totals.api import estimate_from_release, private_totals_estimate, release_totals  # noqa: E402

DELTA = 1e-4
TARGETS = [  # (n, m, ε, target MSE ratio Alg.2/totals)
    (1000, 50, 1.0, 2.5), (1000, 100, 1.0, 2.5), (10000, 100, 0.1, 2.5),
    (1000, 50, 0.3, 1.5), (1000, 100, 0.3, 1.5),
    (1000, 10, 0.1, 1 / 1.1), (1000, 10, 1.0, 1 / 1.1), (200, 10, 0.3, 1 / 1.1),
]


def centred(b):
    b = np.asarray(b, dtype=float)
    return b - b.mean()


def simulate(n, m, abilities, rng):
    beta = rng.standard_normal(m)
    beta -= beta.mean()
    if abilities == "normal":
        theta = rng.standard_normal(n)
    elif abilities == "bimodal":
        theta = np.where(rng.random(n) < 0.5, -1.5, 1.5) + 0.5 * rng.standard_normal(n)
    elif abilities == "skewed":
        g = rng.gamma(2.0, 1.0, n)
        theta = (g - 2.0) / np.sqrt(2.0)
    else:
        raise ValueError(abilities)
    X = (rng.random((n, m)) < 1.0 / (1.0 + np.exp(beta[None, :] - theta[:, None]))).astype(np.int8)
    return X, beta


#: the issue-26 grid's ability shapes (name: description); see :func:`grid_abilities`
GRID_SHAPES = {
    "bimodal1": "±1 + N(0, 0.5²)", "bimodal1.5": "±1.5 + N(0, 0.5²)", "bimodal2.5": "±2.5 + N(0, 0.5²)",
    "skewed": "standardised Gamma(2)", "uniform": "U(−2, 2)", "pointmass": "30% at −2, else N(0.5, 1)",
}


def grid_abilities(shape, n, rng):
    """Abilities of one of :data:`GRID_SHAPES` (and ``normal``)."""
    if shape == "normal":
        return rng.standard_normal(n)
    if shape.startswith("bimodal"):
        sep = float(shape[len("bimodal"):])
        return np.where(rng.random(n) < 0.5, -sep, sep) + 0.5 * rng.standard_normal(n)
    if shape == "skewed":
        return (rng.gamma(2.0, 1.0, n) - 2.0) / np.sqrt(2.0)
    if shape == "uniform":
        return rng.uniform(-2.0, 2.0, n)
    if shape == "pointmass":
        return np.where(rng.random(n) < 0.3, -2.0, 0.5 + rng.standard_normal(n))
    raise ValueError(shape)


#: the package's TEMPER_MAX, kept before ``--model-draws posterior`` sets it to 1
_PACKAGE_TEMPER: float | None = None


def grid_cell(args):
    """One cell of the shapes grid: per data set the squared errors of the totals estimator, of
    Algorithm 2 as published (``estimator="spectral"``) and of the default call
    (``private.choose``; where that is Algorithm 2, its default estimator ``"auto"``), then the
    coverage and mean width of the totals estimator's intervals and of the default's, and the
    totals fit's histogram share φ (``info["histogram_share"]``)."""
    shape, n, m, eps, trials, seed0, n_boot, draws, nodes, noisy = args
    from privirt.private.choose import default_private_method
    from privirt.private.totals import intervals, marginal
    if (marginal.DESIGN_PRIOR_NODES, marginal.NOISY_SCORES_RATIO) != (nodes, noisy):
        from privirt.private import measurements
        measurements._calibrated_totals.cache_clear()  # its layouts were designed under the old rule
    marginal.DESIGN_PRIOR_NODES = nodes  # the design criterion (docs/totals.md §4.2)
    marginal.NOISY_SCORES_RATIO = noisy  # when short tests merge scores (docs/totals.md §4.1)
    global _PACKAGE_TEMPER
    if _PACKAGE_TEMPER is None:
        _PACKAGE_TEMPER = intervals.TEMPER_MAX
    intervals.MODEL_DRAWS = draws != "mode"
    intervals.TEMPER_MAX = _PACKAGE_TEMPER if draws == "tempered" else 1.0  # 1: the untempered posterior
    default = default_private_method(n, m, eps, DELTA)
    out = []
    for k in range(trials):
        rng = np.random.default_rng([seed0, 26, n, m, int(eps * 1000), k, sum(shape.encode())])
        beta = rng.standard_normal(m)
        beta -= beta.mean()
        theta = grid_abilities(shape, n, rng)
        X = (rng.random((n, m)) < 1.0 / (1.0 + np.exp(beta[None, :] - theta[:, None]))).astype(np.int8)
        rel = release_totals(X, epsilon=eps, delta=DELTA, seed=seed0 + k)
        fit = estimate_from_release(rel, n_boot=n_boot, seed=seed0 + k)
        alg2 = privirt.private_spectral_estimate(X, epsilon=eps, delta=DELTA, seed=seed0 + k, n_boot=0,
                                                 estimator="spectral").beta.to_numpy()
        e_t, e_a = centred(fit.beta.to_numpy()) - beta, centred(alg2) - beta
        se_t, se_a = float(e_t @ e_t), float(e_a @ e_a)
        if default == "totals":
            dfit, se_d = fit, se_t
        else:  # what the default call gives: Algorithm 2's release with its default estimator ("auto")
            dfit = privirt.private_spectral_estimate(X, epsilon=eps, delta=DELTA, seed=seed0 + k, n_boot=n_boot)
            e_d = centred(dfit.beta.to_numpy()) - beta
            se_d = float(e_d @ e_d)
        row = [se_t, se_a, se_d]
        for f in (fit, dfit):
            lo, hi = f.ci["lo"].to_numpy(), f.ci["hi"].to_numpy()
            row += [float(np.mean((lo <= beta) & (beta <= hi))) if n_boot else np.nan,
                    float(np.mean(hi - lo)) if n_boot else np.nan]
        out.append(row + [float(fit.info["histogram_share"])])  # φ (docs/totals.md §5.4)
    return (shape, n, m, eps), np.array(out)


def ratio_se(a, t):
    """MSE ratio mean(a)/mean(t) of paired per-data-set squared errors and its delta-method SE."""
    a, t = np.asarray(a, dtype=float), np.asarray(t, dtype=float)
    r = a.mean() / t.mean()
    se = np.std(a - r * t, ddof=1) / np.sqrt(len(a)) / t.mean() if len(a) > 1 else np.nan
    return float(r), float(se)


def coverage_se(c, m):
    """Mean coverage over data sets, its SE from the data sets' spread (the items of a data set
    share its errors) and the half-width of the binomial 95% band at 0.95 for len(c)·m items."""
    c = np.asarray(c, dtype=float)
    se = np.std(c, ddof=1) / np.sqrt(len(c)) if len(c) > 1 else np.nan
    return float(c.mean()), float(se), float(1.96 * np.sqrt(0.95 * 0.05 / (len(c) * m)))


def coverage_outside(cov, se, trials, m, lo=0.90, hi=0.98):
    """True when cov ± 2 SE excludes [lo, hi]; the SE is at least the binomial one of trials·m
    independent items at the nearer end of the range (6 data sets that all cover have SE 0)."""
    p0 = lo if cov < lo else hi
    s = max(se if np.isfinite(se) else 0.0, np.sqrt(p0 * (1 - p0) / (trials * m)))
    return cov + 2 * s < lo or cov - 2 * s > hi


def grid_jobs(args, seed0):
    """(shape, n, m, ε, trials, seed, n_boot, model draws, design nodes, noisy-scores ratio) per cell of the shapes grid (``--grid-cells``: only those)."""
    if args.grid_cells:
        cells = []
        for c in args.grid_cells.split(","):
            sh, m, n, e = c.split(":")
            cells.append((sh, int(n), int(m), float(e)))
    else:
        cells = [(sh, int(n), int(m), float(e)) for sh in args.grid_shapes.split(",")
                 for m in args.grid_m.split(",") for n in args.grid_n.split(",") for e in args.grid_eps.split(",")]
    base = args.grid_seed if args.grid_seed is not None else seed0 + 10_000
    from privirt.private.totals import marginal

    nodes = getattr(args, "design_nodes", None)
    nodes = marginal.DESIGN_PRIOR_NODES if nodes is None else nodes
    noisy = getattr(args, "noisy_scores_ratio", None)
    noisy = marginal.NOISY_SCORES_RATIO if noisy is None else noisy
    return [(sh, n, m, e, args.grid_trials, base, args.grid_boot, getattr(args, "model_draws", "tempered"), nodes,
             float(noisy)) for sh, n, m, e in cells]


def run_shapes_grid(args, seed0):
    """The issue-26 grid (see the module docstring); prints a table and the summary by region.

    Each cell is printed (and, with ``--grid-out``, appended to that JSON-lines file with the
    per-data-set errors) as soon as it is done, so that a stopped run leaves a partial table.
    """
    jobs = grid_jobs(args, seed0)
    print(f"\n## shapes grid (issue 26): {args.grid_trials} data sets per cell, {args.grid_boot} bootstrap, "
          f"delta={DELTA:g}, {args.jobs} processes, seed {jobs[0][5] if jobs else None}")
    print(f"{'shape':>10} {'m':>3} {'n':>5} {'eps':>4} | {'rel tot':>7} {'rel alg2':>8} | {'ratio':>5} {'±SE':>5} "
          f"{'default':>7} {'±SE':>5} | {'coverage':>8} {'±SE':>5} {'band':>5} {'width':>6} | {'default':>7} {'±SE':>5}")
    rows = []
    ex = ProcessPoolExecutor(args.jobs) if args.jobs > 1 else None
    results = ex.map(grid_cell, jobs) if ex else map(grid_cell, jobs)
    for (shape, n, m, eps), r in results:
        ratio, rse = ratio_se(r[:, 1], r[:, 0])
        dratio, dse = ratio_se(r[:, 1], r[:, 2])
        cov, cse, band = coverage_se(r[:, 3], m) if args.grid_boot else (np.nan, np.nan, np.nan)
        dcov, dcse, _ = coverage_se(r[:, 5], m) if args.grid_boot else (np.nan, np.nan, np.nan)
        rows.append((shape, n, m, eps, ratio, dratio, cov, rse, dse, cse, dcov, dcse))
        # relative errors: ‖β̂ − β‖/‖β‖ with the data set's own ‖β‖² ≈ m
        print(f"{shape:>10} {m:>3} {n:>5} {eps:>4g} | {np.sqrt(r[:, 0].mean() / m):>7.3f} "
              f"{np.sqrt(r[:, 1].mean() / m):>8.3f} | {ratio:>5.2f} {rse:>5.2f} {dratio:>7.2f} {dse:>5.2f} | "
              f"{cov:>8.3f} {cse:>5.3f} {band:>5.3f} {np.mean(r[:, 4]) if args.grid_boot else np.nan:>6.3f} | "
              f"{dcov:>7.3f} {dcse:>5.3f}", flush=True)
        if args.grid_out:
            import json
            with open(args.grid_out, "a") as fh:
                fh.write(json.dumps({"shape": shape, "n": n, "m": m, "eps": eps, "seed": jobs[0][5],
                                     "n_boot": args.grid_boot, "model_draws": getattr(args, "model_draws", "tempered"),
                                     "design_nodes": jobs[0][8],
                                     "noisy_scores_ratio": str(jobs[0][9]),
                                     "rows": r.tolist()}) + "\n")
    if ex:
        ex.shutdown()
    print("\nsummary (MSE ratio Alg. 2 / totals; target >= 1.0 where m >= 10 and n >= 1000, >= 0.9 elsewhere; "
          "coverage 0.90-0.98; a cell misses only if ratio + 2 SE is below the target)")
    for name, sel in (("m>=10, n>=1000", lambda r: r[2] >= 10 and r[1] >= 1000),
                      ("elsewhere", lambda r: not (r[2] >= 10 and r[1] >= 1000))):
        part = [r for r in rows if sel(r)]
        if not part:
            continue
        need = 1.0 if name.startswith("m>=") else 0.9
        worst = min(part, key=lambda r: r[4])
        worst_d = min(part, key=lambda r: r[5])
        miss = [r for r in part if r[4] + 2 * r[7] < need]
        miss_d = [r for r in part if r[5] + 2 * r[8] < need]
        print(f"{name:>15}: {len(part)} cells; min ratio totals {worst[4]:.2f}±{worst[7]:.2f} at {worst[:4]}; "
              f"default {worst_d[5]:.2f}±{worst_d[8]:.2f} at {worst_d[:4]}; clearly below {need}: totals {len(miss)} "
              + " ".join(f"{r[:4]}={r[4]:.2f}" for r in miss) + f"; default {len(miss_d)} "
              + " ".join(f"{r[:4]}={r[5]:.2f}" for r in miss_d))
    for name, j, k in (("totals", 6, 9), ("default", 10, 11)):
        covs = [r for r in rows if np.isfinite(r[j])]
        if covs:
            out = [r for r in covs if coverage_outside(r[j], r[k], args.grid_trials, r[2])]
            print(f"coverage ({name}) range {min(r[j] for r in covs):.3f}-{max(r[j] for r in covs):.3f}; "
                  f"point estimate outside 0.90-0.98: {sum(not 0.90 <= r[j] <= 0.98 for r in covs)}; "
                  f"clearly outside (±2 SE excludes the range): {len(out)} "
                  + " ".join(f"{r[:4]}={r[j]:.3f}" for r in out))


def one_pair(X, beta, eps, seed):
    t = release_totals(X, epsilon=eps, delta=DELTA, seed=seed)
    tot = estimate_from_release(t, n_boot=0).beta.to_numpy()
    alg2 = privirt.private_spectral_estimate(X, epsilon=eps, delta=DELTA, seed=seed, n_boot=0, estimator="spectral").beta.to_numpy()
    b = centred(beta)
    e_t, e_a = centred(tot) - b, centred(alg2) - b
    nb = np.linalg.norm(b)
    return np.linalg.norm(e_t) / nb, np.linalg.norm(e_a) / nb, e_t @ e_t, e_a @ e_a


def cell(n, m, eps, trials, seed0, abilities="normal"):
    rows = []
    for k in range(trials):
        rng = np.random.default_rng([seed0, n, m, int(eps * 1000), k])
        X, beta = simulate(n, m, abilities, rng)
        rows.append(one_pair(X, beta, eps, seed=seed0 + k))
    r = np.array(rows)
    return r[:, 0].mean(), r[:, 1].mean(), r[:, 3].mean() / r[:, 2].mean()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer trials")
    ap.add_argument("--tune", action="store_true", help="use the tuning seeds")
    ap.add_argument("--only", default="targets,shapes,lsat,grid,coverage,coverage_large,speed")
    ap.add_argument("--grid-trials", type=int, default=None, help="shapes grid: data sets per cell (default 16, --quick 6)")
    ap.add_argument("--grid-boot", type=int, default=200, help="shapes grid: bootstrap replicates (0: no coverage)")
    ap.add_argument("--grid-shapes", default=",".join(GRID_SHAPES))
    ap.add_argument("--grid-m", default="5,10,20")
    ap.add_argument("--grid-n", default="200,500,1000,5000")
    ap.add_argument("--grid-eps", default="0.3,1,3")
    ap.add_argument("--grid-cells", default=None, help="shapes grid: only these cells, shape:m:n:eps,...")
    ap.add_argument("--grid-seed", type=int, default=None, help="shapes grid: first seed (default 30 000)")
    ap.add_argument("--grid-out", default=None, help="shapes grid: append each cell (JSON lines) to this file")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes for the shapes grid")
    ap.add_argument("--model-draws", choices=("tempered", "posterior", "mode"), default="tempered",
                    help="shapes grid: the bootstrap replicates' ability models (docs/totals.md §5.4): drawn from "
                         "the tempered posterior (default), the posterior (session 10), or all at the mode")
    ap.add_argument("--design-nodes", type=int, default=None,
                    help="shapes grid: the design's predicted error at τ = 1 only (0) or averaged over the prior on "
                         "log τ by this many Gauss-Hermite nodes (docs/totals.md §4.2; default: the package's)")
    ap.add_argument("--noisy-scores-ratio", type=float, default=None,
                    help="shapes grid: tests of at most FULL_SCORES_UP_TO items merge scores when the full score "
                         "distribution's noise SD exceeds this multiple of its mean count per score (docs/totals.md "
                         "§4.1; inf: never merge; default: the package's)")
    args = ap.parse_args()
    if args.grid_trials is None:
        args.grid_trials = 6 if args.quick else 16
    seed0 = 0 if args.tune else 20_000
    trials = 4 if args.quick else 8
    only = set(args.only.split(","))
    known = {"targets", "shapes", "lsat", "grid", "coverage", "coverage_large", "shapes_grid", "speed"}
    if only - known:
        ap.error(f"--only: unknown {', '.join(sorted(only - known))}; choose from {', '.join(sorted(known))}")
    t0 = time.time()

    if "targets" in only:
        print(f"## target cells (normal abilities, {trials} trials, {5 * trials} at m=10, delta={DELTA:g})")
        print(f"{'n':>6} {'m':>4} {'eps':>5} | {'rel totals':>10} {'rel alg2':>9} | {'MSE ratio':>9} {'target':>7} ok")
        for n, m, eps, target in TARGETS:
            # the m = 10 cells are cheap and their ratio is noisy: 5x the trials
            rt, ra, ratio = cell(n, m, eps, trials * (5 if m <= 10 else 1), seed0)
            print(f"{n:>6} {m:>4} {eps:>5g} | {rt:>10.3f} {ra:>9.3f} | {ratio:>9.2f} {target:>7.2f} {'yes' if ratio >= target else 'NO'}")

    if "shapes" in only:
        print(f"\n## non-normal abilities ({trials} trials)")
        print(f"{'abilities':>9} {'n':>6} {'m':>4} {'eps':>5} | {'rel totals':>10} {'rel alg2':>9} | {'MSE ratio':>9}")
        for ab in ("bimodal", "skewed"):
            for n, m, eps in ((1000, 50, 1.0), (1000, 100, 0.3), (1000, 10, 1.0), (10000, 50, 10.0)):
                rt, ra, ratio = cell(n, m, eps, trials, seed0, ab)
                print(f"{ab:>9} {n:>6} {m:>4} {eps:>5g} | {rt:>10.3f} {ra:>9.3f} | {ratio:>9.2f}")

    if "lsat" in only:
        print(f"\n## LSAT data (truth: non-private CML on all rows; {2 * trials} noise draws)")
        print(f"{'data':>6} {'eps':>5} | {'rel totals':>10} {'rel alg2':>9} | {'MSE ratio':>9}")
        for name in ("lsat6", "lsat7"):
            X = privirt.load_dataset(name)
            ref = privirt.cmle_estimate(X).beta.to_numpy()
            for eps in (0.3, 1.0, 3.0, 10.0):
                r = np.array([one_pair(X, ref, eps, seed=seed0 + k) for k in range(2 * trials)])
                print(f"{name:>6} {eps:>5g} | {r[:, 0].mean():>10.3f} {r[:, 1].mean():>9.3f} | {r[:, 3].mean() / r[:, 2].mean():>9.2f}")

    if "grid" in only:
        eps_grid = np.geomspace(0.01, 10.0, 13)
        gt = max(2, trials // 2)
        print(f"\n## paper grid ({gt} trials per cell): mean relative error of totals (alg2) per epsilon")
        worst, where = 0.0, (0, 0, 0.0)
        for n in (200, 1000):
            for m in (10, 50, 100):
                vals = [cell(n, m, float(e), gt, seed0) for e in eps_grid]
                for e, v in zip(eps_grid, vals):
                    if v[0] > worst:
                        worst, where = v[0], (n, m, float(e))
                print(f"n={n:>4} m={m:>3}: " + " ".join(f"{v[0]:.2f}({v[1]:.2f})" for v in vals))
        print("eps: " + " ".join(f"{e:.3g}" for e in eps_grid))
        print(f"worst mean relative error of totals over the grid: {worst:.4f} at (n, m, eps) = "
              f"({where[0]}, {where[1]}, {where[2]:.3g}) (target <= 1.0)")

    if "coverage" in only:
        ct = 12 if args.quick else 30
        print(f"\n## coverage of nominal 95% intervals, n=2000, m=20 ({ct} data sets x 20 items, 200 bootstrap)")
        for eps in (0.3, 1.0, 3.0):
            hits, widths = [], []
            for k in range(ct):
                X, beta, _ = (lambda r: (r[0], centred(r[2]), None))(privirt.simulate_rasch(2000, 20, seed=seed0 + 7 * k + 1))
                fit = private_totals_estimate(X, epsilon=eps, delta=DELTA, seed=seed0 + k)
                hits.append((fit.ci["lo"].to_numpy() <= beta) & (beta <= fit.ci["hi"].to_numpy()))
                widths.append((fit.ci["hi"] - fit.ci["lo"]).mean())
            cov = np.mean(hits)
            print(f"eps={eps:>4g}: coverage {cov:.3f} (target 0.90-0.98) mean width {np.mean(widths):.3f} "
                  f"{'ok' if 0.90 <= cov <= 0.98 else 'MISSED'}")
    if "coverage_large" in only:
        ct = 4 if args.quick else 12
        print(f"\n## coverage at n=10000, m=50, eps=10 ({ct} data sets x 50 items, 200 bootstrap)")
        for ab in ("normal", "bimodal", "skewed"):
            hits, widths, free = [], [], []
            for k in range(ct):
                X, beta = simulate(10000, 50, ab, np.random.default_rng([seed0, 10000, 50, 7, k]))
                fit = private_totals_estimate(X, epsilon=10.0, delta=DELTA, seed=seed0 + k)
                b = centred(beta)
                hits.append((fit.ci["lo"].to_numpy() <= b) & (b <= fit.ci["hi"].to_numpy()))
                widths.append((fit.ci["hi"] - fit.ci["lo"]).mean())
                free.append(fit.info["free_ability_weights"])
            print(f"{ab:>8}: coverage {np.mean(hits):.3f} mean width {np.mean(widths):.3f} "
                  f"free ability weights in {int(np.sum(free))}/{ct}")
    if "shapes_grid" in only:
        run_shapes_grid(args, seed0)
    if "speed" in only:
        X = privirt.simulate_rasch(2000, 20, seed=seed0)[0]
        print("\n## speed, n=2000, m=20 (seconds per call; best / median of 5)")
        print(f"{'eps':>5} | {'totals n_boot=200':>17} {'totals n_boot=0':>15} {'alg2':>11}")
        for eps in (0.3, 1.0, 3.0):
            row = []
            for fn in (lambda: private_totals_estimate(X, epsilon=eps, delta=DELTA),
                       lambda: private_totals_estimate(X, epsilon=eps, delta=DELTA, n_boot=0),
                       lambda: privirt.private_spectral_estimate(X, epsilon=eps, delta=DELTA, n_boot=0, estimator="spectral")):
                fn()  # warm-up
                ts = []
                for _ in range(5):
                    t1 = time.perf_counter()
                    fn()
                    ts.append(time.perf_counter() - t1)
                row.append(f"{min(ts):.3f}/{np.median(ts):.3f}")
            print(f"{eps:>5g} | {row[0]:>17} {row[1]:>15} {row[2]:>11}")
    print(f"\ntotal time {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
