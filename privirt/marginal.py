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
    "optimal_split",
    "shrink_totals",
    "SpreadFit",
    "fit_spread",
]

#: standardised ability grid (abilities are θ = τ·z; the weights carry the shape)
Z_NODES = np.linspace(-5.0, 5.0, 41)
#: spreads τ (SD of the abilities, logits) over which the normal model is averaged
TAU_GRID = np.exp(np.linspace(math.log(0.1), math.log(6.0), 21))
#: prior on log τ: N(0, PRIOR_LOG_TAU_SD²) — abilities of SD about 1 logit, weakly
PRIOR_LOG_TAU_SD = 0.7
#: prior SD of the two shape coefficients of the flexible ability model
PRIOR_SHAPE_SD = 1.0

_HE3 = (Z_NODES**3 - 3 * Z_NODES) / 6.0
_HE4 = (Z_NODES**4 - 6 * Z_NODES**2 + 3) / 24.0
_Z_EDGES = np.concatenate([[-np.inf], 0.5 * (Z_NODES[1:] + Z_NODES[:-1]), [np.inf]])
#: bimodality κ of the mixture ability model, averaged over with equal prior weight
KAPPA_GRID = np.array([0.0, 0.4, 0.7, 0.85, 0.93])


def ability_grid(
    log_tau: np.ndarray, shape: np.ndarray | None = None, kappa: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Nodes θ and weights w of the ability distribution, one row per parameter set.

    ``θ_k = τ z_k``.  ``shape = None``: a symmetric two-component normal mixture in z with
    components at ±√κ and SD √(1 − κ) (variance 1; κ = 0 is the normal model, κ → 1 two
    points), weights from the mixture's probability of each grid cell.  ``shape = (a₃, a₄)``:
    ``log w_k = −z_k²/2 + a₃ He₃(z_k)/6 + a₄ He₄(z_k)/24`` (the flexible model).
    """
    log_tau = np.atleast_1d(np.asarray(log_tau, dtype=float))
    T = log_tau.size
    if shape is not None:
        logw = np.broadcast_to(-0.5 * Z_NODES**2, (T, Z_NODES.size)).copy()
        shape = np.atleast_2d(shape)
        logw += shape[:, :1] * _HE3 + shape[:, 1:2] * _HE4
        logw -= logw.max(axis=1, keepdims=True)
        w = np.exp(logw)
    else:
        k = np.zeros(T) if kappa is None else np.broadcast_to(np.asarray(kappa, dtype=float), (T,))
        loc = np.sqrt(k)[:, None]
        sd = np.sqrt(1.0 - k)[:, None]
        cdf = 0.5 * (special.ndtr((_Z_EDGES[None, :] - loc) / sd) + special.ndtr((_Z_EDGES[None, :] + loc) / sd))
        w = np.diff(cdf, axis=1)
    w = w / w.sum(axis=1, keepdims=True)
    theta = np.exp(log_tau)[:, None] * Z_NODES[None, :]
    return theta, w


def item_marginals(beta: np.ndarray, theta: np.ndarray, w: np.ndarray) -> np.ndarray:
    """P(X_i = 1) = Σ_k w_k logistic(θ_k − β_i); ``beta`` (T, m), ``theta``/``w`` (T, Q)."""
    return np.einsum("tmq,tq->tm", special.expit(theta[:, None, :] - beta[:, :, None]), w)


def invert_marginals(p: np.ndarray, theta: np.ndarray, w: np.ndarray, iters: int = 40) -> np.ndarray:
    """β (T, m) with item marginals equal to ``p`` (m,) under each of the T ability models.

    The marginal is strictly decreasing in β, so a safeguarded Newton iteration (bracketed,
    falling back to bisection) converges; ``p`` must lie in (0, 1).
    """
    T = theta.shape[0]
    p = np.broadcast_to(np.asarray(p, dtype=float), (T, np.size(p)))
    target = special.logit(p)
    lo = np.full(p.shape, -60.0)
    hi = np.full(p.shape, 60.0)
    mean = np.sum(w * theta, axis=1)[:, None]
    var = np.sum(w * theta**2, axis=1)[:, None] - mean**2
    b = np.clip(mean - target * np.sqrt(1.0 + np.pi * var / 8.0), -59.0, 59.0)
    for _ in range(iters):
        e = special.expit(theta[:, None, :] - b[:, :, None])
        pi = np.clip(np.einsum("tmq,tq->tm", e, w), 1e-300, 1.0 - 1e-16)
        f = special.logit(pi) - target  # Newton on the logit scale: nearly linear in β
        d = np.einsum("tmq,tq->tm", e * (1.0 - e), w) / (pi * (1.0 - pi))
        lo = np.where(f > 0, b, lo)  # marginal too high: β must grow
        hi = np.where(f > 0, hi, b)
        nb = b + f / np.maximum(d, 1e-300)
        bad = (nb < lo) | (nb > hi)
        nb = np.where(bad, 0.5 * (lo + hi), nb)
        if np.max(np.abs(nb - b)) < 1e-8:
            return nb
        b = nb
    return b


def score_distribution(beta: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """P(raw score = r | θ_k) for r = 0..m: shape (T, Q, m + 1) (Poisson-binomial)."""
    T, m = beta.shape
    Q = theta.shape[1]
    prob = special.expit(theta[:, None, :] - beta[:, :, None])  # (T, m, Q)
    dist = np.zeros((T, Q, m + 1))
    dist[:, :, 0] = 1.0
    for i in range(m):  # after i items only scores 0..i are possible
        p = prob[:, i, :, None]
        head = dist[:, :, : i + 1]
        moved = head * p
        head -= moved
        dist[:, :, 1 : i + 2] += moved
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


def _equal_probability_edges(pr: np.ndarray, B: int) -> np.ndarray:
    """Contiguous score bins (B of them) cut at equal-probability points of ``pr``."""
    m = pr.size - 1
    if B >= m + 1:
        return np.arange(m + 2)
    cdf = np.cumsum(pr)
    cuts = [0]
    for b in range(1, B):
        r = int(np.searchsorted(cdf, b / B)) + 1
        r = min(max(r, cuts[-1] + 1), m + 1 - (B - b))
        cuts.append(r)
    cuts.append(m + 1)
    return np.asarray(cuts)


_F_GRID = np.geomspace(0.01, 0.6, 40)
#: the design is optimised for the sum of the predicted errors at these bimodalities κ
REFERENCE_KAPPAS = (0.0, 0.85)


def optimal_split(n: int, m: int, rho: float) -> tuple[float, np.ndarray]:
    """The histogram's share f of ρ and the bins minimising the predicted error of β̂.

    At the public reference model (items at normal quantiles, abilities of the mixture model
    with τ = 1, κ = 0) the predicted E‖β̂ − β‖² is (``docs/totals.md``)

        Σ_i (n π_i(1−π_i) + σ_s²)/(n π_i')²  +  tr(D C Dᵀ),

    σ_s² = m/(2(1−f)ρ), σ_h² = 1/(fρ), D = ∂β/∂(log τ, κ) at fixed marginals and C the
    inverse Fisher information of (log τ, κ) from the B bins, each with variance
    n P_b(1 − P_b) + σ_h².  f runs over a grid in [0.01, 0.6] and B over 3 … min(m + 1, 16)
    equal-probability bins; only n, m and ρ enter.
    """
    beta0 = reference_difficulties(m)
    Bs = list(range(3, min(m + 1, 16) + 1))
    total = np.zeros((len(Bs), _F_GRID.size))
    pr_ref = None
    for k0 in REFERENCE_KAPPAS:
        h = 1e-3
        lt = np.array([0.0, -h, h, 0.0, 0.0])
        kap = np.array([k0, k0, k0, k0 - h if k0 > 0 else k0, k0 + h]) + np.array([0, 0, 0, 0, 0 if k0 > 0 else h])
        theta, w = ability_grid(lt, kappa=kap)
        B5 = np.repeat(beta0[None, :], 5, axis=0)
        pr = np.einsum("tqr,tq->tr", score_distribution(B5, theta), w)
        pr_ref = pr[0] if pr_ref is None else pr_ref
        p0 = item_marginals(B5[:1], theta[:1], w[:1])[0]
        bet = invert_marginals(p0, theta, w)
        dk = kap[4] - kap[3]
        D = np.stack([(bet[2] - bet[1]) / (2 * h), (bet[4] - bet[3]) / dk], axis=1)
        D -= D.mean(axis=0)
        dpr = np.stack([(pr[2] - pr[1]) / (2 * h), (pr[4] - pr[3]) / dk], axis=1)  # (m+1, 2)
        e = special.expit(theta[0][None, :] - beta0[:, None])
        dpi = (e * (1 - e)) @ w[0]
        samp = np.sum(n * p0 * (1 - p0) / (n * dpi) ** 2)
        a = np.sum(1.0 / (n * dpi) ** 2) * m / (2.0 * rho)
        c = np.concatenate([[0.0], np.cumsum(pr[0])])
        cd = np.concatenate([np.zeros((1, 2)), np.cumsum(dpr, axis=0)])
        for i, B in enumerate(Bs):
            edges = _equal_probability_edges(pr_ref, B)
            Pb = np.diff(c[edges])
            J = n * np.diff(cd[edges], axis=0)  # (B, 2)
            for j, f in enumerate(_F_GRID):
                V = n * Pb * (1 - Pb) + 1.0 / (f * rho)
                info = (J / V[:, None]).T @ J + np.diag([1.0 / PRIOR_LOG_TAU_SD**2, 1.0])
                total[i, j] += a / (1 - f) + samp + float(np.trace(D @ np.linalg.solve(info, D.T)))
    i, j = np.unravel_index(int(np.argmin(total)), total.shape)
    best = (0.0, float(_F_GRID[j]), _equal_probability_edges(pr_ref, Bs[i]))
    return best[1], best[2]


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
    model: str  # "mixture" (averaged over τ, κ) or "flexible" (τ, a₃, a₄ at the MAP)
    tau: float  # posterior mean of τ (mixture) or MAP τ (flexible)
    log_tau: np.ndarray  # (T,) the grid or the one MAP value
    weights: np.ndarray  # posterior weights over the grid (sums to 1)
    shape: np.ndarray | None  # (a₃, a₄) of the flexible model
    aic: dict
    kappa: np.ndarray | None = None  # (T,) bimodality of each grid point
    map_index: int = 0

    def support(self, tol: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
        """The grid points whose posterior weight exceeds ``tol`` × the largest (mixture model)."""
        keep = self.weights >= tol * self.weights.max()
        return self.log_tau[keep], self.kappa[keep]


def _nll(hist, n, var_h, P):
    V = n * P * (1.0 - P) + var_h + 1e-9
    r = hist[None, :] - n * P
    return 0.5 * np.sum(r * r / V + np.log(V), axis=1)


def fit_spread(
    p: np.ndarray, hist: np.ndarray, n: int, var_hist: float, edges: np.ndarray, *, flexible: bool = True,
    support: tuple[np.ndarray, np.ndarray] | None = None,
) -> SpreadFit:
    """Fit the ability distribution to the noisy histogram and map the marginals ``p`` to β.

    Mixture model: the Gaussian approximate likelihood of the histogram (sampling plus the known
    noise variance) times the prior on log τ, on the grid :data:`TAU_GRID` × :data:`KAPPA_GRID`
    (or the points ``support``); β is the posterior mean of β(τ, κ) (centred).  When there are ≥ 6 bins the flexible model (τ, a₃, a₄) is also fitted at
    its MAP, and chosen when its AIC is lower.
    """
    hist = np.asarray(hist, dtype=float)
    if support is None:
        lt = np.repeat(np.log(TAU_GRID), KAPPA_GRID.size)
        kap = np.tile(KAPPA_GRID, TAU_GRID.size)
    else:
        lt, kap = support
    theta, w = ability_grid(lt, kappa=kap)
    beta = invert_marginals(p, theta, w)
    P = bin_probabilities(beta, theta, w, edges)
    nll = _nll(hist, n, var_hist, P) + 0.5 * (lt / PRIOR_LOG_TAU_SD) ** 2
    post = np.exp(-(nll - nll.min()))
    post /= post.sum()
    bc = beta - beta.mean(axis=1, keepdims=True)
    k = int(np.argmin(nll))
    fit = SpreadFit(
        beta=post @ bc, model="mixture", tau=float(post @ np.exp(lt)), log_tau=lt, weights=post,
        shape=None, aic={"mixture": float(2 * nll[k] + 4)}, kappa=kap, map_index=k,
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
    if aic_flex < fit.aic["mixture"]:
        th, ww = ability_grid(res.x[:1], res.x[None, 1:])
        b = invert_marginals(p, th, ww)[0]
        fit.beta = b - b.mean()
        fit.model = "flexible"
        fit.tau = float(math.exp(res.x[0]))
        fit.log_tau = res.x[:1].copy()
        fit.weights = np.ones(1)
        fit.shape = res.x[1:].copy()
    return fit
