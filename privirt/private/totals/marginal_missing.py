"""Marginal Rasch maths of the private totals estimator for incomplete data (MCAR).

Post-processing of the released (noisy item totals s_i, answered counts a_i, histogram of
(number answered k, observed score r)): the design at a public reference model and mask
(budget shares of s, a and the histogram, the bins of k and r), the proportions
p_i = s_i/a_i with their noise variance, the cell probabilities — one bin of k: item i
answered independently with probability q_i; several: k from persons' Beta propensities with
each item at its own rate (:mod:`~privirt.private.totals.answered_mask`; beta-binomial for equal
rates, fitted to the k-margins) and the answered set a random k-subset — the fit of the ability model to the
histogram under them (the parametric bootstrap: :mod:`privirt.private.totals.mcar_bootstrap`).  Complete-data
pieces (ability grid, marginal inversion, shrinkage) come from :mod:`privirt.private.totals.marginal`.  The
maths is in ``docs/totals.md`` §7.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import special, stats

from . import shrinkage
from .answered_mask import answered_mixing
from .marginal import (
    KAPPA_GRID,
    LAMBDA_GRID,
    PRIOR_LOG_TAU_SD,
    REFINE_BELOW,
    TAU_GRID,
    SpreadFit,
    ability_grid,
    equal_probability_edges,
    invert_marginals,
    item_marginals,
    reference_difficulties,
    score_distribution,
)

__all__ = [
    "answered_share", "mcar_design", "answered_counts", "ratio_proportions", "score_distribution_mcar",
    "bin_probabilities_mcar", "fit_spread_mcar", "fit_support_batch_mcar", "answered_distribution",
    "thinning_matrix", "fit_answered_icc", "MCAR_MAX_ITEMS", "mcar_release_holds", "answered_mixing",
]

#: The MCAR release is built for at most this many items: its design and fits hold the observed
#: score's distribution given (number answered, complete score), an (m + 1)³ table (m = 300: 6 s
#: and 400 MB for the design; m = 1000 would need 8 GB).  Longer tests with missing cells take
#: Algorithm 2, which handles them as they are (``privirt.private.choose``).
MCAR_MAX_ITEMS = 300

_F_GRID = np.geomspace(0.01, 0.6, 40)
#: the design's criterion is summed over these bimodalities κ of the reference model
_REFERENCE_KAPPAS = (0.0, 0.85)
#: the public reference mask of the design: mean answered share, and the intra-class
#: correlation φ of the number answered (beta-binomial) with its prior SD (``docs/totals.md`` §7.2)
REFERENCE_ANSWERED = 0.8
REFERENCE_ICC = 0.1
PRIOR_ICC_SD = 0.1
#: candidate numbers of bins in the number answered k
K_BINS = (1, 2, 3, 4)
#: grid of φ searched when fitting the number answered to the released k-margins
ICC_GRID = np.concatenate([[0.0], np.geomspace(0.002, 0.6, 80)])


# ---------------------------------------------------------------------------------------
# the score distribution when item i is answered with probability q_i
def score_distribution_mcar(beta: np.ndarray, q: np.ndarray, theta: np.ndarray,
                            dtype: type = np.float64) -> np.ndarray:
    """P(observed score = r | θ_k), r = 0..m, items answered independently: (T, Q, m + 1).

    The observed score is a sum of independent Bernoulli(q_i·logistic(θ − β_i)) (the answer
    is seen with probability q_i and correct with the Rasch probability); the Poisson-binomial
    is built one item at a time, scores outermost so that each step is a contiguous block.
    ``beta`` (T, m), ``q`` (m,) or (T, m), ``theta`` (T, Q); ``dtype`` float32 halves the
    memory traffic (bootstrap refits; about 1e-7 absolute error).
    """
    T, m = beta.shape
    Q = theta.shape[1]
    q = np.broadcast_to(np.asarray(q, dtype=float), (T, m))
    prob = (q[:, :, None] * special.expit(theta[:, None, :] - beta[:, :, None])).astype(dtype, copy=False)
    prob = np.ascontiguousarray(prob.transpose(1, 0, 2)).reshape(m, T * Q)
    dist = np.zeros((m + 1, T * Q), dtype=dtype)
    dist[0] = 1.0
    buf = np.empty((m, T * Q), dtype=dtype)
    for i in range(m):
        moved = np.multiply(dist[: i + 1], prob[i], out=buf[: i + 1])
        dist[: i + 1] -= moved
        dist[1: i + 2] += moved
    return dist.reshape(m + 1, T, Q).transpose(1, 2, 0)  # a view: scores stay outermost in memory


def bin_probabilities_mcar(beta: np.ndarray, q: np.ndarray, theta: np.ndarray, w: np.ndarray,
                           edges: np.ndarray, dtype: type = np.float64) -> np.ndarray:
    """Probability of each observed-score bin ``[edges[b], edges[b+1])``: shape (T, B)."""
    d = score_distribution_mcar(beta, q, theta, dtype).transpose(2, 0, 1)  # (m + 1, T, Q), contiguous
    pr = np.einsum("rtq,tq->tr", d, w.astype(dtype)).astype(float)
    c = np.concatenate([np.zeros((pr.shape[0], 1)), np.cumsum(pr, axis=1)], axis=1)
    return np.clip(np.diff(c[:, edges], axis=1), 0.0, 1.0)


# ---------------------------------------------------------------------------------------
# the number answered k (beta-binomial) and the score given k (a random k-subset answered)
def answered_distribution(m: int, mu: np.ndarray | float, icc: np.ndarray | float,
                          mixing: np.ndarray | None = None) -> np.ndarray:
    """P(k answered), k = 0..m: beta-binomial with mean share ``mu`` and intra-class correlation
    ``icc`` (0: binomial, independent cells), broadcast over the shapes of ``mu`` and ``icc``:
    (..., m + 1).  With ``mixing`` (:func:`~privirt.private.totals.answered_mask.answered_mixing`
    of the item answer rates, ``mu`` their mean) the number answered when each item keeps its
    own rate: the beta-binomial is that of the persons' propensities, mapped to k by ``mixing``
    (equal rates: the identity)."""
    mu, icc = np.broadcast_arrays(np.clip(np.asarray(mu, dtype=float), 1e-6, 1 - 1e-6),
                                  np.clip(np.asarray(icc, dtype=float), 0.0, 0.999))
    k = np.arange(m + 1, dtype=float)
    binom = stats.binom.pmf(k, m, mu[..., None])
    big = np.where(icc > 1e-9, 1.0 / np.maximum(icc, 1e-9) - 1.0, 1.0)[..., None]
    a, b = mu[..., None] * big, (1 - mu[..., None]) * big
    logc = special.gammaln(m + 1) - special.gammaln(k + 1) - special.gammaln(m - k + 1)
    bb = np.exp(logc + special.betaln(k + a, m - k + b) - special.betaln(a, b))
    out = np.where(icc[..., None] > 1e-9, bb, binom)
    out = out if mixing is None else out @ np.swapaxes(mixing, -1, -2)
    return out / out.sum(axis=-1, keepdims=True)


def _hypergeometric(m: int) -> np.ndarray:
    """H[k, s, r] = P(r of the s correct answers fall among k answered items) when the answered
    set is a uniformly random k-subset of the m items: (m + 1,) × 3."""
    i = np.arange(m + 1)
    return stats.hypergeom.pmf(i[None, None, :], m, i[None, :, None], i[:, None, None])


def _bin_onehot(edges: np.ndarray, m: int) -> np.ndarray:
    return (np.searchsorted(edges, np.arange(m + 1), side="right") - 1)[:, None] == np.arange(len(edges) - 1)


def _hypergeometric_cumulative(m: int) -> np.ndarray:
    """c[k, s, r] = P(observed score < r) of :func:`_hypergeometric`: (m + 1, m + 1, m + 2), built
    a slab of k at a time from a table of log binomial coefficients (the pmf of the whole
    (m + 1)³ grid through ``scipy.stats.hypergeom`` took 2.2 s at m = 200, and a second array
    as large)."""
    i = np.arange(m + 1)
    logc = special.gammaln(i + 1)
    L = logc[:, None] - logc[None, :] - np.where(i[:, None] >= i[None, :], logc[np.abs(i[:, None] - i[None, :])], 0.0)
    ok = i[:, None] >= i[None, :]  # L[a, b] = log C(a, b) where b <= a
    c = np.zeros((m + 1, m + 1, m + 2))
    s, r = i[:, None], i[None, :]
    valid_sr = ok  # r <= s
    rest = m - s  # the wrong answers
    for k in range(m + 1):
        kr = k - r  # wrong answers among the k answered
        valid = valid_sr & (kr >= 0) & (kr <= rest)
        logp = np.where(valid, L[s, r] + L[rest, np.clip(kr, 0, m)] - L[m, k], -np.inf)
        np.cumsum(np.exp(logp), axis=1, out=c[k, :, 1:])
    return c


def thinning_matrix(pk: np.ndarray, k_edges: np.ndarray, r_edges: np.ndarray,
                    cumulative: np.ndarray | None = None) -> np.ndarray:
    """A[..., s, (kb, rb)] = P(k in bin kb, observed score in bin rb | complete-data score s).

    k has distribution ``pk`` (..., m + 1) independent of the answers (MCAR), and given k the
    answered set is a uniformly random k-subset, so the observed score is hypergeometric.  The
    (k, r) cell probabilities of an ability model are its complete-data score distribution
    times A: shape (..., m + 1, K·B).  ``cumulative``: :func:`_hypergeometric_cumulative` of m,
    when the caller builds several (the design: one (m + 1)³ table, not one per candidate).
    """
    m = pk.shape[-1] - 1
    c = _hypergeometric_cumulative(m) if cumulative is None else cumulative
    Hb = np.diff(c[:, :, r_edges], axis=2)  # (k, s, B)
    W = pk[..., :, None] * _bin_onehot(k_edges, m)  # (..., k, K)
    A = np.einsum("...kK,ksb->...sKb", W, Hb)
    return A.reshape(A.shape[:-2] + (-1,))


def fit_answered_icc(hist: np.ndarray, n: int, var_h: float, mu: np.ndarray | float, k_edges: np.ndarray,
                     B: int, mixing: np.ndarray | None = None) -> np.ndarray:
    """φ of the beta-binomial number answered fitted to the k-margins of the released (k, r)
    histogram(s) ``hist`` (..., K·B), mean share ``mu``: least squares weighted by each margin's
    variance n P(1 − P) + B σ_h² over :data:`ICC_GRID`.  Shape ``hist.shape[:-1]``.  ``mixing``:
    the items' own answer rates (:func:`answered_distribution`; without it, equal rates)."""
    hist = np.asarray(hist, dtype=float)
    K = len(k_edges) - 1
    hk = hist.reshape(hist.shape[:-1] + (K, B)).sum(axis=-1)  # (..., K)
    m = int(k_edges[-1]) - 1
    mu = np.broadcast_to(np.asarray(mu, dtype=float), hk.shape[:-1])
    pk = answered_distribution(m, mu[..., None], ICC_GRID, mixing)  # (..., G, m + 1)
    Pk = pk @ _bin_onehot(k_edges, m)  # (..., G, K)
    V = n * Pk * (1 - Pk) + B * var_h + 1e-9
    nll = 0.5 * np.sum((hk[..., None, :] - n * Pk) ** 2 / V + np.log(V), axis=-1)
    return ICC_GRID[np.argmin(nll, axis=-1)]


