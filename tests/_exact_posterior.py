"""Exact posterior moments of tiny IRT problems, for checking whole samplers.

Self-normalised importance sampling from the prior gives the posterior mean of every
parameter and of its square, with standard errors (delta method); a sampler's averages are
then compared within a few combined standard errors (its batch-means MCSE and the
importance-sampling error).  Shared by the Gibbs (CPU and device kernels) and MH tests.
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats

from privirt.bayes.diagnostics import mcse_batch_means


def importance_moments(draw_prior, log_lik, size: int, seed: int) -> dict:
    """``{name: (E x, se, E x², se)}`` under the posterior ∝ prior × exp(log_lik)."""
    rng = np.random.default_rng(seed)
    params = draw_prior(rng, size)
    logw = log_lik(params)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    out = {}
    for name, x in params.items():
        m1, m2 = w @ x, w @ x**2
        out[name] = (m1, np.sqrt(w**2 @ (x - m1) ** 2), m2, np.sqrt(w**2 @ (x**2 - m2) ** 2))
    return out


def assert_moments_match(post, exact: dict, limit: float = 4.5) -> float:
    """Sampler means of x and x² against the exact ones: the difference over the combined
    standard error is N(0, 1) for a correct sampler, so |z| < 4.5 over a few dozen
    comparisons fails by chance with probability below 1e-3 (and the seeds are fixed).
    Returns the largest |z|.  A parameter that is constant under both (a fixed anchor) must
    be equal up to rounding."""
    worst = 0.0
    for name, (m1, se1, m2, se2) in exact.items():
        d = post.get_draws(name)
        for x, m, se in ((d, m1, se1), (d**2, m2, se2)):
            diff = x.mean(axis=(0, 1)) - m
            den = np.sqrt(mcse_batch_means(x) ** 2 + se**2)
            const = den < 1e-12  # a fixed parameter: equal up to rounding
            z = np.divide(diff, den, out=np.where(np.abs(diff) < 1e-9, 0.0, np.inf),
                          where=~const)
            assert np.all(np.abs(z) < limit), (name, z)
            worst = max(worst, float(np.abs(z).max()))
    return worst


def tiny_2pno_problem(size: int = 400_000) -> tuple[np.ndarray, dict, dict]:
    """A 4 × 2 normal-ogive problem with a missing cell and proper priors on a (truncated to
    a > 0) and b: ``(Y, priors, exact moments)``."""
    Y = np.array([[1, 0], [0, np.nan], [1, 1], [0, 0]])
    pa, pb = (0.8, 0.5), (0.3, 1.0)
    obs, sign = ~np.isnan(Y), np.where(Y == 1, 1.0, -1.0)

    def draw_prior(rng, n):
        sa = np.sqrt(pa[1])
        a = stats.truncnorm.rvs(-pa[0] / sa, np.inf, loc=pa[0], scale=sa, size=(n, 2),
                                random_state=rng)
        return {"theta": rng.standard_normal((n, 4)), "a": a,
                "b": pb[0] + np.sqrt(pb[1]) * rng.standard_normal((n, 2))}

    def log_lik(p):
        eta = p["theta"][:, :, None] * p["a"][:, None, :] - p["b"][:, None, :]
        return np.where(obs, special.log_ndtr(sign * eta), 0.0).sum(axis=(1, 2))

    return Y, {"a": pa, "b": pb}, importance_moments(draw_prior, log_lik, size, seed=0)


#: the free-slope problem's anchors: p1 constrained to θ > 0, p3 fixed at 0.8
FREE_ANCHORS = {"p1": "+", "p3": 0.8}


def tiny_free_problem(anchored: bool = True, size: int = 400_000) -> tuple:
    """A 5 × 3 normal-ogive problem with slopes of either sign and a missing cell:
    ``(Y, kwargs, exact moments)``, ``kwargs`` the ``gibbs_2pno`` arguments (``slopes="free"``,
    the priors and, when ``anchored``, :data:`FREE_ANCHORS`).

    Priors: a ~ N(0.3, 1) untruncated and b ~ N(0.3, 1) when anchored (the anchors fix the
    direction); without anchors a ~ N(0, 1), so that the posterior is symmetric under
    (θ, a) -> (−θ, −a) and the sampler's reflection of whole chains is exact.  The anchored
    θ are drawn from their constrained priors (half-normal for p1, the point 0.8 for p3).
    """
    import pandas as pd

    Y = pd.DataFrame(
        [[1, 0, 1], [0, 1, np.nan], [1, 1, 0], [0, 0, 1], [1, 0, 0]],
        index=[f"p{i}" for i in range(5)], columns=["i0", "i1", "i2"],
    )
    y = Y.to_numpy()
    pa, pb = ((0.3, 1.0) if anchored else (0.0, 1.0)), (0.3, 1.0)
    obs, sign = ~np.isnan(y), np.where(y == 1, 1.0, -1.0)

    def draw_prior(rng, n):
        theta = rng.standard_normal((n, 5))
        if anchored:
            theta[:, 1] = np.abs(theta[:, 1])
            theta[:, 3] = 0.8
        return {"theta": theta, "a": pa[0] + np.sqrt(pa[1]) * rng.standard_normal((n, 3)),
                "b": pb[0] + np.sqrt(pb[1]) * rng.standard_normal((n, 3))}

    def log_lik(p):
        eta = p["theta"][:, :, None] * p["a"][:, None, :] - p["b"][:, None, :]
        return np.where(obs, special.log_ndtr(sign * eta), 0.0).sum(axis=(1, 2))

    kwargs = {"slopes": "free", "priors": {"a": pa, "b": pb}}
    if anchored:
        kwargs["anchors"] = dict(FREE_ANCHORS)
    return Y, kwargs, importance_moments(draw_prior, log_lik, size, seed=1)
