"""The MCAR totals estimator's parametric bootstrap (``docs/totals.md`` §7.3 step 4, §7.4).

Post-processing of the release: persons simulated from an ability model, their Rasch answers,
the MCAR mask (each item at its answer rate; with bins of the number answered k, each
person's propensity Beta-distributed and the items answered independently given it,
:mod:`~privirt.private.totals.answered_mask`), the three statistics noised at the
released scales and refitted unshrunk on the fit's support
(:func:`~privirt.private.totals.marginal_missing.fit_support_batch_mcar`).  The replicates'
true difficulties are drawn from their posterior by the complete-data
:func:`~privirt.private.totals.intervals.true_difficulties`, and — as on the complete path
(§5.4) — each replicate's ability model (τ, κ, λ) is drawn from the fit's posterior
(:func:`~privirt.private.totals.intervals.model_draws`) rather than held at its mode.
"""

from __future__ import annotations

import numpy as np

from . import intervals, shrinkage
from .answered_mask import answered_mixing, mask_rates
from .marginal import SIMULATION_CELLS, SpreadFit, ability_grid, invert_marginals
from .marginal_missing import (
    answered_distribution,
    fit_answered_icc,
    fit_support_batch_mcar,
    ratio_proportions,
    thinning_matrix,
)

__all__ = ["simulate_mcar_statistics", "bootstrap_errors_mcar"]