def thinned_cell_probabilities(beta: np.ndarray, theta: np.ndarray, w: np.ndarray, A: np.ndarray) -> np.ndarray:
    """(k, r) cell probabilities (T, K·B) of the ability models (``beta`` (T, m), ``theta``/``w``
    (T, Q)) through the thinning matrix ``A`` ((m + 1, K·B) or (T, m + 1, K·B))."""
    S = np.einsum("tqr,tq->tr", score_distribution(beta, theta), w)
    if A.ndim == 2:
        return np.clip(S @ A, 0.0, 1.0)
    return np.clip(np.einsum("ts,tsc->tc", S, A), 0.0, 1.0)


# ---------------------------------------------------------------------------------------
# design at the public reference model
#: prior scale of the answered counts' spread (:func:`answered_counts`) in the units of
#: ``shrink_totals``: 1 is n·q̄(1 − q̄)·0.8, an SD of 0.8 in the items' logit answer rates (§7.3)
ANSWERED_PRIOR_SD = 1.0
#: g is searched on this grid (:func:`answered_share`)
_G_GRID = np.linspace(0.01, 0.8, 791)
#: the risk of the shrunk answered counts is tabulated at these σ_a²/A and quantile nodes of T
_RISK_RATIOS = np.geomspace(1e-3, 1e5, 25)
_RISK_NODES = 12
#: quantile nodes of the prior on the answer rates' spread the risk is averaged over
_SPREAD_NODES = 6


