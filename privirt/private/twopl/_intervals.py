"""The private 2PL's Laplace intervals: the fit's posterior SDs around the estimate
(``docs/private_2pl.md`` §3, "Intervals where the noise swamps the pairs")."""

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

