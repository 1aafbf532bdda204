"""Prototype: private totals under missing completely at random (MCAR) against Algorithm 2.

Not a release path of privirt (``private_totals_estimate`` refuses incomplete data): this
script measures whether the totals approach would beat Algorithm 2, which handles missing
cells natively, before one is built.  It adds exact discrete Gaussian noise (seeded, so NOT
private — accuracy only) to the statistics of ``privirt.totals.missing_statistics`` with one
answered-count bin (so the joint histogram is the score histogram): item totals s_i, answered
counts a_i, binned scores — joint L2² sensitivity 2m + 2 (``docs/totals.md`` §7) — and fits:

* p_i = s_i / a_i (the MCAR marginal), shrunk by the complete-data empirical-Bayes rule with
  the noise variance of the ratio;
* the ability model (spread τ, bimodality κ) from the score histogram, each item answered
  independently with probability q_i = a_i / n (a Poisson-binomial with success probabilities
  q_i·logistic(θ − β_i)), posterior over the complete-data grid, β at the point nearest the
  posterior mean.

    python benchmarks/bench_totals_missing.py [--trials 4] [--tune]

Relative error ‖β̂ − β‖/‖β‖ (centred), δ = 1e-4, cells n ∈ {1000, 2000}, m ∈ {20, 50},
ε ∈ {0.3, 1, 3}, 10% and 30% of cells missing independently.  Seeds from 30 000 (``--tune``:
from 0).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mechanisms  # noqa: E402

import privirt  # noqa: E402
from privirt import marginal  # noqa: E402
from privirt.accounting import calibrate_gaussian_sigma  # noqa: E402
from privirt.totals import missing_sensitivity, missing_statistics  # noqa: E402

DELTA = 1e-4


def centred(b):
    b = np.asarray(b, dtype=float)
    return b - b.mean()


def score_probs(prob: np.ndarray) -> np.ndarray:
    """P(score = r) for independent items with success probabilities ``prob`` (T, m, Q): (T, Q, m+1)."""
    T, m, Q = prob.shape
    dist = np.zeros((T, Q, m + 1))
    dist[:, :, 0] = 1.0
    for i in range(m):
        p = prob[:, i, :, None]
        head = dist[:, :, : i + 1]
        moved = head * p
        head -= moved
        dist[:, :, 1: i + 2] += moved
    return dist


def release(X: np.ndarray, eps: float, seed: int):
    """Noisy (s, a, score histogram) with the budget split of the complete-data design."""
    n, m = X.shape
    sigma1 = calibrate_gaussian_sigma(1.0, eps, DELTA)
    rho = 0.5 / sigma1**2
    f, edges = marginal.optimal_split(n, m, rho)
    sens = missing_sensitivity(m, len(edges) - 1)
    assert sens.l2**2 >= 2 * m + 2 - 1e-9
    sig_t = np.sqrt(2 * m / (2 * (1 - f) * rho))  # s and a together: L2² ≤ 2m
    sig_h = np.sqrt(1 / (f * rho))  # histogram: L2² ≤ 2
    s, a, h = missing_statistics(X, np.array([0, m + 1]), edges)
    rng = np.random.SeedSequence(seed)
    k1, k2, k3 = (int(c.generate_state(1)[0]) for c in rng.spawn(3))
    s = s + mechanisms.DiscreteGaussian(sig_t, seed=k1).sample(m)
    a = a + mechanisms.DiscreteGaussian(sig_t, seed=k2).sample(m)
    h = h[0] + mechanisms.DiscreteGaussian(sig_h, seed=k3).sample(len(edges) - 1)
    return s.astype(float), a.astype(float), h.astype(float), edges, sig_t, sig_h


def estimate(n, s, a, h, edges, sig_t, sig_h):
    m = s.size
    a = np.clip(a, 1.0, n)
    q = a / n
    p = np.clip(s / a, 0.5 / a, 1 - 0.5 / a)
    # noise variance of n·p_i: privacy noise of the ratio plus the extra sampling of fewer answers
    var_p = sig_t**2 * (1 + p**2) / a**2 + p * (1 - p) / a
    var_noise = n * n * float(np.mean(var_p)) - n * float(np.mean(p * (1 - p)))
    p, c, _ = marginal.shrink_totals(n * p, n, max(var_noise, 0.0))
    lt = np.repeat(np.log(marginal.TAU_GRID), marginal.KAPPA_GRID.size)
    kap = np.tile(marginal.KAPPA_GRID, marginal.TAU_GRID.size)
    theta, w = marginal.ability_grid(lt, kappa=kap)
    beta = marginal.invert_marginals(p, theta, w)
    prob = q[None, :, None] * special.expit(theta[:, None, :] - beta[:, :, None])
    pr = np.einsum("tqr,tq->tr", score_probs(prob), w)
    cum = np.concatenate([np.zeros((pr.shape[0], 1)), np.cumsum(pr, axis=1)], axis=1)
    P = np.clip(np.diff(cum[:, edges], axis=1), 0, 1)
    V = n * P * (1 - P) + sig_h**2 + 1e-9
    nll = 0.5 * np.sum((h - n * P) ** 2 / V + np.log(V), axis=1) + 0.5 * (lt / marginal.PRIOR_LOG_TAU_SD) ** 2
    post = np.exp(-(nll - nll.min()))
    post /= post.sum()
    j = int(np.argmin(((lt - post @ lt) / 0.2) ** 2 + ((kap - post @ kap) / 0.1) ** 2))
    return centred(beta[j])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--tune", action="store_true")
    args = ap.parse_args()
    seed0 = 0 if args.tune else 30_000
    t0 = time.time()
    print(f"## MCAR prototype vs Algorithm 2 ({args.trials} trials, delta={DELTA:g}; NOT private: seeded noise)")
    print(f"{'miss':>5} {'n':>5} {'m':>3} {'eps':>4} | {'rel totals':>10} {'rel alg2':>9} | {'MSE ratio':>9}")
    for miss in (0.1, 0.3):
        for n in (1000, 2000):
            for m in (20, 50):
                for eps in (0.3, 1.0, 3.0):
                    r = []
                    for k in range(args.trials):
                        rng = np.random.default_rng([seed0, n, m, int(eps * 1000), int(miss * 100), k])
                        X, _, beta = privirt.simulate_rasch(n, m, seed=int(rng.integers(2**31)))
                        X = X.astype(np.int8)
                        X[rng.random(X.shape) < miss] = -1
                        b = centred(beta)
                        nb = np.linalg.norm(b)
                        est = estimate(n, *release(X, eps, seed0 + k))
                        Xf = np.where(X < 0, np.nan, X.astype(float))
                        alg2 = centred(privirt.private_spectral_estimate(Xf, epsilon=eps, delta=DELTA,
                                                                         seed=seed0 + k, n_boot=0).beta.to_numpy())
                        et, ea = est - b, alg2 - b
                        r.append((np.linalg.norm(et) / nb, np.linalg.norm(ea) / nb, et @ et, ea @ ea))
                    r = np.array(r)
                    print(f"{miss:>5.0%} {n:>5} {m:>3} {eps:>4g} | {r[:, 0].mean():>10.3f} {r[:, 1].mean():>9.3f} | "
                          f"{r[:, 3].mean() / r[:, 2].mean():>9.2f}", flush=True)
    print(f"\ntotal time {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