def answered_share(n: int, m: int, rho_t: np.ndarray | float, q: float = REFERENCE_ANSWERED,
                   icc: float = REFERENCE_ICC) -> tuple[np.ndarray, np.ndarray]:
    """(g, E): the share g of the totals' budget ρ_t spent on the answered counts, and the ratios'
    privacy error it leaves in units of the complete-data totals noise (``docs/totals.md`` §7.2).

    The centred error of β from the ratios p_i = s_i/a_i is, by the delta method at the reference
    model, σ_s² A_d + σ_a² (R·A_u + A_c/m) with σ_s² = S/(1 − g), σ_a² = S/g, S = m/(2ρ_t):
    A_d = (1 − 1/m) Σ d_i², d_i = 1/π_i′, the totals' weight; the answered counts' noise enters
    through u_i = p_i/π_i′, their mean with its full noise σ_a²/m (weight A_c = Σ (u_i − ū)²,
    what centring leaves of a common factor) and their deviations shrunk by
    :func:`answered_counts`, with the expected error R·σ_a² per coordinate left
    (:func:`answered_risk`; weight A_u = (1 − 1/m) Σ u_i² − A_c/m).  g minimises
    E = 1/(1 − g) + P(g)/g, P(g) = (R·A_u + A_c/m)/A_d; unshrunk (R = 1) P is the old
    Σ w_i p_i²/Σ w_i and g = √P/(1 + √P).  Public n, m, ρ_t and the reference mask only.
    ``rho_t`` may be an array: g and E of the same shape.
    """
    rho_t = np.asarray(rho_t, dtype=float)
    Ad, Au, _ = _reference_weights(m)
    g = _G_GRID.reshape((-1,) + (1,) * rho_t.ndim)
    va = m / (2.0 * rho_t) / g
    E = 1.0 / (1.0 - g) + (answered_risk(n, m, va, q, icc) * Au + mean_weight(n, m, va, q) / m) / Ad / g
    j = np.argmin(E, axis=0)
    return np.take(_G_GRID, j), np.take_along_axis(E, j[None], axis=0)[0]


