"""Asymmetric intervals from the totals bootstrap's replicate errors (issue 26, sixth round).

Diagnosis only: the package's intervals stay ``centre ± z·sd_r(d_r)`` (``docs/totals.md`` §5.5).
For each data set of the shapes grid (``bench_private_totals.grid_cell``'s data, release and
bootstrap seeds) or of the MCAR corner (``bench_totals_missing.corner_coverage``'s), the
bootstrap's replicate errors d_r = β̂*_r − (centred β*_r) are captured once and every interval
rule below is built from the same errors and the same centre, so the rules are paired:

* ``sym``: centre ± z·sd(d) (the package's rule);
* ``semi``: semi-deviations, [centre − z·s₊, centre + z·s₋] with
  s± = √(2·Σ(d − d̄)²·1[±(d − d̄) > 0]/(R − 1)) (a truth above the centre has d < 0, so the
  upper end uses the negative deviations);
* ``quant``: centred quantiles, [centre − q₀.₉₇₅(d − d̄), centre − q₀.₀₂₅(d − d̄)];
* ``cf``: Cornish–Fisher, the quantiles of d − d̄ from its sd and skewness g,
  sd·(±z + (z² − 1)g/6).

Per cell: coverage ± SE over data sets, the paired difference to ``sym`` ± its SE, the SD of
the side-wise z = (centre − β)/(half-width on the truth's side / z), the median width, the mean
skewness of d signed by the centre's side for items with |centre| > 1, and where the misses are
(truth beyond the outer or the inner end, by |centre| > 1 and by |β| > 1).

    python benchmarks/interval_shape.py --cells bimodal2.5:10:200:0.3,normal:5:200:0.3 --trials 24 --seed 160000
    python benchmarks/interval_shape.py --mcar --mcar-m 5,10 --mcar-n 200,500 --mcar-miss 0.2,0.5 \\
        --eps 0.3,1 --abilities bimodal2.5 --trials 16 --seed 160000
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from scipy import stats

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

RULES = ("sym", "semi", "quant", "cf")


def bounds(rule: str, centre: np.ndarray, err: np.ndarray, z: float) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) of one rule from the replicate errors ``err`` (R, m) around ``centre`` (m,)."""
    d = err - err.mean(axis=0)
    sd = err.std(axis=0, ddof=1)
    if rule == "sym":
        return centre - z * sd, centre + z * sd
    if rule == "semi":
        r1 = d.shape[0] - 1
        s_pos = np.sqrt(2.0 * np.sum(d**2 * (d > 0), axis=0) / r1)
        s_neg = np.sqrt(2.0 * np.sum(d**2 * (d < 0), axis=0) / r1)
        return centre - z * s_pos, centre + z * s_neg
    if rule == "quant":
        p = stats.norm.cdf(z)
        return centre - np.quantile(d, p, axis=0), centre - np.quantile(d, 1.0 - p, axis=0)
    if rule == "cf":
        a = (z * z - 1.0) * stats.skew(d, axis=0, bias=False) / 6.0
        return centre - sd * (z + a), centre + sd * (z - a)
    raise ValueError(rule)


def _capture(module, name: str, box: dict) -> None:
    """Wrap ``module.name`` (a bootstrap-errors function) so that its result lands in ``box``."""
    orig = getattr(module, name)

    def wrapped(*a, **k):
        box["err"] = orig(*a, **k)
        return box["err"]
    setattr(module, name, wrapped)


def complete_cell(job):
    """One shapes-grid cell: per data set (β, centre, err) with the grid's seeds."""
    shape, m, n, eps, trials, seed0 = job
    import bench_private_totals as bp
    from privirt.private.totals import intervals
    box: dict = {}
    _capture(intervals, "bootstrap_errors", box)
    out = []
    for k in range(trials):
        rng = np.random.default_rng([seed0, 26, n, m, int(eps * 1000), k, sum(shape.encode())])
        beta = rng.standard_normal(m)
        beta -= beta.mean()
        theta = bp.grid_abilities(shape, n, rng)
        X = (rng.random((n, m)) < 1.0 / (1.0 + np.exp(beta[None, :] - theta[:, None]))).astype(np.int8)
        rel = bp.release_totals(X, epsilon=eps, delta=bp.DELTA, seed=seed0 + k)
        fit = bp.estimate_from_release(rel, n_boot=200, seed=seed0 + k)
        out.append((beta, (fit.ci["lo"].to_numpy() + fit.ci["hi"].to_numpy()) / 2, box["err"]))
    return f"{shape} ({m}, {n}, {eps:g})", out