def simulate_mcar_statistics(rng: np.random.Generator, fit: SpreadFit, beta: np.ndarray, q: np.ndarray,
                             n: int, edges: np.ndarray, reps: int, k_edges: np.ndarray | None = None,
                             icc: float = 0.0, ability: tuple[np.ndarray, np.ndarray] | None = None
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``reps`` draws of the exact (s, a, histogram) from the fitted model: (reps, m) ×2, (reps, K·B).

    Persons from ``ability`` (nodes, weights; by default the fitted ability distribution at the
    posterior mode), Rasch answers with ``beta`` ((m,) every replicate's truth, or (reps, m) one
    truth per replicate).
    Without ``k_edges`` item i is seen independently with probability ``q[i]``; with them each
    person draws a propensity U ~ Beta (mean share mean(q), intra-class correlation ``icc``)
    and answers item i independently with probability q_i + s_i (U − mean(q))
    (:mod:`~privirt.private.totals.answered_mask`): every item keeps its answer rate and the
    number answered k has the distribution the fit uses (``answered_distribution`` with the
    rates' ``answered_mixing``; beta-binomial for equal rates); k is binned into the (k, r)
    histogram.
    """
    theta, w = fit.ability_distribution() if ability is None else ability
    eb = np.exp(np.atleast_2d(beta))
    m, B = eb.shape[1], len(edges) - 1
    K = 1 if k_edges is None else len(k_edges) - 1
    s, a, hist = np.empty((reps, m)), np.empty((reps, m)), np.empty((reps, K * B))
    mu, lo, hi = mask_rates(q)
    step = max(1, SIMULATION_CELLS // (n * m))
    for a0 in range(0, reps, step):
        r = min(reps, a0 + step) - a0
        th = theta[rng.choice(theta.size, size=(r, n), p=w)] + (rng.random((r, n)) - 0.5) * (theta[1] - theta[0])
        X = rng.random((r, n, m)) * (1.0 + (eb if eb.shape[0] == 1 else eb[a0:a0 + r])[:, None, :]
                                     * np.exp(-th)[:, :, None]) < 1.0
        if k_edges is None:
            seen = rng.random((r, n, m)) < q[None, None, :]
            kb = 0
        else:
            share = rng.beta(mu * (1 / icc - 1), (1 - mu) * (1 / icc - 1), (r, n)) if icc > 1e-9 else mu
            seen = rng.random((r, n, m)) < lo + (hi - lo) * np.asarray(share)[..., None]
            kb = np.searchsorted(k_edges, seen.sum(axis=2), side="right") - 1
        X &= seen
        s[a0:a0 + r] = X.sum(axis=1)
        a[a0:a0 + r] = seen.sum(axis=1)
        b = (kb * B + np.searchsorted(edges, X.sum(axis=2), side="right") - 1 + K * B * np.arange(r)[:, None])
        hist[a0:a0 + r] = np.bincount(b.ravel(), minlength=r * K * B).reshape(r, K * B)
    return s, a, hist


def bootstrap_errors_mcar(rng: np.random.Generator, rng_truth: np.random.Generator | None, fit: SpreadFit,
                          beta: np.ndarray, s: np.ndarray, a: np.ndarray, n: int, sigmas: tuple[float, float, float],
                          edges: np.ndarray, k_edges: np.ndarray | None, icc: float, reps: int,
                          tick=None) -> np.ndarray:
    """Errors (reps, m) of the unshrunk MCAR estimate against the replicates' (centred) truths
    (``docs/totals.md`` §7.3 step 4, §7.4).

    ``s``, ``a`` are the released correct and answered counts, ``sigmas`` the released scales
    (σ_s, σ_a, σ_h).  Each replicate's ability model is drawn from the fit's posterior
    (:func:`~privirt.private.totals.intervals.replicate_truths`, ``rng_truth``; where it is pinned
    to one point, or ``rng_truth`` is ``None`` or ``intervals.MODEL_DRAWS`` False, the posterior
    mode).  Its truths are drawn under that model by the complete-data
    :func:`~privirt.private.totals.intervals.true_difficulties` from the ratios on the totals
    scale with the noise variance :func:`ratio_proportions` hands to the shrinkage
    (``rng_truth``; ``None`` holds them at ``beta``, the point estimate); ``rng`` simulates the
    persons (from that model), the mask (item answer rates q_i = a_i/n; with ``k_edges`` the
    persons' propensities of intra-class correlation ``icc``) and the noise, so the choices
    share their random numbers.  Each replicate is refitted unshrunk on the fit's support, its
    φ from its own k-margins (its own mean share; the items' spread of rates, the
    ``answered_mixing``, that of the q_i it was simulated with: one O(m³) table, not one per
    replicate).
    """
    sig_s, sig_a, sig_h = sigmas
    vs, va, vh = sig_s**2, sig_a**2, sig_h**2
    reps = int(reps)
    tp, q, v = ratio_proportions(s, a, n, vs, va)
    truth, (sb, ab, hb) = intervals.replicate_truths(
        rng_truth, fit, tp, n, v, reps, beta,
        lambda t, r, ability: simulate_mcar_statistics(rng, fit, t, q, n, edges, r, k_edges=k_edges, icc=icc,
                                                       ability=ability))
    if tick is not None:
        tick(reps)
    sb = sb + rng.normal(0.0, sig_s, sb.shape)
    ab = ab + rng.normal(0.0, sig_a, ab.shape)
    hb = hb + rng.normal(0.0, sig_h, hb.shape)
    pq = [ratio_proportions(x, y, n, vs, va) for x, y in zip(sb, ab)]
    pb = np.stack([shrinkage.centre_totals(t, n, vt) for t, _, vt in pq])
    qb = np.stack([x[1] for x in pq])
    support = fit.support()
    theta_s, w_s = ability_grid(support[0], kappa=support[1], lam=support[2])
    start = invert_marginals(shrinkage.centre_totals(tp, n, v), theta_s, w_s)
    A = None
    if k_edges is not None:
        mub, mix = qb.mean(axis=1), answered_mixing(q)
        iccb = fit_answered_icc(hb, n, vh, mub, k_edges, len(edges) - 1, mixing=mix)
        A = thinning_matrix(answered_distribution(qb.shape[1], mub[:, None], iccb[:, None], mix)[:, 0],
                            k_edges, edges)
    est = fit_support_batch_mcar(pb, qb, hb, n, vh, edges, support, initial=start, A=A)
    if tick is not None:
        tick(reps)
    truth = np.atleast_2d(truth)
    return est - (truth - truth.mean(axis=1, keepdims=True))
