"""The raw-score distribution of many items by an Edgeworth expansion (the design's shortcut).

The design of the totals release (:func:`~privirt.private.totals.marginal.optimal_split`) runs
*before* the debit, so the user waits for it; its one O(m²) part is the exact score
distribution at the public reference model (elementary symmetric functions, minutes at
m = 10⁴ in log space).  Beyond :data:`EXACT_DESIGN_ITEMS` items it uses this expansion
instead: given θ the raw score is a sum of independent Bernoulli(p_i), p_i = logistic(θ − β_i)
(Poisson-binomial), and

    P(S ≤ k) ≈ Φ(x) − φ(x)·[γ₁/6·He₂(x) + γ₂/24·He₃(x) + γ₁²/72·He₅(x)],   x = (k + ½ − μ)/σ,

with μ = Σp, σ² = Σpq, γ₁ = Σpq(q − p)/σ³, γ₂ = Σpq(1 − 6pq)/σ⁴ (Edgeworth with the
continuity correction of the lattice).  Its error is O(σ⁻³) uniformly in k; at the reference
model (items at normal quantiles, |θ| ≤ 5) σ ≥ 0.15·√m, and ``tests/test_totals_design.py``
brute-forces the distance to the exact distribution and to the exact design.  Everything
here is a function of public m (and of the fixed reference model): the privacy argument of
the design (it depends on n, m, ε, δ only) is unchanged (``docs/totals.md``).
"""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["EXACT_DESIGN_ITEMS", "edgeworth_score_distribution"]

#: Up to this many items the design uses the exact score distribution.
EXACT_DESIGN_ITEMS: int = 1000


def edgeworth_score_distribution(beta: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """P(raw score = r | θ_k), r = 0..m, by the Edgeworth expansion: shape (T, Q, m + 1).

    Same call as :func:`~privirt.private.totals.marginal.score_distribution` (``beta`` (T, m),
    ``theta`` (T, Q)); O(T·Q·m) instead of O(T·m²).  The probabilities are the differences of
    the expanded distribution function at the half-integers (clipped at 0 and renormalised).
    """
    beta = np.atleast_2d(np.asarray(beta, dtype=float))
    theta = np.atleast_2d(np.asarray(theta, dtype=float))
    T, m = beta.shape
    p = special.expit(theta[:, :, None] - beta[:, None, :])  # (T, Q, m)
    pq = p * (1.0 - p)
    mu = p.sum(axis=2)
    var = pq.sum(axis=2)
    sd = np.sqrt(np.maximum(var, 1e-300))
    g1 = np.sum(pq * (1.0 - 2.0 * p), axis=2) / sd**3
    g2 = np.sum(pq * (1.0 - 6.0 * pq), axis=2) / var**2
    k = np.arange(-1, m + 1, dtype=float) + 0.5  # edges −½, ½, …, m + ½
    x = (k[None, None, :] - mu[:, :, None]) / sd[:, :, None]
    F = (x > 0).astype(float)  # beyond |x| = 40 the expansion is 0 or 1 to double precision
    near = np.abs(x) < 40.0
    xs = x[near]
    t, q = np.nonzero(near)[:2]
    a1, a2 = g1[t, q], g2[t, q]
    x2 = xs * xs
    corr = (a1 / 6.0) * (x2 - 1.0) + (a2 / 24.0) * xs * (x2 - 3.0) + (a1 * a1 / 72.0) * xs * (x2 * (x2 - 10.0) + 15.0)
    F[near] = special.ndtr(xs) - np.exp(-0.5 * x2) / np.sqrt(2.0 * np.pi) * corr
    F[..., 0], F[..., -1] = 0.0, 1.0
    P = np.clip(np.diff(F, axis=2), 0.0, None)
    return P / P.sum(axis=2, keepdims=True)