def answered_risk(n: int, m: int, var_a: np.ndarray, q: float = REFERENCE_ANSWERED,
                  icc: float = REFERENCE_ICC) -> np.ndarray:
    """R(σ_a²): the expected squared error of the shrunk deviations of the answered counts
    (:func:`answered_counts`) per centred coordinate, over their noise variance σ_a²; 1 unshrunk.

    The centred true counts spread by sampling, A₀ = n q(1 − q)(1 − φ), plus the items' answer
    rates' spread, whose logit SD s is averaged over quantile nodes of the shrinkage's own prior
    (half-normal, scale 0.8): A = A₀ + (n q(1 − q) s)².  With x = t + e, T = Σ (x_i − x̄)² ~
    (A + σ_a²) χ²_{m−1}, k = A/(A + σ_a²) and c(T) the factor of :func:`answered_counts`,
    E[Σ (c·x_c − t_c)² | T] = T (c − k)² + (m − 1) k σ_a², averaged over nodes of T.  Tabulated
    once per (n, m) on a grid of σ_a²/A₀, interpolated in log σ_a².
    """
    ratios, R = _risk_table(int(n), int(m), float(q), float(icc))
    x = np.log(np.asarray(var_a, dtype=float) / (n * q * (1 - q) * (1 - icc)))
    return np.interp(x, np.log(ratios), R)


@functools.lru_cache(maxsize=64)
def _risk_table(n: int, m: int, q: float, icc: float) -> tuple[np.ndarray, np.ndarray]:
    if m < 2:
        return _RISK_RATIOS, np.ones(_RISK_RATIOS.size)
    A0 = n * q * (1 - q) * (1 - icc)
    z = stats.norm.ppf((np.arange(m) + 0.5) / m)
    z = (z - z.mean()) / np.linalg.norm(z - z.mean())  # a centred unit direction
    chi = stats.chi2.ppf((np.arange(_RISK_NODES) + 0.5) / _RISK_NODES, m - 1)
    # answer rates spread as the shrinkage's prior says (§7.2; equal rates under-priced the a_i)
    nodes = stats.halfnorm.ppf((np.arange(_SPREAD_NODES) + 0.5) / _SPREAD_NODES)
    spreads = shrinkage.SPREAD_PER_LOGIT * ANSWERED_PRIOR_SD * nodes
    R = np.zeros(_RISK_RATIOS.size)
    for i, ratio in enumerate(_RISK_RATIOS):
        va = ratio * A0
        for sd in spreads:
            A = A0 + (n * q * (1 - q) * sd) ** 2
            k = A / (A + va)
            T = (A + va) * chi
            c = np.array([answered_factor(n * q + math.sqrt(t) * z, n, va) for t in T])
            R[i] += (float(np.mean(T * (c - k) ** 2)) + (m - 1) * k * va) / ((m - 1) * va) / spreads.size
    return _RISK_RATIOS, R


def mean_weight(n: int, m: int, var_a: np.ndarray, q: float = REFERENCE_ANSWERED) -> np.ndarray:
    """K: the centred error of β that the answered counts' mean leaves, over its linear
    size (σ_a²/m)/(nq)²; A_c (:func:`answered_share`) where that is small.

    Evaluated exactly at the reference model rather than linearised: the mean's relative error
    δ ~ N(0, r²), r² = σ_a²/(m (nq)²), divides every p_i (the mean count clipped at 1), the
    proportions are kept in [1/(2n), 1 − 1/(2n)] and mapped to β through the reference
    abilities; K(r) = E_δ ‖centred change of β‖² / r² (Gauss–Hermite, tabulated once per
    (n, m) on a grid of r).  Where r is not small (few persons, few items, a large σ_a) the
    clipped proportions and the curvature of the inversion make K grow, which the linear A_c
    misses; beyond its peak K is held there (``docs/totals.md`` §7.2).
    """
    rel, K = _mean_table(int(n), int(m), float(q))
    r = np.sqrt(np.asarray(var_a, dtype=float) / m) / (n * q)
    return np.interp(np.log(np.clip(r, rel[0], rel[-1])), np.log(rel), K)


