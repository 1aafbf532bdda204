"""The private 2PL's intervals from their standard errors: the fit's Laplace posterior around the
estimate, and the bootstrap's normal intervals about their own centres, widened to hold the
published estimate (``docs/private_2pl.md`` §3, "Intervals")."""

from __future__ import annotations

import numpy as np


def laplace_intervals(cov: np.ndarray, a: np.ndarray, b: np.ndarray, z: float) -> tuple[np.ndarray, ...]:
    """(se log a, se b, se τ, a_lo, a_hi, b_lo, b_hi, τ_lo, τ_hi): the posterior SDs of the fit's
    own model (``cov``) around the estimate; b = τ√(1 + a²) by the delta method on (τ_i, log a_i)."""
    m = a.size
    ti, li = np.arange(m), np.arange(m, 2 * m)
    se_t, se_la = np.sqrt(cov[ti, ti]), np.sqrt(cov[li, li])
    tau = b / np.sqrt(1.0 + a * a)
    q, g = np.sqrt(1.0 + a * a), tau * a * a / np.sqrt(1.0 + a * a)
    se_b = np.sqrt(np.maximum(q * q * se_t**2 + g * g * se_la**2 + 2.0 * q * g * cov[ti, li], 0.0))
    return (se_la, se_b, se_t, a * np.exp(-z * se_la), a * np.exp(z * se_la), b - z * se_b, b + z * se_b,
            tau - z * se_t, tau + z * se_t)


def bootstrap_intervals(centres: tuple[np.ndarray, np.ndarray, np.ndarray],
                        ses: tuple[np.ndarray, np.ndarray, np.ndarray],
                        a: np.ndarray, b: np.ndarray, z: float) -> tuple[np.ndarray, ...]:
    """(a_lo, a_hi, b_lo, b_hi, τ_lo, τ_hi): centre ± z·se on the scales of log a, b and τ
    (``centres`` and ``ses`` in that order; those of the unshrunk fit), each widened just enough
    to hold the published (shrunk) estimate a, b, τ = b/√(1 + a²): lo = min(lo, estimate),
    hi = max(hi, estimate).

    The shrinkage moves the estimate toward the common level, away from the unshrunk fit the
    bootstrap centres on; unwidened, an estimate fell outside its own interval (at
    (1000, 20, ε = 0.3) some item did in 40 % of data sets).  The widening kept the coverage
    (a 0.949, b 0.963 there) at +0.2 % width; centring at the estimate instead over-covered (0.993).
    """
    (c_la, c_b, c_t), (se_la, se_b, se_t) = centres, ses
    est = (np.log(a), b, b / np.sqrt(1.0 + a * a))
    lo_la, hi_la, b_lo, b_hi, t_lo, t_hi = (
        bound for c, se, x in zip((c_la, c_b, c_t), (se_la, se_b, se_t), est)
        for bound in (np.minimum(c - z * se, x), np.maximum(c + z * se, x)))
    return np.exp(lo_la), np.exp(hi_la), b_lo, b_hi, t_lo, t_hi
