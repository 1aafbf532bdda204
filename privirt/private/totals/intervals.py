"""The totals estimator's parametric-bootstrap intervals (``docs/totals.md`` §5 step 4, §5.2).

Pure post-processing of the release: persons are simulated from the fitted ability
distribution, the two statistics computed and noised at the released scales, and the
unshrunk estimate refitted on the fit's support.  The replicates' *true* difficulties are
drawn afresh for every replicate from their posterior under the shrinkage's model
(:func:`~privirt.private.totals.shrinkage.population_draws`), not held at the point estimate:
where the noise dominates, the shrinkage makes every difficulty equal and a bootstrap at that
truth measured only the spread of an estimate that cannot tell items apart (coverage of the
true difficulties near 0); the redrawn truths put back the between-item spread the data
cannot resolve.  Where the noise is small the posterior is narrow and the intervals are those
of the bootstrap at the point estimate.  Each replicate's ability model (τ, κ, λ) is drawn from
the fit's posterior too (:func:`model_draws`, §5.4): at the posterior mode alone the se missed
the uncertainty of the ability scale that a vague histogram leaves (issue 26, fourth round).
The draws are tempered (:data:`TEMPER_MAX`, fifth round): the posterior's spread where the
histogram locates τ, the prior's spread narrowed where the histogram is silent.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from . import manyitems, marginal, shrinkage

__all__ = ["LOW_HISTOGRAM_SHARE", "MODEL_DRAWS", "TEMPER_MAX", "bootstrap_errors", "histogram_share", "model_draws",
           "replicate_truths", "true_difficulties"]

#: each replicate's ability model (τ, κ, λ) is drawn from the fit's posterior over its support
#: (``docs/totals.md`` §5.4); False: every replicate at the posterior mode (the intervals before)
MODEL_DRAWS: bool = True
#: the replicates' models are drawn from the posterior raised to γ = 1 + (1 − φ)(TEMPER_MAX − 1),
#: φ the histogram's share of the information about log τ (:func:`histogram_share`,
#: ``docs/totals.md`` §5.4): the full posterior where the histogram locates τ, the posterior
#: narrowed to 1/√TEMPER_MAX of its spread where only the prior does; 1: the posterior (session 10)
TEMPER_MAX: float = 2.0
#: below this share φ the release carries less information about the ability spread τ than the
#: public prior does: the intervals are calibrated on average over the prior on τ, not for every
#: ability distribution (``docs/totals.md`` §5.4, "What φ tells the user"); ``info["histogram_share"]``
LOW_HISTOGRAM_SHARE: float = 0.5


def histogram_share(fit) -> float:
    """φ = 1 − Var(log τ | release) / Var(log τ) ∈ [0, 1]: the share of the posterior's precision
    about the ability spread that the noisy histogram contributes (the prior N(0, 0.7²) on log τ
    holds the rest; for a normal likelihood φ = I_h / (I_h + 1/0.7²) exactly)."""
    w = np.asarray(fit.weights, dtype=float)
    lt = np.asarray(fit.log_tau, dtype=float)
    mean = float(w @ lt)
    var = float(w @ (lt - mean) ** 2)
    return float(np.clip(1.0 - var / marginal.PRIOR_LOG_TAU_SD**2, 0.0, 1.0))


def model_draws(rng: np.random.Generator, fit, reps: int) -> np.ndarray | None:
    """Grid indices (reps,) of the replicates' ability models, drawn from the fit's posterior
    renormalised over its support (the grid points the refits use) and raised to
    γ = 1 + (1 − φ)(TEMPER_MAX − 1) (φ: :func:`histogram_share`), or ``None`` where there is
    nothing to draw: free ability weights (a precise histogram pinned the distribution down) or
    a posterior on one point (then every replicate is at the mode, as before)."""
    if fit.flexible:
        return None
    keep = fit.support_indices()
    if keep.size < 2:
        return None
    w = fit.weights[keep]
    gamma = 1.0 + (1.0 - histogram_share(fit)) * (TEMPER_MAX - 1.0)
    w = np.exp(gamma * (np.log(w) - np.log(w.max())))  # posterior^γ: a normal one's variance / γ
    return keep[rng.choice(keep.size, size=reps, p=w / w.sum())]


def true_difficulties(rng: np.random.Generator, fit, totals: np.ndarray, n: int, var_t: float,
                      reps: int, ability: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """``reps`` draws (reps, m) of the items' difficulties from their posterior given the noisy
    totals: population proportions from :func:`shrinkage.population_draws`, mapped to
    difficulties under the fitted ability distribution (the one the bootstrap simulates from;
    not centred, so the simulated totals keep the released mean)."""
    theta, w = fit.ability_distribution() if ability is None else ability
    p = shrinkage.population_draws(rng, totals, n, var_t, reps)
    if ability is not None and p.size < manyitems.KNOTS:  # few draws (one model's share): Newton on each
        return marginal.invert_marginals(p, np.tile(theta, (reps, 1)), np.tile(w, (reps, 1)), tol=1e-10)
    y = special.logit(p)
    table = manyitems.InverseTable(theta[None, :], w[None, :], float(y.min()), float(y.max()))
    return table(y)[:, 0, :]


def replicate_truths(rng_truth: np.random.Generator | None, fit, totals: np.ndarray, n: int, var_t: float,
                     reps: int, beta: np.ndarray, simulate) -> tuple[np.ndarray, tuple]:
    """The replicates' truths and their simulated statistics, for the complete and the MCAR
    bootstrap alike: each replicate's ability model drawn by :func:`model_draws` (§5.4), its
    truths by :func:`true_difficulties` under that model, then ``simulate(truth, count, ability)``
    (a tuple of (count, ·) arrays) for the replicates sharing the model.  Without draws
    (``rng_truth`` ``None``: truths held at ``beta``; :data:`MODEL_DRAWS` False; a posterior on
    one point) one call at the posterior mode, ``ability=None``."""
    reps = int(reps)
    draws = None if rng_truth is None or not MODEL_DRAWS else model_draws(rng_truth, fit, reps)
    if draws is None:
        truth = beta if rng_truth is None else true_difficulties(rng_truth, fit, totals, n, var_t, reps)
        return truth, simulate(truth, reps, None)
    truth, out = np.empty((reps, np.size(totals))), None
    for k in np.unique(draws):
        rr = np.flatnonzero(draws == k)
        ability = fit.mixture(int(k))
        truth[rr] = true_difficulties(rng_truth, fit, totals, n, var_t, rr.size, ability=ability)
        parts = simulate(truth[rr], rr.size, ability)
        if out is None:
            out = tuple(np.empty((reps,) + np.shape(p)[1:]) for p in parts)
        for o, p in zip(out, parts):
            o[rr] = p
    return truth, out


def bootstrap_errors(rng: np.random.Generator, rng_truth: np.random.Generator | None, fit, beta: np.ndarray,
                     totals: np.ndarray, hist: np.ndarray, n: int, var_t: float, var_h: float,
                     edges: np.ndarray, sig_t: float, sig_h: float, reps: int, tick=None) -> np.ndarray:
    """Errors (reps, m) of the unshrunk estimate against the replicates' (centred) truths.

    ``rng_truth`` draws the truths (:func:`true_difficulties`); ``None`` holds them at ``beta``
    (the point estimate: the intervals before §5.2).  ``rng`` simulates the data, so both
    choices share their random numbers.
    """
    truth, (tb, hb) = replicate_truths(
        rng_truth, fit, totals, n, var_t, reps, beta,
        lambda t, r, ability: marginal.simulate_releases(rng, fit, t, n, edges, sig_t, sig_h, r, on_batch=tick,
                                                         ability=ability))
    pb = np.stack([shrinkage.centre_totals(x, n, var_t) for x in tb])
    support = fit.support()
    theta_s, w_s = marginal.ability_grid(*support[:1], kappa=support[1], lam=support[2])
    start = marginal.invert_marginals(shrinkage.centre_totals(totals, n, var_t), theta_s, w_s)
    est = manyitems.fit_support_batch(pb, hb, n, var_h, edges, support, initial=start, on_batch=tick)
    truth = np.atleast_2d(truth)
    return est - (truth - truth.mean(axis=1, keepdims=True))