@functools.lru_cache(maxsize=64)
def _mean_table(n: int, m: int, q: float) -> tuple[np.ndarray, np.ndarray]:
    p, _ = _reference_marginals(m)
    theta, w = ability_grid(np.array([0.0]))
    beta0 = invert_marginals(p, theta, w)[0]
    x, wx = np.polynomial.hermite_e.hermegauss(24)
    wx = wx / wx.sum()
    rel = np.geomspace(1e-4, 3.0, 30)
    factor = np.maximum(1.0 + rel[:, None] * x[None, :], 1.0 / (n * q))  # (R, X): ā ≥ 1
    P = np.clip(p / factor[..., None], 0.5 / n, 1 - 0.5 / n).reshape(-1, m)
    B = invert_marginals(P, np.repeat(theta, P.shape[0], axis=0), np.repeat(w, P.shape[0], axis=0))
    err = B.reshape(rel.size, x.size, m) - beta0
    err -= err.mean(axis=2, keepdims=True)
    # past r ≈ 0.2 the clipped proportions bound the error and K falls: a bound that says the
    # proportions are garbage, not that a noisier mean is cheaper; K is held at its maximum
    return rel, np.maximum.accumulate((np.sum(err**2, axis=2) @ wx) / rel**2)


def _reference_weights(m: int) -> tuple[float, float, float]:
    """(A_d, A_u, A_c) of :func:`answered_share` at the reference model."""
    p, w = _reference_marginals(m)
    d2 = w  # 1/π′²
    u = p * np.sqrt(w)
    if m < 2:  # nothing left after centring: the uncentred sums (the unshrunk rule)
        return float(d2.sum()), float(np.sum(u * u)), 0.0
    Ac = float(np.sum((u - u.mean()) ** 2))
    return (1 - 1 / m) * float(d2.sum()), (1 - 1 / m) * float(np.sum(u * u)) - Ac / m, Ac


def _reference_marginals(m: int) -> tuple[np.ndarray, np.ndarray]:
    beta0 = reference_difficulties(m)
    theta, w = ability_grid(np.array([0.0]))
    p0 = item_marginals(beta0[None, :], theta, w)[0]
    e = special.expit(theta[0][None, :] - beta0[:, None])
    dpi = (e * (1 - e)) @ w[0]
    return p0, 1.0 / dpi**2


def mcar_release_holds(n_items: int) -> bool:
    """Whether the MCAR release is built for ``n_items`` items (public m; the rule that the
    release, the default method, the command line and the service all follow)."""
    return n_items <= MCAR_MAX_ITEMS


def check_mcar_items(m: int) -> None:
    """Refuse an MCAR release of more than :data:`MCAR_MAX_ITEMS` items (public m: one line)."""
    if not mcar_release_holds(m):
        raise ValueError(f'the totals estimator\'s MCAR release (missing="mcar") is built for up to '
                         f"{MCAR_MAX_ITEMS} items (its design holds an (m + 1)³ table), got {m}; for a longer "
                         "test with missing cells use privirt.private_spectral_estimate (Algorithm 2 takes missing "
                         "cells as they are)")


