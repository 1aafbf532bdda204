"""Noise-aware estimation on the noisy pairwise counts against the spectral estimator on the
clipped counts (Algorithm 2's post-processing), on the *same* releases.

Every trial draws one release ``release_counts(X, epsilon, delta=1e-4)`` (dense discrete
Gaussian) and runs on it, as pure post-processing:

* ``spectral``: ``spectral_from_counts(counts.clipped(), graph, regularization="auto")`` —
  exactly what ``private_spectral_estimate`` returns;
* ``NA``: ``noise_aware_estimate(counts)`` (quasi-likelihood + empirical-Bayes shrinkage);
* ``NA-raw``: the same quasi-likelihood without shrinkage (``beta_unshrunk``).

Printed: mean relative ℓ2 error ‖β̂ − β‖/‖β‖ (centred vectors) and the MSE ratio
spectral / NA (> 1: noise-aware better), for the issue's target cells, the paper's grid
(n ∈ {200, 1000}, m ∈ {10, 50, 100}, 13 ε from 0.01 to 10) and incomplete data (MCAR).

    python benchmarks/bench_noisy_y.py                 # full run (4 trials per cell)
    python benchmarks/bench_noisy_y.py --trials 2 --only targets
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import privirt
from privirt.private.counts.noisy_likelihood import noise_aware_estimate, noise_aware_se0
from privirt.rasch.spectral import spectral_from_counts

DELTA = 1e-4
TARGETS = [(1000, 50, 1.0), (1000, 100, 1.0), (10000, 100, 0.1), (1000, 50, 0.3),
           (1000, 100, 0.3), (1000, 10, 0.1), (1000, 10, 1.0), (200, 10, 0.3)]
MISSING = [(1000, 50, 1.0), (1000, 100, 0.3), (1000, 10, 0.1), (1000, 10, 1.0), (200, 50, 1.0),
           (1000, 50, 10.0)]


def _centred(b):
    b = np.asarray(b, dtype=float)
    return b - b.mean()


def trial(n, m, eps, k, seed0, p_observed=1.0):
    X, _, beta = privirt.simulate_rasch(n, m, p_observed=p_observed,
                                        seed=np.random.SeedSequence([seed0, n, m, int(eps * 1000),
                                                                 int(p_observed * 100), k]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NoiseDominatesWarning at tiny ε is expected here
        counts = privirt.release_counts(X, epsilon=eps, delta=DELTA, seed=seed0 + k)
    sp = spectral_from_counts(counts.clipped(), items=counts.items, graph=counts.graph.to_numpy(),
                              regularization="auto").beta.to_numpy()
    na = noise_aware_estimate(counts)
    b = _centred(beta)
    errs = [_centred(x) - b for x in (sp, na.beta.to_numpy(), na.beta_unshrunk.to_numpy())]
    nb2 = b @ b
    return [np.sqrt(e @ e / nb2) for e in errs] + [e @ e for e in errs] + [na.noise_var]


def cell(n, m, eps, trials, seed0, p_observed=1.0):
    r = np.array([trial(n, m, eps, k, seed0, p_observed) for k in range(trials)])
    rel = r[:, :3].mean(axis=0)
    mse = r[:, 3:6].mean(axis=0)
    return rel, mse[0] / mse[1], mse[0] / mse[2], public_se(n, m, r[0, 6])


def public_se(n, m, noise_var):
    """The public index: predicted standard error of one difficulty at equal difficulties with
    n/2 discordant persons per pair (``noise_aware_se0``)."""
    return noise_aware_se0(n, m, noise_var)


HEAD = (f"{'rel spectral':>12} {'rel NA':>7} {'rel NA-raw':>10} | "
        f"{'MSE spec/NA':>11} {'spec/NA-raw':>11} | {'se0':>6}")


def fmt(rel, ratio, ratio_raw, se0):
    return f"{rel[0]:>12.3f} {rel[1]:>7.3f} {rel[2]:>10.3f} | {ratio:>11.2f} {ratio_raw:>11.2f} | {se0:>6.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--only", default="targets,grid,missing")
    ap.add_argument("--seed", type=int, default=30_000)
    args = ap.parse_args()
    only = set(args.only.split(","))
    t0 = time.time()
    T = args.trials
    if "targets" in only:
        print(f"## target cells (normal abilities, complete data, {T} trials, delta={DELTA:g})")
        print(f"{'n':>6} {'m':>4} {'eps':>5} | " + HEAD)
        for n, m, eps in TARGETS:
            print(f"{n:>6} {m:>4} {eps:>5g} | " + fmt(*cell(n, m, eps, T, args.seed)))
    if "grid" in only:
        eps_grid = np.geomspace(0.01, 10.0, 13)
        print(f"\n## paper grid ({T} trials per cell): MSE ratio spectral/NA, and mean relative "
              "error NA (spectral)")
        ratios, ses = [], []
        for n in (200, 1000):
            for m in (10, 50, 100):
                tm = T * (3 if m <= 10 else 1)  # m = 10 is cheap and its ratio noisy: 3x trials
                vals = [cell(n, m, float(e), tm, args.seed) for e in eps_grid]
                ratios.append([v[1] for v in vals])
                ses.append([v[3] for v in vals])
                print(f"n={n:>4} m={m:>3} ratio: " + " ".join(f"{v[1]:>10.2f}" for v in vals))
                print(f"{'':>10} rel  : " + " ".join(f"{v[0][1]:>4.2f}({v[0][0]:.2f})" for v in vals))
                print(f"{'':>10} se0  : " + " ".join(f"{v[3]:>10.3g}" for v in vals))
        print("eps: " + " ".join(f"{e:.3g}" for e in eps_grid))
        ratios, ses = np.array(ratios), np.array(ses)
        print(f"cells with MSE ratio > 1.1: {(ratios > 1.1).sum()}/{ratios.size}; < 0.9: "
              f"{(ratios < 0.9).sum()}/{ratios.size}; geometric mean {np.exp(np.log(ratios).mean()):.2f}")
        print("by the public index se0 (cells, geometric-mean ratio, min, max):")
        for lo, hi in ((0, 0.1), (0.1, 0.2), (0.2, 0.35), (0.35, 0.5), (0.5, 1.0), (1.0, 2.0), (2.0, np.inf)):
            sel = (ses >= lo) & (ses < hi)
            if sel.any():
                r = ratios[sel]
                print(f"  se0 in [{lo:g}, {hi:g}): {sel.sum():>3} cells, {np.exp(np.log(r).mean()):.2f}, "
                      f"{r.min():.2f}, {r.max():.2f}")
    if "missing" in only:
        print(f"\n## incomplete data (MCAR), {T} trials")
        print(f"{'obs':>4} {'n':>6} {'m':>4} {'eps':>5} | " + HEAD)
        for p_obs in (0.9, 0.7):
            for n, m, eps in MISSING:
                print(f"{p_obs:>4g} {n:>6} {m:>4} {eps:>5g} | "
                      + fmt(*cell(n, m, eps, T, args.seed, p_observed=p_obs)))
    print(f"\ntotal time {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
