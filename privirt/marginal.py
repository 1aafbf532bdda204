"""Marginal Rasch maths for the private-totals estimator (pure post-processing).

An ability distribution on a fixed standardised grid, the item marginals it implies and
their inversion, the raw-score distribution (Poisson-binomial per grid node), the fit of the
ability spread to a noisy binned score histogram, the James–Stein shrinkage of the noisy
totals, and the budget split / bin layout derived at a public reference model.  The maths is
in ``docs/totals.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

__all__ = [
    "Z_NODES",
    "TAU_GRID",
    "ability_grid",
    "item_marginals",
    "invert_marginals",
    "score_distribution",
    "bin_probabilities",
    "reference_difficulties",
    "choose_bins",
    "optimal_split",
    "shrink_totals",
    "SpreadFit",
    "fit_spread",
]

#: standardised ability grid (abilities are θ = τ·z; the weights carry the shape)
Z_NODES = np.linspace(-5.0, 5.0, 31)
#: spreads τ (SD of the abilities, logits) over which the normal model is averaged
TAU_GRID = np.exp(np.linspace(math.log(0.1), math.log(6.0), 25))
#: prior on log τ: N(0, PRIOR_LOG_TAU_SD²) — abilities of SD about 1 logit, weakly
PRIOR_LOG_TAU_SD = 0.7
#: prior SD of the two shape coefficients of the flexible ability model
PRIOR_SHAPE_SD = 1.0

_HE3 = (Z_NODES**3 - 3 * Z_NODES) / 6.0
_HE4 = (Z_NODES**4 - 6 * Z_NODES**2 + 3) / 24.0


def ability_grid(log_tau: np.ndarray, shape: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Nodes θ and weights w of the ability distribution, one row per parameter set.

    ``log w_k = −z_k²/2 + a₃ He₃(z_k)/6 + a₄ He₄(z_k)/24`` (normalised), ``θ_k = τ z_k``;
    ``shape = None`` is the normal model (a₃ = a₄ = 0).
    """
    log_tau = np.atleast_1d(np.asarray(log_tau, dtype=float))
    logw = np.broadcast_to(-0.5 * Z_NODES**2, (log_tau.size, Z_NODES.size)).copy()
    if shape is not None:
        shape = np.atleast_2d(shape)
        logw += shape[:, :1] * _HE3 + shape[:, 1:2] * _HE4
    logw -= logw.max(axis=1, keepdims=True)
    w = np.exp(logw)
    w /= w.sum(axis=1, keepdims=True)
    theta = np.exp(log_tau)[:, None] * Z_NODES[None, :]
    return theta, w


def item_marginals(beta: np.ndarray, theta: np.ndarray, w: np.ndarray) -> np.ndarray:
    """P(X_i = 1) = Σ_k w_k logistic(θ_k − β_i); ``beta`` (T, m), ``theta``/``w`` (T, Q)."""
    return np.einsum("tmq,tq->tm", special.expit(theta[:, None, :] - beta[:, :, None]), w)


def invert_marginals(p: np.ndarray, theta: np.ndarray, w: np.ndarray, iters: int = 60) -> np.ndarray:
    """β (T, m) with item marginals equal to ``p`` (m,) under each of the T ability models.

    The marginal is strictly decreasing in β, so a safeguarded Newton iteration (bracketed,
    falling back to bisection) converges; ``p`` must lie in (0, 1).
    """
    T = theta.shape[0]
    p = np.broadcast_to(np.asarray(p, dtype=float), (T, np.size(p)))
    lo = np.full(p.shape, -40.0)
    hi = np.full(p.shape, 40.0)
    scale = np.sqrt(1.0 + (np.sum(w * theta**2, axis=1) / 2.9))[:, None]
    b = np.clip(-special.logit(p) * scale + np.sum(w * theta, axis=1)[:, None], -39.0, 39.0)
    for _ in range(iters):
        e = special.expit(theta[:, None, :] - b[:, :, None])
        f = np.einsum("tmq,tq->tm", e, w) - p
        d = np.einsum("tmq,tq->tm", e * (1.0 - e), w)
        lo = np.where(f > 0, b, lo)  # marginal too high: β must grow
        hi = np.where(f > 0, hi, b)
        step = f / np.maximum(d, 1e-300)
        nb = b + step
        bad = ~((nb > lo) & (nb < hi))
        nb = np.where(bad, 0.5 * (lo + hi), nb)
        if np.max(np.abs(nb - b)) < 1e-10:
            b = nb
            break
        b = nb
    return b