def mcar_design(n: int, m: int, rho: float, q: float = REFERENCE_ANSWERED, icc: float = REFERENCE_ICC,
                score_bins=None) -> tuple[float, float, np.ndarray, np.ndarray]:
    """(f, g, r_edges, k_edges): the histogram's share f of ρ, the answered counts' share g of
    the rest, and the bins of the (number answered k, observed score r) histogram, from the
    public n, m and ρ only.

    g is :func:`answered_share` at ρ_t = (1 − f)ρ.  f, the number of score bins B and of
    answered bins K minimise the predicted error of β̂ at the reference model (``docs/totals.md``
    §4 and §7.2):

        E(f) (m/2ρ) Σ_i 1/(n q π_i′)² / (1 − f)  +  tr(D C Dᵀ),

    the first term the noise of the ratios (E(f) the minimum of :func:`answered_share`), C the inverse Fisher information of
    (log τ, κ, φ) — φ the intra-class correlation of the number answered, a nuisance with
    prior SD :data:`PRIOR_ICC_SD` — from the K·B cells (K equal-probability bins of the
    beta-binomial k, B of the observed score, the answered set a random k-subset), each of
    variance n P_c(1 − P_c) + 1/(fρ), and D = ∂β/∂(log τ, κ, φ) (no φ column: φ moves β only
    through the fit).  The missing pattern is not public: it is evaluated at the reference
    mean answered share ``q`` and ``icc`` (:data:`REFERENCE_ANSWERED`, :data:`REFERENCE_ICC`).
    ``score_bins`` (a list of B) restricts the search over B (benchmarks of other designs).
    Fewer than 2 items are refused in one line (nothing to compare; the public input check
    refuses them first).
    """
    if m < 2:
        raise ValueError(f"the totals estimator's MCAR design needs at least 2 items, got {m}")
    check_mcar_items(m)
    g_f, E_f = answered_share(n, m, (1 - _F_GRID) * rho, q, icc)  # g and the ratios' error, per f
    beta0 = reference_difficulties(m)
    Bs = list(range(3, min(m + 1, 16) + 1)) if score_bins is None else [int(b) for b in score_bins]
    Ks = [K for K in K_BINS if K <= m + 1]
    total = np.zeros((len(Ks), len(Bs), _F_GRID.size))
    h, hp = 1e-3, 1e-3
    icc_pts = np.array([icc, icc - hp if icc > hp else icc, icc + hp])
    pk = answered_distribution(m, q, icc_pts)  # (3, m + 1)
    cumulative = _hypergeometric_cumulative(m)  # built once for every candidate (K, B)
    edges_ref = None
    for k0 in _REFERENCE_KAPPAS:
        lt = np.array([0.0, -h, h, 0.0, 0.0])
        kap = np.array([k0, k0, k0, max(k0 - h, 0.0), k0 + h])
        theta, w = ability_grid(lt, kappa=kap)
        B5 = np.repeat(beta0[None, :], 5, axis=0)
        S = np.einsum("tqr,tq->tr", score_distribution(B5, theta), w)  # complete-data scores (5, m + 1)
        if edges_ref is None:
            pr_obs = np.diff(np.einsum("k,s,ksr->r", pk[0], S[0], cumulative))  # observed score at the reference
            edges_ref = {B: equal_probability_edges(pr_obs, B) for B in Bs}
            kedges_ref = {K: equal_probability_edges(pk[0], K) for K in Ks}
        p0 = item_marginals(B5[:1], theta[:1], w[:1])[0]
        bet = invert_marginals(p0, theta, w)
        dk = kap[4] - kap[3]
        D = np.stack([(bet[2] - bet[1]) / (2 * h), (bet[4] - bet[3]) / dk, np.zeros(m)], axis=1)
        D -= D.mean(axis=0)
        e = special.expit(theta[0][None, :] - beta0[:, None])
        dpi = (e * (1 - e)) @ w[0]
        a = E_f * np.sum(1.0 / (n * q * dpi) ** 2) * m / (2.0 * rho)  # (F,)
        dicc = icc_pts[2] - icc_pts[1]
        for ik, K in enumerate(Ks):
            for ib, B in enumerate(Bs):
                A = thinning_matrix(pk, kedges_ref[K], edges_ref[B], cumulative)  # (3, m + 1, K·B)
                pc = S @ A[0]  # (5, K·B) at φ = icc
                pf = np.einsum("s,jsc->jc", S[0], A)  # (3, K·B) at (log τ, κ) = reference
                J = n * np.stack([(pc[2] - pc[1]) / (2 * h), (pc[4] - pc[3]) / dk,
                                  (pf[2] - pf[1]) / dicc], axis=1)
                V = n * pc[0] * (1 - pc[0]) + 1.0 / (_F_GRID[:, None] * rho) + 1e-12  # (F, K·B)
                info = np.einsum("ci,fc,cj->fij", J, 1.0 / V, J) + np.diag(
                    [1.0 / PRIOR_LOG_TAU_SD**2, 1.0, 1.0 / PRIOR_ICC_SD**2])
                C = np.linalg.inv(info)
                total[ik, ib] += a / (1 - _F_GRID) + np.einsum("ij,fjk,ik->f", D, C, D)
    ik, ib, jf = np.unravel_index(int(np.argmin(total)), total.shape)
    return float(_F_GRID[jf]), float(g_f[jf]), edges_ref[Bs[ib]], kedges_ref[Ks[ik]]


# ---------------------------------------------------------------------------------------
# the proportions and their noise
def answered_counts(a: np.ndarray, n: int, var_a: float) -> tuple[np.ndarray, float]:
    """The noisy answered counts shrunk toward their mean, and the noise variance left in each.

    Under MCAR with a common answer rate the a_i differ only by sampling (≈ n q(1 − q)), often
    far less than their noise σ_a²; used as they come, their noise entered every ratio s_i/a_i
    (issue 26's corner n = 2000, m = 5, ε = 0.3).  The deviations from the (unshrunk) mean are
    multiplied by the totals' empirical-Bayes factor c of
    :func:`~privirt.private.totals.shrinkage.shrink_totals` (the same model: a spread of
    answer rates plus sampling against the known noise; c → 1 where the rates clearly differ);
    the noise variance left is σ_a²(c + (1 − c)/m): the shrunk deviations' and the mean's
    (``docs/totals.md`` §7.3 step 1).  ``a`` clipped to [1, n] first.
    """
    a = np.clip(np.asarray(a, dtype=float), 1.0, float(n))
    if not var_a > 0 or a.size < 2:
        return a, float(max(var_a, 0.0))
    c = answered_factor(a, n, var_a)
    return np.clip(a.mean() + c * (a - a.mean()), 1.0, float(n)), float(var_a * (c + (1.0 - c) / a.size))


