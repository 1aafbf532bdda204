"""The common level of the discriminations (the all-a-equal log a) where the noise can hide it:
its prior, the release's own curvature variance at the all-equal fit, the posterior mean against
the refits' predictive t, and the prior–data conflict rule (``docs/private_2pl.md`` §3, the level)."""

from __future__ import annotations

import numpy as np
from scipy import linalg, stats

from ..._threads import one_blas_thread
from .fit import TAU_PRIOR_SD, _common_subspace, fit_weights

__all__ = ["LEVEL_PRIOR_SD", "LEVEL_CONFLICT_SDS", "level_posterior_mean", "level_scale2",
           "level_curvature_variance", "level_noise_share"]

#: Prior SD of the common log a (2PNO scale) where the noise hides it: a within e^{±1}
#: (0.37 to 2.7) of 1 at 95 % (``docs/private_2pl.md`` §3, the level).
LEVEL_PRIOR_SD = 0.5
#: A prior–data conflict on the level: the posterior mean of the common log a lies more than this
#: many of the likelihood's scales w from the release's own value (``info["level_prior_conflict"]``,
#: an :class:`~privirt.exceptions.IdentifiabilityWarning`; ``docs/private_2pl.md`` §3, the level).
LEVEL_CONFLICT_SDS = 4.0


def level_posterior_mean(x: float, v_refits: float, v_fit: float, reps: int) -> float:
    """Posterior mean of the common log a ℓ under its prior N(0, LEVEL_PRIOR_SD²) and the
    likelihood of the bias-corrected all-equal fit ``x``: x − ℓ ~ t_{R−1}(0, w), the predictive
    law of one more draw like the R refits (``v_refits`` their variance about their mean, so the
    scale is w² = v_refits·R/(R − 1)·(1 + 1/R)), w² raised to the curvature variance ``v_fit`` where
    that is wider.  Where w is small against the prior's SD this is the Gaussian posterior mean
    x·S²/(S² + w²) to within w; the t's tails only matter where the refits scatter about as
    widely as the prior (``docs/private_2pl.md`` §3, the level)."""
    S = LEVEL_PRIOR_SD
    w2 = level_scale2(v_refits, v_fit, reps)
    if not np.isfinite(w2):
        return 0.0
    w = float(np.sqrt(w2))
    if w < 0.05 * S:
        return x * S * S / (S * S + w2)
    # beyond 8 prior SDs outside [0, x] both the prior and the t factor fall off (the integrand
    # below e^{-32} of its value at the nearer end); a range that grew with w left the prior
    # between a few grid points where w ≫ S.  Points enough for w/20 spacing.
    lo, hi = min(0.0, x) - 8.0 * S, max(0.0, x) + 8.0 * S
    grid = np.linspace(lo, hi, int(min(max(8001, 20.0 * (hi - lo) / w), 400_001)))
    logp = stats.norm.logpdf(grid, 0.0, S) + stats.t.logpdf(x - grid, reps - 1.0, scale=w)
    p = np.exp(logp - logp.max())
    return float(np.sum(p * grid) / np.sum(p))


def level_scale2(v_refits: float, v_fit: float, reps: int) -> float:
    """w², the squared scale of the level's likelihood (:func:`level_posterior_mean`)."""
    return max(v_refits * reps / (reps - 1.0) * (1.0 + 1.0 / reps), v_fit)


@one_blas_thread  # an (m + 1)² Cholesky: OpenBLAS's threads spin on shared cores
def level_curvature_variance(same) -> float:
    """The variance of the common log a that the release's own curvature gives at the all-a-equal
    fit ``same`` (fitted with ``hessian=True``): the inverse of the data's part of the Gauss–Newton
    matrix (JᵀWJ, the expected information; the Newton matrix's residual curvature is the noise's
    where the noise swamps the pairs, and where it made that matrix indefinite the level went to
    the prior's 0) in the subspace of all a equal, the thresholds profiled (their weak prior kept),
    at the level's entry; inf only if that matrix is singular (``docs/private_2pl.md`` §3)."""
    _, Hp = same.hessian
    m = same.tau.shape[1]
    Hd = (same.gauss_newton[0] - Hp)[None]
    zero = np.zeros((1, 2 * m + 1))
    Hc = _common_subspace(Hd, zero, zero, m)[0][0]
    k = np.arange(m)
    Hc[k, k] += 1.0 / TAU_PRIOR_SD**2
    try:
        L = np.linalg.cholesky(Hc)
    except np.linalg.LinAlgError:
        return float("inf")
    e = np.zeros(m + 1)
    e[m] = 1.0
    y = linalg.solve_triangular(L, e, lower=True)
    return float(y @ y)


def level_noise_share(totals: np.ndarray, pairs: np.ndarray, n: float | tuple, sigma_totals: float | np.ndarray,
                      sigma_pairs: float | np.ndarray) -> float:
    """The privacy noise's share of the variance of the pairs that carry the level, in [0, 1]:
    :func:`level_curvature_variance` is the fit's whole variance, sampling included, and the level
    is shrunk against the noise only (``docs/private_2pl.md`` §3), so its variance is scaled by
    this share.

    Parameters
    ----------
    totals, pairs : numpy.ndarray
        The release's noisy counts (m,) and disagreement counts (P,), as :func:`.fit.fit_factor`
        takes them (:func:`.mcar.fit_inputs`).
    n : float or tuple
        Persons, or (per total, per pair) under MCAR.
    sigma_totals, sigma_pairs : float or numpy.ndarray
        The noise SDs on the count scale.

    Returns
    -------
    float
        Each pair's noise variance over its variance in the fit's weights (sampling at the
        observed proportion plus noise), averaged with the fit's weights (the pairs' precisions);
        with two items of complete data that of the pair's residual given the two totals
        (:func:`._pairs.pair_regression`, whose noise is the pair's and the totals' through its
        regression on them).
    """
    w = fit_weights(totals, pairs, n, sigma_totals, sigma_pairs)  # (as fit_factor weights the pairs)
    var = w.sd_n * w.sd_n
    share = np.clip(w.pair_noise / var, 0.0, 1.0)
    return float(np.sum(share / var) / np.sum(1.0 / var))