def mcar_cell(job):
    """One MCAR corner cell: per data set (β, centre, err) with ``corner_coverage``'s seeds."""
    m, n, miss, eps, trials, seed0, abilities = job
    import bench_totals_missing as bm
    import privirt
    from privirt.private.totals import mcar_bootstrap
    box: dict = {}
    _capture(mcar_bootstrap, "bootstrap_errors_mcar", box)
    out = []
    for k in range(trials):
        rng = np.random.default_rng([seed0, 91, n, m, int(eps * 1000), int(miss * 100), k])
        X, beta = bm.make_data(n, m, miss, "items", rng, abilities)
        fit = privirt.private_totals_estimate(X, epsilon=eps, delta=bm.DELTA, seed=seed0 + k, missing="mcar")
        out.append((beta, (fit.ci["lo"].to_numpy() + fit.ci["hi"].to_numpy()) / 2, box["err"]))
    return f"{abilities} mcar {miss:.0%} ({m}, {n}, {eps:g})", out


def summarise(name: str, out, z: float) -> None:
    cov = {r: [] for r in RULES}
    line = f"{name:>32} |"
    for rule in RULES:
        zz, wid = [], []
        for beta, c, err in out:
            lo, hi = bounds(rule, c, err, z)
            cov[rule].append(np.mean((lo <= beta) & (beta <= hi)))
            wid.append(np.median(hi - lo))
            zz += list((c - beta) / (np.where(beta > c, hi - c, c - lo) / z))
        cr = np.array(cov[rule])
        se = lambda v: np.std(v, ddof=1) / np.sqrt(len(v))  # noqa: E731
        diff = "" if rule == "sym" else f" Δ{cr.mean() - np.mean(cov['sym']):+.3f}±{se(cr - np.array(cov['sym'])):.3f}"
        line += f" {rule} {cr.mean():.3f}±{se(cr):.3f}{diff} sdz {np.std(zz):.2f} w {np.median(wid):.2f} |"
    sk, miss = [], np.zeros(4, dtype=int)
    nfar = np.zeros(2, dtype=int)
    for beta, c, err in out:
        lo, hi = bounds("sym", c, err, z)
        g = stats.skew(err, axis=0)
        far = np.abs(c) > 1.0
        sk += list((g * np.sign(c))[far])
        for j, (ref, sel) in enumerate(((c, far), (beta, np.abs(beta) > 1.0))):
            up = np.sign(ref) > 0
            outer = np.where(up, beta > hi, beta < lo)
            inner = np.where(up, beta < lo, beta > hi)
            miss[2 * j] += np.sum(outer & sel)
            miss[2 * j + 1] += np.sum(inner & sel)
            nfar[j] += sel.sum()
    line += (f" skew·sgn(c) |c|>1 {np.mean(sk) if sk else np.nan:+.2f} | sym misses: |c|>1 ({nfar[0]}) "
             f"outer {miss[0]} inner {miss[1]}; |β|>1 ({nfar[1]}) outer {miss[2]} inner {miss[3]}")
    print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default="bimodal2.5:10:200:0.3", help="complete data: shape:m:n:eps,...")
    ap.add_argument("--mcar", action="store_true", help="the MCAR corner instead of --cells")
    ap.add_argument("--mcar-m", default="5,10")
    ap.add_argument("--mcar-n", default="200,500")
    ap.add_argument("--mcar-miss", default="0.2,0.5")
    ap.add_argument("--eps", default="0.3,1", help="--mcar: privacy levels")
    ap.add_argument("--abilities", default="bimodal2.5", help="--mcar: the persons' abilities")
    ap.add_argument("--trials", type=int, default=16, help="data sets per cell")
    ap.add_argument("--seed", type=int, default=160_000, help="first seed")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    z = float(stats.norm.ppf(0.975))
    if args.mcar:
        jobs = [(int(m), int(n), float(q), float(e), args.trials, args.seed, args.abilities)
                for m in args.mcar_m.split(",") for n in args.mcar_n.split(",")
                for q in args.mcar_miss.split(",") for e in args.eps.split(",")]
        fn = mcar_cell
    else:
        jobs = []
        for c in args.cells.split(","):
            sh, m, n, e = c.split(":")
            jobs.append((sh, int(m), int(n), float(e), args.trials, args.seed))
        fn = complete_cell
    print(f"## interval rules from the same replicate errors ({args.trials} data sets a cell, seed {args.seed}, "
          f"200 replicates; coverage ± SE over data sets, Δ: paired against sym)")
    with ProcessPoolExecutor(args.jobs) as ex:
        for name, out in ex.map(fn, jobs):
            summarise(name, out, z)


if __name__ == "__main__":
    main()