def score_distribution(beta: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """P(raw score = r | θ_k) for r = 0..m: shape (T, Q, m + 1) (Poisson-binomial)."""
    T, m = beta.shape
    Q = theta.shape[1]
    prob = special.expit(theta[:, None, :] - beta[:, :, None])  # (T, m, Q)
    dist = np.zeros((T, Q, m + 1))
    dist[:, :, 0] = 1.0
    for i in range(m):
        p = prob[:, i, :, None]
        nxt = dist * (1.0 - p)
        nxt[:, :, 1:] += dist[:, :, :-1] * p
        dist = nxt
    return dist


def bin_probabilities(beta: np.ndarray, theta: np.ndarray, w: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Probability of each score bin ``[edges[b], edges[b+1])``: shape (T, B)."""
    pr = np.einsum("tqr,tq->tr", score_distribution(beta, theta), w)
    c = np.concatenate([np.zeros((pr.shape[0], 1)), np.cumsum(pr, axis=1)], axis=1)
    return np.clip(np.diff(c[:, edges], axis=1), 0.0, 1.0)


# ---------------------------------------------------------------------------------------
# design at the public reference model (β ~ N(0, 1) quantiles, θ ~ N(0, 1))
def reference_difficulties(m: int) -> np.ndarray:
    """Normal quantiles Φ⁻¹((i − ½)/m): the reference items of the design calculations."""
    return stats.norm.ppf((np.arange(m) + 0.5) / m)


def choose_bins(n: int, m: int, rho_hist: float) -> np.ndarray:
    """Bin edges of the released raw-score histogram, from public quantities only.

    B = clip(⌊n ρ_h⌋, 3, m + 1) bins (the largest number for which the per-bin noise variance
    1/ρ_h stays below the per-bin sampling variance ≈ n/B), cut at equal-probability points of
    the reference score distribution.
    """
    B = int(min(m + 1, max(3, math.floor(n * rho_hist))))
    if B >= m + 1:
        return np.arange(m + 2)
    theta, w = ability_grid(np.zeros(1))
    pr = np.einsum("tqr,tq->tr", score_distribution(reference_difficulties(m)[None, :], theta), w)[0]
    cdf = np.cumsum(pr)
    cuts = [0]
    for b in range(1, B):
        r = int(np.searchsorted(cdf, b / B)) + 1
        r = min(max(r, cuts[-1] + 1), m + 1 - (B - b))
        cuts.append(r)
    cuts.append(m + 1)
    return np.asarray(cuts)


def optimal_split(n: int, m: int, rho: float) -> tuple[float, np.ndarray]:
    """The histogram's share f of ρ minimising the predicted error, and the bin edges.

    With σ_s² = m/(2(1−f)ρ) on the totals and σ_h² = 1/(fρ) on the bins, the noise part of
    E‖β̂ − β‖² is a/(1−f) + b/f (``docs/totals.md``) with
    a = (m/2) Σ_i 1/(n π_i')², b = ‖∂β/∂τ‖² / (n² Σ_b (∂P_b/∂τ)²), both per unit ρ and both
    evaluated at the reference model; the minimiser is f* = √b/(√a + √b).
    """
    f = 0.1
    edges = choose_bins(n, m, f * rho)
    beta0 = reference_difficulties(m)[None, :]
    h = 1e-4
    for _ in range(3):
        theta, w = ability_grid(np.array([-h, 0.0, h]))
        p0 = item_marginals(np.repeat(beta0, 3, axis=0), theta, w)[1]
        bet = invert_marginals(p0, theta, w)  # β(τ) keeping the marginals fixed
        dbeta = (bet[2] - bet[0]) / (2 * h)  # per unit log τ
        dbeta -= dbeta.mean()
        P = bin_probabilities(np.repeat(beta0, 3, axis=0), theta, w, edges)
        dP = (P[2] - P[0]) / (2 * h)
        e = special.expit(theta[1][None, :] - beta0[0][:, None])
        dpi = (e * (1 - e)) @ w[1]
        a = 0.5 * m * np.sum(1.0 / dpi**2)
        b = np.sum(dbeta**2) / max(np.sum(dP**2), 1e-12)
        f_new = float(math.sqrt(b) / (math.sqrt(a) + math.sqrt(b)))
        f_new = min(max(f_new, 0.01), 0.5)
        new_edges = choose_bins(n, m, f_new * rho)
        done = np.array_equal(new_edges, edges) and abs(f_new - f) < 1e-9
        f, edges = f_new, new_edges
        if done:
            break
    return f, edges


# ---------------------------------------------------------------------------------------
# shrinkage of the totals
def shrink_totals(
    totals: np.ndarray, n: int, var_noise: float, *, alpha: float = 0.01, spread_bound: float = 3.0
) -> tuple[np.ndarray, float, dict]:
    """Positive-part James–Stein shrinkage of the centred noisy totals (known variance).

    Returns the shrunk totals, the factor c ∈ [0, 1] and diagnostics.  c = 0 (equal
    difficulties) unless ‖s_c‖²/v exceeds the (1 − α) quantile of χ²_{m−1} (the spread is
    detectably above the noise); c is capped by A/(A + v), the Bayes factor under the largest
    plausible spread of difficulties ``spread_bound`` (A = (n·spread_bound/4)²).
    """
    s = np.asarray(totals, dtype=float)
    m = s.size
    d = m - 1
    pbar = min(max(s.mean() / n, 0.5 / n), 1 - 0.5 / n)
    p = np.clip(s / n, 0.5 / n, 1 - 0.5 / n)
    v = var_noise + n * float(np.mean(p * (1 - p)))
    sc = s - s.mean()
    T = float(sc @ sc) / v
    crit = float(stats.chi2.ppf(1.0 - alpha, d))
    A = (n * spread_bound / 4.0) ** 2
    cap = A / (A + v)
    if T <= crit or T <= 0:
        c = 0.0
    else:
        c = max(0.0, 1.0 - (max(d - 2, 1)) / T)
        c = min(c, cap)
    shrunk = n * pbar + c * sc
    return shrunk, c, {"chi2": T, "chi2_critical": crit, "var_totals": v, "cap": cap}


# ---------------------------------------------------------------------------------------
# the ability model fitted to the histogram
@dataclass
class SpreadFit:
    """The fitted ability model and the difficulties it maps the totals to."""

    beta: np.ndarray  # centred, (m,)
    model: str  # "normal" (averaged over τ) or "flexible" (τ, a₃, a₄ at the MAP)
    tau: float  # posterior mean of τ (normal) or MAP τ (flexible)
    log_tau: np.ndarray  # (T,) the grid or the one MAP value
    weights: np.ndarray  # posterior weights over log_tau (sums to 1)
    shape: np.ndarray | None  # (a₃, a₄) of the flexible model
    aic: dict


def _nll(hist, n, var_h, P):
    V = n * P * (1.0 - P) + var_h + 1e-9
    r = hist[None, :] - n * P
    return 0.5 * np.sum(r * r / V + np.log(V), axis=1)


def fit_spread(
    p: np.ndarray, hist: np.ndarray, n: int, var_hist: float, edges: np.ndarray, *, flexible: bool = True
) -> SpreadFit:
    """Fit the ability distribution to the noisy histogram and map the marginals ``p`` to β.

    Normal model: the Gaussian approximate likelihood of the histogram (sampling plus the known
    noise variance) times the prior on log τ, on :data:`TAU_GRID`; β is the posterior mean of
    β(τ) (centred).  When there are ≥ 6 bins the flexible model (τ, a₃, a₄) is also fitted at
    its MAP, and chosen when its AIC is lower.
    """
    hist = np.asarray(hist, dtype=float)
    lt = np.log(TAU_GRID)
    theta, w = ability_grid(lt)
    beta = invert_marginals(p, theta, w)
    P = bin_probabilities(beta, theta, w, edges)
    nll = _nll(hist, n, var_hist, P) + 0.5 * (lt / PRIOR_LOG_TAU_SD) ** 2
    post = np.exp(-(nll - nll.min()))
    post /= post.sum()
    bc = beta - beta.mean(axis=1, keepdims=True)
    k = int(np.argmin(nll))
    fit = SpreadFit(
        beta=post @ bc, model="normal", tau=float(post @ TAU_GRID), log_tau=lt, weights=post,
        shape=None, aic={"normal": float(2 * nll[k] + 2)},
    )
    if not flexible or len(edges) - 1 < 6:
        return fit

    def obj(x):
        th, ww = ability_grid(x[:1], x[None, 1:])
        b = invert_marginals(p, th, ww)
        Pb = bin_probabilities(b, th, ww, edges)
        return float(_nll(hist, n, var_hist, Pb)[0] + 0.5 * (x[0] / PRIOR_LOG_TAU_SD) ** 2
                     + 0.5 * (x[1] ** 2 + x[2] ** 2) / PRIOR_SHAPE_SD**2)

    res = optimize.minimize(obj, np.array([lt[k], 0.0, 0.0]), method="Nelder-Mead",
                            options={"xatol": 1e-4, "fatol": 1e-6, "maxiter": 400})
    aic_flex = float(2 * res.fun + 6)
    fit.aic["flexible"] = aic_flex
    if aic_flex < fit.aic["normal"]:
        th, ww = ability_grid(res.x[:1], res.x[None, 1:])
        b = invert_marginals(p, th, ww)[0]
        fit.beta = b - b.mean()
        fit.model = "flexible"
        fit.tau = float(math.exp(res.x[0]))
        fit.log_tau = res.x[:1].copy()
        fit.weights = np.ones(1)
        fit.shape = res.x[1:].copy()
    return fit
