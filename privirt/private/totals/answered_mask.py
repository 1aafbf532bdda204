"""The MCAR mask with unequal item answer rates: one model for the fit and the bootstrap.

Person l has an answering propensity U_l ~ Beta with mean q̄ = mean(q_i) and intra-class
correlation φ (:func:`~privirt.private.totals.marginal_missing.answered_distribution`), and
answers item i independently with probability

    p_i(U) = q_i + s_i (U − q̄),   s_i = min(q_i/q̄, (1 − q_i)/(1 − q̄)),

the steepest slope that keeps p_i in [0, 1].  So E p_i(U) = q_i: every item keeps its answer
rate whatever φ; φ = 0 is independent cells (the number answered k Poisson-binomial, narrower
than the binomial of q̄); equal rates are the beta-binomial k of before.  p_i is linear in U,
p_i(U) = (1 − U) α_i + U β_i, so P(k | U) is a polynomial of degree m in Bernstein form and
P(k) = Σ_j C[k, j] BetaBinomial(j; m, q̄, φ), where C[k, j] is the probability of k answered
when a uniformly random j of the items answer with probability β_i and the others with α_i
(:func:`answered_mixing`): C depends on the rates only, the beta-binomial on φ only
(``docs/totals.md`` §7.3).  Post-processing of the released answered counts.
"""

from __future__ import annotations

import numpy as np

__all__ = ["mask_rates", "answered_mixing"]


def mask_rates(q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q̄, α, β): the mean answered share (clipped into (0, 1) as the beta-binomial's) and each
    item's answer probability at propensity U = 0 and U = 1 (``q`` (..., m); q̄ (...,))."""
    q = np.clip(np.asarray(q, dtype=float), 0.0, 1.0)
    mu = np.clip(q.mean(axis=-1), 1e-6, 1 - 1e-6)[..., None]
    s = np.minimum(q / mu, (1.0 - q) / (1.0 - mu))
    return mu[..., 0], np.clip(q - s * mu, 0.0, 1.0), np.clip(q + s * (1.0 - mu), 0.0, 1.0)


def answered_mixing(q: np.ndarray) -> np.ndarray:
    """C[..., k, j] (k, j = 0..m): P(k answered | a uniformly random j-subset of the items answers
    with probability β_i, the rest with α_i) (:func:`mask_rates`); ``q`` (..., m).

    Built one item at a time, averaged over subsets as it goes (all entries stay in [0, 1]):
    O(m³) per set of rates.  Equal rates give the identity.
    """
    _, lo, hi = mask_rates(q)
    m = lo.shape[-1]
    c = np.zeros(lo.shape[:-1] + (m + 1, m + 1))  # (..., j, k) while building
    c[..., 0, 0] = 1.0
    for i in range(1, m + 1):
        a, b = lo[..., i - 1, None, None], hi[..., i - 1, None, None]
        old = c[..., :i, :i].copy()
        j = np.arange(i + 1)[:, None]
        c[..., : i + 1, : i + 1] = 0.0
        for p, rows, wgt in ((a, slice(0, i), (i - j[:-1]) / i), (b, slice(1, i + 1), j[1:] / i)):
            c[..., rows, :i] += wgt * (1.0 - p) * old
            c[..., rows, 1: i + 1] += wgt * p * old
    return np.swapaxes(c, -1, -2)