def answered_factor(a: np.ndarray, n: int, var_a: float) -> float:
    """The empirical-Bayes factor c of :func:`answered_counts`: ``shrink_totals`` with the
    prior scale :data:`ANSWERED_PRIOR_SD`."""
    return float(shrinkage.shrink_totals(a, n, var_a, prior_sd=ANSWERED_PRIOR_SD)[1])


def ratio_proportions(s: np.ndarray, a: np.ndarray, n: int, var_s: float, var_a: float
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n·p, q, v): the ratios on the totals scale, the answered shares, and each item's noise
    variance of n·p_i beyond complete-data sampling, for :func:`privirt.private.totals.shrinkage.shrink_totals`.

    The answered counts are first shrunk toward their mean (:func:`answered_counts`, which also
    gives the noise variance σ_a′² left in them); p_i = s_i/a_i, q_i = a_i/n.  n·p_i is returned
    as it is, not clipped into (0, 1): the shrinkage's likelihood takes it as Gaussian with the
    variance below, and clipped values made a noise-dominated spread look smaller than its
    prior (``docs/totals.md`` §7.3 step 1; the shrinkage brings proportions into the range
    itself).  Var(p_i) ≈ (σ_s² + p_i²σ_a′²)/a_i² + p_i(1 − p_i)/a_i (privacy noise by the delta
    method, sampling among those who answered; p_i here clipped into (0, 1) by half a count);
    ``shrink_totals`` adds n·p(1 − p) itself, so v_i = n²·Var p_i − n·p_i(1 − p_i), floored at
    the privacy part.  One per item: pooled (their mean, before session 23) one item answered by
    few persons made every item's noise look large and every difficulty was shrunk hard.
    """
    a, var_a = answered_counts(a, n, var_a)
    s = np.asarray(s, dtype=float)
    p = np.clip(s / a, 0.5 / a, 1 - 0.5 / a)
    priv = (var_s + p * p * var_a) / a**2
    v = n * n * (priv + p * (1 - p) / a) - n * p * (1 - p)
    return n * s / a, a / n, np.maximum(v, n * n * priv)


# ---------------------------------------------------------------------------------------
# the ability model fitted to the observed-score histogram
#: the MCAR fit's first grid of κ and the top of its refined κ (the complete path's grid and
#: 0.95; other values only for the benchmark's comparisons, ``docs/totals.md`` §7.4)
MCAR_KAPPA_GRID = KAPPA_GRID
MCAR_KAPPA_TOP = 0.95
#: which grid point gives β̂: "nearest" to the posterior mean of (log τ, κ, λ) (the rule, as on
#: the complete path), "mode" (the posterior mode) or "mean" (the posterior mean of β itself) —
#: the last two only for the benchmark's comparisons (``docs/totals.md`` §7.4, session 12: not adopted)
MCAR_POINT = "nearest"


def _point(post, beta, lt, kap, lam, nll):
    """β̂ (R, m) from posteriors ``post`` (R, T) over the grid's β (R, T, m), by :data:`MCAR_POINT`."""
    if MCAR_POINT == "mean":
        return np.einsum("rt,rtm->rm", post, beta)
    j = np.argmin(nll, axis=1) if MCAR_POINT == "mode" else _nearest_to_mean(post, lt, kap, lam)
    return beta[np.arange(beta.shape[0]), j]


def _nearest_to_mean(post, lt, kap, lam):
    d = (((lt - (post @ lt)[:, None]) / 0.2) ** 2 + ((kap - (post @ kap)[:, None]) / 0.1) ** 2
         + ((lam - (post @ lam)[:, None]) / 0.1) ** 2)
    return np.argmin(d, axis=1)


def _posterior(p, q, hist, n, var_h, edges, lt, kap, lam, A=None):
    theta, w = ability_grid(lt, kappa=kap, lam=lam)
    beta = invert_marginals(p, theta, w)
    P = bin_probabilities_mcar(beta, q, theta, w, edges) if A is None else thinned_cell_probabilities(beta, theta, w, A)
    V = n * P * (1.0 - P) + var_h + 1e-9
    nll = 0.5 * np.sum((hist[None, :] - n * P) ** 2 / V + np.log(V), axis=1) + 0.5 * (lt / PRIOR_LOG_TAU_SD) ** 2
    post = np.exp(-(nll - nll.min()))
    return post / post.sum(), beta, nll


