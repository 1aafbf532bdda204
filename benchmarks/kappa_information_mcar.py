"""How much the released score histogram says about the ability model's bimodality κ, MCAR against complete data.

The MCAR totals fit (``docs/totals.md`` §7.3) and the complete-data fit (§5) take the ability
distribution's shape from a noisy histogram: of the (number answered k, observed score r) under
MCAR, of the raw score on complete data.  This prints, per cell of issue 26's MCAR corner, the
Fisher information about κ that the histogram carries at a given true ability model (default:
two groups at ±2.5 with SD 0.5 each, τ = √6.5, κ = 6.25/6.5 ≈ 0.96), with log τ profiled out
(its prior N(0, 0.7²) included) — the number to set against the prior's own information about κ
(the grid {0, 0.4, 0.7, 0.85, 0.93} with equal weight: SD 0.34, information 8.6):

* ``exact r`` / ``exact (k,r)``: noise-free histogram of the observed score alone (one bin of k,
  every score its own bin) / of every (k, r) cell, items missing independently with the cell's
  rate; ``complete``: the noise-free complete-data score histogram of the same persons;
* ``MCAR design``: the release's own bins and noise (the public design ``mcar_design``);
  ``MCAR at f_c``: the same bins with the noise of the complete-data design's share f_c;
  ``every r``: the release's noise, one bin of k and every observed score its own bin;
  ``complete design``: the complete-data release of the same n, m, ε.

Cell probabilities under MCAR are those of the fit (items answered independently, or the
random k-subset for the (k, r) cells); items at the public reference difficulties; the β of
every model solve the same marginals (the fit's inversion).  Deterministic, a few seconds.

    python benchmarks/kappa_information_mcar.py [--tau 2.55 --kappa 0.96]
    python benchmarks/kappa_information_mcar.py --fits 12     # and the fits' κ̂ on simulated data

``--fits N`` adds, per cell, the MCAR fit's posterior of κ on N simulated data sets (two groups
at ±2.5, SD 0.5; difficulties N(0, 1); cells missing independently; seeded releases, seeds from
``--seed``, NOT private): the mean over data sets of the posterior mean and SD of κ, the share
of fits whose posterior was refined, and of the posterior geometric mean of τ.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mechanisms.measures import ApproxDP  # noqa: E402
from privirt.private import TotalsGaussian  # noqa: E402
from privirt.private.totals import marginal as M  # noqa: E402
from privirt.private.totals import marginal_missing as mm  # noqa: E402

DELTA = 1e-4


def kappa_information(n, m, miss, k_edges, r_edges, sig_h, log_tau, kappa, complete=False):
    """Fisher information about κ (log τ profiled, its prior included) of a histogram with the
    given bins and noise SD ``sig_h`` at the model (log τ, κ); ``complete``: the raw-score histogram."""
    h = 1e-3
    lt = np.array([log_tau, log_tau - h, log_tau + h, log_tau, log_tau])
    kap = np.array([kappa, kappa, kappa, max(kappa - h, 0.0), kappa + h])
    theta, w = M.ability_grid(lt, kappa=kap)
    beta = M.invert_marginals(M.item_marginals(M.reference_difficulties(m)[None], theta[:1], w[:1])[0], theta, w)
    if complete:
        P = M.bin_probabilities(beta, theta, w, r_edges)
    elif len(k_edges) == 2:
        P = mm.bin_probabilities_mcar(beta, np.full(m, 1.0 - miss), theta, w, r_edges)
    else:
        A = mm.thinning_matrix(mm.answered_distribution(m, 1.0 - miss, 0.0), k_edges, r_edges)
        P = mm.thinned_cell_probabilities(beta, theta, w, A)
    J = n * np.stack([(P[2] - P[1]) / (2 * h), (P[4] - P[3]) / (kap[4] - kap[3])], axis=1)
    V = n * P[0] * (1 - P[0]) + sig_h**2 + 1e-12
    info = J.T @ (J / V[:, None]) + np.diag([1.0 / M.PRIOR_LOG_TAU_SD**2, 0.0])
    return float(info[1, 1] - info[0, 1] ** 2 / info[0, 0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tau", type=float, default=math.sqrt(6.5), help="true SD of the abilities")
    ap.add_argument("--kappa", type=float, default=6.25 / 6.5, help="true bimodality κ")
    ap.add_argument("--fits", type=int, default=0, help="simulated data sets per cell for the fits' κ̂ (0: skip)")
    ap.add_argument("--seed", type=int, default=7000, help="first seed of --fits")
    args = ap.parse_args()
    lt = math.log(args.tau)
    prior = 1.0 / np.var(M.KAPPA_GRID)
    print(f"## information about kappa at tau = {args.tau:.2f}, kappa = {args.kappa:.3f} (log tau profiled); "
          f"the prior's: {prior:.1f}")
    print(f"{'miss':>4} {'n':>4} {'m':>3} {'eps':>4} | {'exact r':>8} {'exact(k,r)':>10} {'complete':>8} | "
          f"{'MCAR f':>6} {'B':>2} {'K':>2} {'sig_h':>6} {'MCAR design':>11} {'MCAR at f_c':>11} {'every r':>8} | "
          f"{'f_c':>5} {'B':>2} {'sig_h':>6} {'complete design':>15}")
    for miss in (0.2, 0.5):
        for n in (200, 500):
            for m in (5, 10):
                for eps in (0.3, 1.0):
                    c = TotalsGaussian.calibrate(ApproxDP(eps, DELTA), n_persons=n, n_items=m, missing="mcar")
                    d = TotalsGaussian.calibrate(ApproxDP(eps, DELTA), n_persons=n, n_items=m)
                    every, one = np.arange(m + 2), np.array([0, m + 1])
                    ex_r = kappa_information(n, m, miss, one, every, 0.0, lt, args.kappa)
                    ex_kr = kappa_information(n, m, miss, every, every, 0.0, lt, args.kappa)
                    ex_c = kappa_information(n, m, miss, one, every, 0.0, lt, args.kappa, complete=True)
                    mc = kappa_information(n, m, miss, c.k_edges, c.edges, c.sigmas[2], lt, args.kappa)
                    mfc = kappa_information(n, m, miss, c.k_edges, c.edges, d.sigmas[1], lt, args.kappa)
                    mev = kappa_information(n, m, miss, one, every, c.sigmas[2], lt, args.kappa)
                    cd = kappa_information(n, m, miss, one, d.edges, d.sigmas[1], lt, args.kappa, complete=True)
                    print(f"{miss:>4.0%} {n:>4} {m:>3} {eps:>4g} | {ex_r:>8.1f} {ex_kr:>10.1f} {ex_c:>8.1f} | "
                          f"{c.split:>6.3f} {len(c.edges) - 1:>2} {len(c.k_edges) - 1:>2} {c.sigmas[2]:>6.1f} "
                          f"{mc:>11.2f} {mfc:>11.2f} {mev:>8.2f} | {d.split:>5.3f} {len(d.edges) - 1:>2} {d.sigmas[1]:>6.1f} "
                          f"{cd:>15.2f}", flush=True)


    if args.fits:
        fitted_kappa(args.fits, args.seed)


def fitted_kappa(datasets: int, seed0: int) -> None:
    """The MCAR fit's posterior of κ on simulated ±2.5 data (``--fits``)."""
    import privirt
    from privirt.private.totals.api import _fit_mcar

    print(f"\n## the MCAR fit's posterior of kappa, two groups at +-2.5, {datasets} data sets a cell "
          f"(seeds {seed0}; NOT private)")
    print(f"{'miss':>4} {'n':>4} {'m':>3} {'eps':>4} | {'kappa mean':>10} {'post SD':>7} {'refined':>7} {'tau':>5}")
    for miss in (0.2, 0.5):
        for n in (200, 500):
            for m in (5, 10):
                for eps in (0.3, 1.0):
                    km, sd, ref, tau = [], [], [], []
                    for d in range(datasets):
                        rng = np.random.default_rng([seed0, n, m, int(eps * 1000), int(miss * 100), d])
                        r2 = np.random.default_rng(int(rng.integers(2**31)))
                        theta = np.where(r2.random(n) < 0.5, -2.5, 2.5) + 0.5 * r2.standard_normal(n)
                        beta = r2.standard_normal(m)
                        X = (r2.random((n, m)) < 1.0 / (1.0 + np.exp(beta[None, :] - theta[:, None]))).astype(float)
                        X[rng.random(X.shape) < miss] = np.nan
                        rel = privirt.release_totals(X, epsilon=eps, delta=DELTA, seed=seed0 + d, missing="mcar")
                        fit = _fit_mcar(rel, shrink=True)[0]
                        w = fit.weights
                        km.append(w @ fit.kappa)
                        sd.append(np.sqrt(w @ (fit.kappa - km[-1]) ** 2))
                        ref.append(fit.kappa.size != M.TAU_GRID.size * M.KAPPA_GRID.size)
                        tau.append(np.exp(w @ fit.log_tau))
                    print(f"{miss:>4.0%} {n:>4} {m:>3} {eps:>4g} | {np.mean(km):>10.2f} {np.mean(sd):>7.2f} "
                          f"{np.mean(ref):>7.2f} {np.mean(tau):>5.2f}", flush=True)


if __name__ == "__main__":
    main()