def fit_spread_mcar(p: np.ndarray, q: np.ndarray, hist: np.ndarray, n: int, var_h: float,
                    edges: np.ndarray, *, support=None, A: np.ndarray | None = None) -> SpreadFit:
    """The ability model fitted to the noisy observed-score histogram under MCAR, and β.

    As :func:`privirt.private.totals.marginal.fit_spread` (normal-mixture grid over (τ, κ), prior on log τ,
    one refinement with skewed shapes when the posterior is concentrated, β at the grid point
    nearest the posterior mean; :data:`MCAR_POINT`), with the bin probabilities of the observed score when item i
    is answered independently with probability ``q[i]``; ``p`` are the proportions correct among
    those who answered (the full-population marginals under MCAR).  With a thinning matrix
    ``A`` (:func:`thinning_matrix`) ``hist`` is the (k, r) histogram (K·B cells, k-major) and
    the cells are modelled as the number answered k from the fitted beta-binomial and the
    answered set a random k-subset.
    """
    hist = np.asarray(hist, dtype=float)
    if support is None:
        lt = np.repeat(np.log(TAU_GRID), MCAR_KAPPA_GRID.size)
        kap = np.tile(MCAR_KAPPA_GRID, TAU_GRID.size)
        lam = np.full(lt.size, 0.5)
        post, beta, nll = _posterior(p, q, hist, n, var_h, edges, lt, kap, lam, A)
        keep = post >= 1e-6 * post.max()
        if np.count_nonzero(keep) <= REFINE_BELOW:
            dlt = np.diff(np.log(TAU_GRID))[0]
            lt_f = np.arange(lt[keep].min() - dlt, lt[keep].max() + dlt + 1e-9, dlt / 4)
            kap_f = np.unique(np.clip(np.linspace(kap[keep].min() - 0.3, kap[keep].max() + 0.3, 9), 0.0,
                                      MCAR_KAPPA_TOP))
            g = np.array(np.meshgrid(lt_f, kap_f, LAMBDA_GRID, indexing="ij")).reshape(3, -1)
            lt, kap, lam = g[:, (g[1] > 0) | (g[2] == 0.5)]
            post, beta, nll = _posterior(p, q, hist, n, var_h, edges, lt, kap, lam, A)
    else:
        lt, kap, lam = support
        post, beta, nll = _posterior(p, q, hist, n, var_h, edges, lt, kap, lam, A)
    bc = beta - beta.mean(axis=1, keepdims=True)
    b = _point(post[None, :], bc[None], lt, kap, lam, nll[None, :])[0]
    return SpreadFit(beta=b, tau=float(post @ np.exp(lt)), kappa_mean=float(post @ kap),
                     log_tau=lt, kappa=kap, lam=lam, weights=post, map_index=int(np.argmin(nll)))


#: at most this many (replicate × grid point × node × score) values are held at once
_BATCH_CELLS = 2_000_000


def fit_support_batch_mcar(p: np.ndarray, q: np.ndarray, hist: np.ndarray, n: int, var_h: float,
                           edges: np.ndarray, support, initial: np.ndarray | None = None,
                           A: np.ndarray | None = None) -> np.ndarray:
    """:func:`fit_spread_mcar` on the fixed grid ``support`` for R data sets at once: β (R, m).

    ``p``, ``q`` (R, m) and ``hist`` (R, B); ``initial`` (T, m) starts the Newton iterations;
    the score distributions are computed in float32 (about 1e-7 absolute error).  ``A``
    (R, m + 1, K·B): each data set's thinning matrix (the (k, r) model, ``hist`` (R, K·B)).
    """
    lt, kap, lam = support
    theta, w = ability_grid(lt, kappa=kap, lam=lam)
    p, q, hist = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (p, q, hist))
    R, m = p.shape
    T, Q = theta.shape
    prior = 0.5 * (lt / PRIOR_LOG_TAU_SD) ** 2
    out = np.empty((R, m))
    step = max(1, _BATCH_CELLS // (T * Q * (m + 1)))
    for a0 in range(0, R, step):
        r = min(R, a0 + step) - a0
        th, ww = np.tile(theta, (r, 1)), np.tile(w, (r, 1))
        init = None if initial is None else np.tile(initial, (r, 1))
        beta = invert_marginals(np.repeat(p[a0:a0 + r], T, axis=0), th, ww, initial=init, tol=1e-6)
        if A is None:
            P = bin_probabilities_mcar(beta, np.repeat(q[a0:a0 + r], T, axis=0), th, ww, edges,
                                       dtype=np.float32).reshape(r, T, -1)
        else:
            P = thinned_cell_probabilities(beta, th, ww, np.repeat(A[a0:a0 + r], T, axis=0)).reshape(r, T, -1)
        V = n * P * (1.0 - P) + var_h + 1e-9
        res = hist[a0:a0 + r, None, :] - n * P
        nll = 0.5 * np.sum(res * res / V + np.log(V), axis=2) + prior[None, :]
        post = np.exp(-(nll - nll.min(axis=1, keepdims=True)))
        post /= post.sum(axis=1, keepdims=True)
        bsel = _point(post, beta.reshape(r, T, m), lt, kap, lam, nll)
        out[a0:a0 + r] = bsel - bsel.mean(axis=1, keepdims=True)
    return out
