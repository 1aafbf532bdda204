"""Marginal Rasch maths for the private-totals estimator (pure post-processing).

An ability distribution on a fixed standardised grid, the item marginals it implies and
their inversion, the raw-score distribution (Poisson-binomial per grid node), the fit of the
ability model to a noisy binned score histogram (a normal mixture, freed to arbitrary weights
on its grid when a precise histogram rejects it), the empirical-Bayes shrinkage of the noisy
totals, and the budget split / bin layout derived at a public reference model.  The maths is
in ``docs/totals.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from . import saddle

__all__ = [
    "Z_NODES",
    "TAU_GRID",
    "ability_grid",
    "simulate_releases",
    "item_marginals",
    "invert_marginals",
    "log_esf",
    "score_distribution",
    "bin_probabilities",
    "reference_difficulties",
    "equal_probability_edges",
    "optimal_split",
    "SpreadFit",
    "fit_spread",
    "fit_support_batch",
    "flexible_fit",
]

#: standardised ability grid (abilities are θ = τ·z; the weights carry the shape)
Z_NODES = np.linspace(-5.0, 5.0, 41)
#: spreads τ (SD of the abilities, logits) over which the normal model is averaged
TAU_GRID = np.exp(np.linspace(math.log(0.1), math.log(6.0), 21))
#: prior on log τ: N(0, PRIOR_LOG_TAU_SD²) — abilities of SD about 1 logit, weakly
PRIOR_LOG_TAU_SD = 0.7

_Z_EDGES = np.concatenate([[-np.inf], 0.5 * (Z_NODES[1:] + Z_NODES[:-1]), [np.inf]])
#: bimodality κ of the mixture ability model, averaged over with equal prior weight
KAPPA_GRID = np.array([0.0, 0.4, 0.7, 0.85, 0.93])
#: component weights λ tried when the grid is refined (skewed abilities)
LAMBDA_GRID = np.array([0.05, 0.15, 0.3, 0.5, 0.7, 0.85, 0.95])
#: a posterior on at most this many grid points is refined (4× finer in log τ, κ in steps ≤ 0.05, λ)
REFINE_BELOW = 12
#: a refined posterior still on ≤ REFINE_BELOW points is refined once more (4× finer in log τ and κ)
FINE_REFINE = True
#: the mixture is replaced by free weights on its grid when its histogram misfit is significant at this level
MISFIT_LEVEL = 0.05
#: free weights only when σ_h² ≤ PRECISE_RATIO · n/B (histogram noise below a bin's sampling variance)
PRECISE_RATIO = 1.0
#: at most this many EM steps for the free weights (the discrepancy rule normally stops far earlier)
EM_MAX_STEPS = 300


def ability_grid(
    log_tau: np.ndarray, kappa: np.ndarray | None = None, lam: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Nodes θ and weights w of the ability distribution, one row per parameter set.

    ``θ_k = τ z_k``; in z, a two-component normal mixture of mean 0 and variance 1: weights
    λ and 1 − λ, components at −√(κ(1 − λ)/λ) and √(κλ/(1 − λ)), each of SD √(1 − κ)
    (κ = 0 is the normal model, κ → 1 two groups; λ = ½ symmetric, λ ≠ ½ skewed).  The
    weights are the mixture's probabilities of the grid cells.
    """
    log_tau = np.atleast_1d(np.asarray(log_tau, dtype=float))
    T = log_tau.size
    k = np.zeros(T) if kappa is None else np.broadcast_to(np.asarray(kappa, dtype=float), (T,))
    lm = np.full(T, 0.5) if lam is None else np.broadcast_to(np.asarray(lam, dtype=float), (T,))
    lo = -np.sqrt(k * (1 - lm) / lm)[:, None]
    hi = np.sqrt(k * lm / (1 - lm))[:, None]
    sd = np.sqrt(1.0 - k)[:, None]
    e = _Z_EDGES[None, :]
    cdf = lm[:, None] * special.ndtr((e - lo) / sd) + (1 - lm[:, None]) * special.ndtr((e - hi) / sd)
    w = np.diff(cdf, axis=1)
    w = w / w.sum(axis=1, keepdims=True)
    theta = np.exp(log_tau)[:, None] * Z_NODES[None, :]
    return theta, w


def item_marginals(beta: np.ndarray, theta: np.ndarray, w: np.ndarray) -> np.ndarray:
    """P(X_i = 1) = Σ_k w_k logistic(θ_k − β_i); ``beta`` (T, m), ``theta``/``w`` (T, Q)."""
    return np.einsum("tmq,tq->tm", special.expit(theta[:, None, :] - beta[:, :, None]), w)


def invert_marginals(
    p: np.ndarray, theta: np.ndarray, w: np.ndarray, iters: int = 40, initial: np.ndarray | None = None,
    tol: float = 1e-8,
) -> np.ndarray:
    """β (T, m) with item marginals equal to ``p`` ((m,) or (T, m)) under each of the T ability models.

    The marginal is strictly decreasing in β, so a safeguarded Newton iteration (bracketed,
    falling back to bisection) converges; ``p`` must lie in (0, 1).  ``initial`` (T, m) is a
    starting point (e.g. the solution for nearby ``p``); by default a probit-style guess.
    Stops when no β moves by more than ``tol``.
    """
    T = theta.shape[0]
    p = np.broadcast_to(np.asarray(p, dtype=float), (T, np.shape(p)[-1]))
    target = special.logit(p)
    lo = np.full(p.shape, -60.0)
    hi = np.full(p.shape, 60.0)
    if initial is None:
        mean = np.sum(w * theta, axis=1)[:, None]
        var = np.sum(w * theta**2, axis=1)[:, None] - mean**2
        b = np.clip(mean - target * np.sqrt(1.0 + np.pi * var / 8.0), -59.0, 59.0)
    else:
        b = np.clip(np.asarray(initial, dtype=float), -59.0, 59.0)
    c = np.exp(-theta)[:, None, :]  # logistic(θ − β) = 1/(1 + e^β e^−θ): one exp per (row, item)
    for _ in range(iters):
        e = 1.0 / (1.0 + np.exp(b)[:, :, None] * c)
        pi = np.clip(np.einsum("tmq,tq->tm", e, w), 1e-300, 1.0 - 1e-16)
        f = special.logit(pi) - target  # Newton on the logit scale: nearly linear in β
        e -= e * e
        d = np.einsum("tmq,tq->tm", e, w) / (pi * (1.0 - pi))
        lo = np.where(f > 0, b, lo)  # marginal too high: β must grow
        hi = np.where(f > 0, hi, b)
        nb = b + f / np.maximum(d, 1e-300)
        bad = (nb < lo) | (nb > hi)
        nb = np.where(bad, 0.5 * (lo + hi), nb)
        if np.max(np.abs(nb - b)) < tol:
            return nb
        b = nb
    return b


def log_esf(beta: np.ndarray) -> np.ndarray:
    """log γ_r(e^{−β}) for r = 0..m, the elementary symmetric functions: shape (T, m + 1).

    The summation recursion γ⁽ⁱ⁾_r = γ⁽ⁱ⁻¹⁾_r + e^{−β_i} γ⁽ⁱ⁻¹⁾_{r−1} has only positive terms, so
    it is stable on the log scale.
    """
    T, m = beta.shape
    lg = np.full((T, m + 1), -np.inf)
    lg[:, 0] = 0.0
    for i in range(m):
        shifted = lg[:, : i + 1] - beta[:, i : i + 1]
        lg[:, 1 : i + 2] = np.logaddexp(lg[:, 1 : i + 2], shifted)
    return lg


def score_distribution(beta: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """P(raw score = r | θ_k) for r = 0..m: shape (T, Q, m + 1) (Poisson-binomial).

    In the Rasch model P(r | θ) = γ_r e^{rθ} / Π_i (1 + e^{θ − β_i}) with γ_r the elementary
    symmetric functions of e^{−β_i} (:func:`log_esf`), so the O(m²) part is done once per
    row of ``beta`` rather than once per ability node.
    """
    T, m = beta.shape
    # rows with the same difficulties (the design's five parameter sets) share their ESFs
    uniq, inv = np.unique(beta, axis=0, return_inverse=True)
    lg = log_esf(uniq)[inv.ravel()] if uniq.shape[0] < T else log_esf(beta)  # (T, m+1)
    # Σ_i log(1 + e^{θ_k − β_i}), the exponential factorised (|θ|, |β| ≤ 60: no overflow)
    norm = np.sum(np.log1p(np.exp(-beta)[:, :, None] * np.exp(theta)[:, None, :]), axis=1)  # (T, Q)
    r = np.arange(m + 1, dtype=float)
    logp = lg[:, None, :] + theta[:, :, None] * r[None, None, :] - norm[:, :, None]
    return np.exp(logp)


def bin_probabilities(beta: np.ndarray, theta: np.ndarray, w: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Probability of each score bin ``[edges[b], edges[b+1])``: shape (T, B) (many items: :mod:`.saddle`)."""
    if saddle.use_saddlepoint(beta.shape[1], edges):
        return np.einsum("tqb,tq->tb", saddle.node_bin_probabilities(beta, theta, edges), w)
    pr = np.einsum("tqr,tq->tr", score_distribution(beta, theta), w)
    c = np.concatenate([np.zeros((pr.shape[0], 1)), np.cumsum(pr, axis=1)], axis=1)
    return np.clip(np.diff(c[:, edges], axis=1), 0.0, 1.0)


# ---------------------------------------------------------------------------------------
# design at the public reference model (β ~ N(0, 1) quantiles, θ ~ N(0, 1))
def reference_difficulties(m: int) -> np.ndarray:
    """Normal quantiles Φ⁻¹((i − ½)/m): the reference items of the design calculations."""
    return stats.norm.ppf((np.arange(m) + 0.5) / m)


def equal_probability_edges(pr: np.ndarray, B: int) -> np.ndarray:
    """Contiguous score bins (B of them) cut at equal-probability points of ``pr``."""
    m = pr.size - 1
    if B >= m + 1:
        return np.arange(m + 2)
    cdf = np.cumsum(pr)
    # cut b at the first score past b/B, at least one past cut b−1 and leaving room for the
    # rest: c_b = b + min(max(0, running max of (r_b − b)), m + 1 − B), vectorised
    b = np.arange(1, B)
    x = np.searchsorted(cdf, b / B) + 1 - b
    d = np.minimum(np.maximum.accumulate(np.maximum(x, 0)), m + 1 - B)
    return np.concatenate([[0], b + d, [m + 1]]).astype(np.int64)


_F_GRID = np.geomspace(0.01, 0.6, 40)
#: the design is optimised for the sum of the predicted errors at these bimodalities κ
REFERENCE_KAPPAS = (0.0, 0.85)
#: 0: the predicted error at the reference spread τ = 1 only; K > 0: its average over the public
#: prior log τ ~ N(0, PRIOR_LOG_TAU_SD²) by K-node Gauss–Hermite (``docs/totals.md`` §4.2)
DESIGN_PRIOR_NODES: int = 0


def design_spreads(nodes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(log τ, weight) at which the design's predicted error is evaluated and averaged (public)."""
    k = DESIGN_PRIOR_NODES if nodes is None else nodes
    if k <= 0:
        return np.zeros(1), np.ones(1)
    x, wt = np.polynomial.hermite_e.hermegauss(k)
    return PRIOR_LOG_TAU_SD * x, wt / wt.sum()


#: Up to this many items every number of bins 3 … m + 1 is tried; beyond, a geometric grid of
#: about ``_B_GRID`` of them (and m + 1): the design runs before the debit and the predicted
#: error is flat near its minimum, while the full search costs O(m²) (minutes at m = 5000).
_FULL_B_SEARCH: int = 200
_B_GRID: int = 64


#: Tests with at most this many items release the full raw-score distribution (B = m + 1, no
#: merged scores): an equal-probability layout at the reference merges the extreme scores, where
#: a population with mass beyond the items' range puts most persons, and the mixture fit from the
#: merged bins then misjudges its scale (``docs/totals.md`` §4, issue 26).  Public (a function of m).
FULL_SCORES_UP_TO: int = 20


def design_bins(m: int) -> list[int]:
    """The numbers of score bins :func:`optimal_split` compares (public: a function of m)."""
    if m <= FULL_SCORES_UP_TO:
        return [m + 1]
    if m + 1 <= _FULL_B_SEARCH:
        return list(range(3, m + 2))
    grid = np.unique(np.rint(np.geomspace(3, m + 1, _B_GRID)).astype(int))
    return sorted({*grid.tolist(), m + 1})


#: ... unless the full distribution's noise SD exceeds this multiple of its mean count n/(m + 1)
#: per score: then the layout is searched as for longer tests (few merged bins), because single
#: noise draws of the sparse extreme scores then decide the fitted spread (``docs/totals.md`` §4.1).
#: Public: a function of n, m and ρ.
NOISY_SCORES_RATIO: float = 1.0


def full_scores_are_noisy(n: int, m: int, f: float, rho: float) -> bool:
    """Whether the full score distribution's noise SD 1/√(fρ) exceeds :data:`NOISY_SCORES_RATIO`
    × its mean count per score n/(m + 1) (public n, m, ρ and the split f)."""
    return (m + 1) / math.sqrt(f * rho) > NOISY_SCORES_RATIO * n


def optimal_split(n: int, m: int, rho: float) -> tuple[float, np.ndarray]:
    """The histogram's share f of ρ and the bins minimising the predicted error of β̂.

    Tests of at most :data:`FULL_SCORES_UP_TO` items release the full score distribution
    (B = m + 1, f minimising the error below) unless its noise SD exceeds its mean count per
    score (:func:`full_scores_are_noisy`); then B is searched over 3 … m + 1 like longer tests.

    At the public reference model (items at normal quantiles, abilities of the mixture model
    with τ = 1, κ = 0) the predicted E‖β̂ − β‖² is (``docs/totals.md``)

        Σ_i (n π_i(1−π_i) + σ_s²)/(n π_i')²  +  tr(D C Dᵀ),

    σ_s² = m/(2(1−f)ρ), σ_h² = 1/(fρ), D = ∂β/∂(log τ, κ) at fixed marginals and C the
    inverse Fisher information of (log τ, κ) from the B bins, each with variance
    n P_b(1 − P_b) + σ_h².  f runs over a grid in [0.01, 0.6] and B over 3 … m + 1
    equal-probability bins (m + 1: the full score distribution; a geometric grid of B beyond
    :data:`_FULL_B_SEARCH` items, :func:`design_bins`); only n, m and ρ enter.  Beyond
    :data:`~privirt.private.totals.scores.EXACT_DESIGN_ITEMS` items the reference score
    distribution is its Edgeworth expansion (:mod:`privirt.private.totals.scores`).
    """
    Bs = design_bins(m)
    f, edges = _best_design(n, m, rho, Bs)
    if m <= FULL_SCORES_UP_TO and m >= 2 and full_scores_are_noisy(n, m, f, rho):
        f, edges = _best_design(n, m, rho, list(range(3, m + 2)))
    return f, edges


def _best_design(n: int, m: int, rho: float, Bs: list[int], nodes: int | None = None) -> tuple[float, np.ndarray]:
    """(f, edges) minimising the predicted error of :func:`optimal_split` over the bin counts ``Bs``."""
    lts, wts = design_spreads(nodes)
    at_ref, pr_ref = _design_errors(n, m, rho, Bs, 0.0)
    total = at_ref
    if lts.size > 1:  # averaged over the prior on log τ; the bins stay those of the reference τ = 1
        total = sum(wt * (at_ref if lt0 == 0.0 else _design_errors(n, m, rho, Bs, lt0, pr_ref)[0])
                    for lt0, wt in zip(lts, wts))  # an odd rule's middle node is τ = 1 itself
    i, j = np.unravel_index(int(np.argmin(total)), total.shape)
    return float(_F_GRID[j]), equal_probability_edges(pr_ref, Bs[i])


def _design_errors(n: int, m: int, rho: float, Bs: list[int], lt0: float,
                   pr_ref: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Predicted error (len(Bs), len(_F_GRID)) summed over :data:`REFERENCE_KAPPAS` at log τ = ``lt0``
    (bins equal-probability at ``pr_ref``, by default at this τ and κ = 0), and that distribution."""
    from .scores import EXACT_DESIGN_ITEMS, edgeworth_score_distribution

    beta0 = reference_difficulties(m)
    # beyond EXACT_DESIGN_ITEMS items the reference score distribution by its Edgeworth
    # expansion (O(m) per ability node; the exact one is O(m²); error bound in scores.py)
    sdist = score_distribution if m <= EXACT_DESIGN_ITEMS else edgeworth_score_distribution
    total = np.zeros((len(Bs), _F_GRID.size))
    S3 = None
    for k0 in REFERENCE_KAPPAS:
        h = 1e-3
        lt = lt0 + np.array([0.0, -h, h, 0.0, 0.0])
        kap = np.array([k0, k0, k0, k0 - h if k0 > 0 else k0, k0 + h]) + np.array([0, 0, 0, 0, 0 if k0 > 0 else h])
        theta, w = ability_grid(lt, kappa=kap)
        B5 = np.repeat(beta0[None, :], 5, axis=0)
        if S3 is None:  # P(r | θ) at τ, τe^−h, τe^h: the abilities' nodes do not depend on κ
            S3 = sdist(B5[:3], theta[:3])
        pr = np.einsum("tqr,tq->tr", S3[[0, 1, 2, 0, 0]], w)
        pr_ref = pr[0] if pr_ref is None else pr_ref
        p0 = item_marginals(B5[:1], theta[:1], w[:1])[0]
        bet = invert_marginals(p0, theta, w)
        dk = kap[4] - kap[3]
        D = np.stack([(bet[2] - bet[1]) / (2 * h), (bet[4] - bet[3]) / dk], axis=1)
        D -= D.mean(axis=0)
        DtD = D.T @ D
        dpr = np.stack([(pr[2] - pr[1]) / (2 * h), (pr[4] - pr[3]) / dk], axis=1)  # (m+1, 2)
        e = special.expit(theta[0][None, :] - beta0[:, None])
        dpi = (e * (1 - e)) @ w[0]
        samp = np.sum(n * p0 * (1 - p0) / (n * dpi) ** 2)
        a = np.sum(1.0 / (n * dpi) ** 2) * m / (2.0 * rho)
        c = np.concatenate([[0.0], np.cumsum(pr[0])])
        cd = np.concatenate([np.zeros((1, 2)), np.cumsum(dpr, axis=0)])
        for i, B in enumerate(Bs):
            edges = equal_probability_edges(pr_ref, B)
            Pb = np.diff(c[edges])
            J = n * np.diff(cd[edges], axis=0)  # (B, 2)
            V = n * Pb * (1 - Pb) + 1.0 / (_F_GRID[:, None] * rho)  # (F, B)
            JJ = (J[:, :, None] * J[:, None, :]).reshape(-1, 4)  # J_bi J_bj, (B, 4)
            info = ((1.0 / V) @ JJ).reshape(-1, 2, 2) + np.diag([1.0 / PRIOR_LOG_TAU_SD**2, 1.0])
            tr = np.einsum("fij,ij->f", np.linalg.inv(info), DtD)  # tr(D C Dᵀ) = Σ C ∘ DᵀD
            total[i] += a / (1 - _F_GRID) + samp + tr
    return total, pr_ref


# ---------------------------------------------------------------------------------------
# the ability model fitted to the histogram
@dataclass
class SpreadFit:
    """The fitted ability model (a posterior over the (τ, κ, λ) grid, and free weights when the
    histogram rejected it) and the difficulties."""

    beta: np.ndarray  # centred, (m,)
    tau: float  # posterior mean of τ
    kappa_mean: float  # posterior mean of κ
    log_tau: np.ndarray  # (T,) grid points
    kappa: np.ndarray  # (T,)
    lam: np.ndarray  # (T,) weight of the lower component
    weights: np.ndarray  # posterior weights (sum to 1)
    map_index: int
    flexible: bool = False  # True: β comes from free ability weights (``flexible_fit``)
    free_theta: np.ndarray | None = None  # (Q,) nodes of the free ability distribution
    free_weights: np.ndarray | None = None  # (Q,) its weights
    chi2: float = float("nan")  # histogram discrepancy X² of the model β comes from
    chi2_mixture: float = float("nan")  # X² of the mixture at the point estimate

    def ability_distribution(self) -> tuple[np.ndarray, np.ndarray]:
        """Nodes θ and weights w of the fitted ability distribution: the free weights when
        they were fitted, else the mixture at the posterior mode."""
        if self.free_theta is not None and self.free_weights is not None:
            return self.free_theta, self.free_weights
        return self.mixture(self.map_index)

    def support_indices(self, tol: float = 1e-4, most: int = 64) -> np.ndarray:
        """Indices of the (at most ``most``) heaviest grid points with posterior weight ≥ ``tol`` × the largest."""
        order = np.argsort(-self.weights, kind="stable")[:most]
        return order[self.weights[order] >= tol * self.weights.max()]

    def support(self, tol: float = 1e-4, most: int = 64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The (at most ``most``) heaviest grid points with posterior weight ≥ ``tol`` × the largest."""
        keep = self.support_indices(tol, most)
        return self.log_tau[keep], self.kappa[keep], self.lam[keep]

    def mixture(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Nodes θ and weights w of the mixture at grid point ``k``."""
        theta, w = ability_grid(self.log_tau[k:k + 1], kappa=self.kappa[k:k + 1], lam=self.lam[k:k + 1])
        return theta[0], w[0]


def _nll(hist, n, var_h, P):
    V = n * P * (1.0 - P) + var_h + 1e-9
    r = hist[None, :] - n * P
    return 0.5 * np.sum(r * r / V + np.log(V), axis=1)


def _chi2(hist: np.ndarray, n: int, var_h: float, P: np.ndarray) -> float:
    """Pearson-type discrepancy Σ_b (h_b − n P_b)² / (n P_b(1 − P_b) + σ_h²) of one model."""
    V = n * P * (1.0 - P) + var_h + 1e-9
    return float(np.sum((hist - n * P) ** 2 / V))


def flexible_fit(
    p: np.ndarray, hist: np.ndarray, n: int, var_hist: float, edges: np.ndarray,
    theta: np.ndarray, w: np.ndarray, *, level: float | None = None, max_steps: int | None = None,
) -> tuple[np.ndarray, np.ndarray, float, float, int]:
    """Free ability weights on the nodes ``theta`` when the histogram rejects the model ``w``.

    X² of the start (``theta``, ``w``, with β solving the marginals ``p``) is compared with
    the (1 − ``level``) quantile of χ²(B − 4) (B bins, three mixture parameters fitted).  If
    it is not above it, nothing changes.  Otherwise the weights are updated by EM for binned
    data, w_k ← w_k Σ_b ĥ_b P(b | θ_k) / P_b (ĥ the histogram clipped at 0, normalised),
    alternating with the inversion of the marginals, and stopped as soon as X² is at most its
    expectation B − 1 under the known sampling and noise variance (the discrepancy
    principle: no closer fit than the noise allows).  Returns (β centred, w, X² at the
    start, X² at the end, EM steps).
    """
    level = MISFIT_LEVEL if level is None else level
    max_steps = EM_MAX_STEPS if max_steps is None else max_steps
    th = np.asarray(theta, dtype=float)[None, :]
    ww = np.asarray(w, dtype=float)[None, :]
    B = len(edges) - 1
    beta = invert_marginals(p, th, ww)
    x0 = _chi2(hist, n, var_hist, bin_probabilities(beta, th, ww, edges)[0])
    h = np.clip(np.asarray(hist, dtype=float), 0.0, None)
    if (var_hist > n / B * PRECISE_RATIO or x0 <= stats.chi2.ppf(1.0 - level, max(B - 4, 1))
            or h.sum() <= 0):
        return beta[0] - beta[0].mean(), ww[0], x0, x0, 0
    h /= h.sum()
    x, steps = x0, 0
    while steps < max_steps and x > B - 1:
        sd = None if saddle.use_saddlepoint(beta.shape[1], edges) else score_distribution(beta, th)[0]  # (Q, m + 1)
        Pk = (saddle.node_bin_probabilities(beta, th, edges)[0] if sd is None  # (Q, B); saddlepoint: many items
              else np.diff(np.concatenate([np.zeros((sd.shape[0], 1)), np.cumsum(sd, axis=1)], axis=1)[:, edges], axis=1))
        Pb = ww[0] @ Pk
        wn = ww[0] * (Pk @ (h / np.maximum(Pb, 1e-300)))
        wn = (wn / wn.sum())[None, :]
        bn = invert_marginals(p, th, wn, initial=beta)
        xn = _chi2(hist, n, var_hist, bin_probabilities(bn, th, wn, edges)[0])
        if not xn < x:  # EM ascends the multinomial likelihood; stop where X² stops falling
            break
        ww, beta, x = wn, bn, xn
        steps += 1
    return beta[0] - beta[0].mean(), ww[0], x0, x, steps


def _posterior(p, hist, n, var_hist, edges, lt, kap, lam):
    theta, w = ability_grid(lt, kappa=kap, lam=lam)
    beta = invert_marginals(p, theta, w)
    P = bin_probabilities(beta, theta, w, edges)
    nll = _nll(hist, n, var_hist, P) + 0.5 * (lt / PRIOR_LOG_TAU_SD) ** 2
    post = np.exp(-(nll - nll.min()))
    return post / post.sum(), beta, nll


def _nearest_to_mean(post: np.ndarray, lt: np.ndarray, kap: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Index (per row of ``post``) of the grid point nearest the posterior mean of (log τ, κ, λ)."""
    d = (((lt - (post @ lt)[:, None]) / 0.2) ** 2 + ((kap - (post @ kap)[:, None]) / 0.1) ** 2
         + ((lam - (post @ lam)[:, None]) / 0.1) ** 2)
    return np.argmin(d, axis=1)


#: at most this many (replicate × grid point × item × node) values are held at once
_BATCH_CELLS = 500000


def fit_support_batch(
    p: np.ndarray, hist: np.ndarray, n: int, var_hist: float, edges: np.ndarray,
    support: tuple[np.ndarray, np.ndarray, np.ndarray], initial: np.ndarray | None = None,
    on_batch=None,
) -> np.ndarray:
    """:func:`fit_spread` on the fixed grid ``support`` for R data sets at once: β (R, m), centred.

    ``p`` (R, m) and ``hist`` (R, B) are the proportions and histograms of R (bootstrap) data
    sets; ``initial`` (T, m), β on the support for nearby proportions, starts the Newton
    iterations.  The ability grid is built once and the replicates are processed in chunks;
    ``on_batch(r)``, if given, is called after each chunk of ``r`` (progress).
    """
    lt, kap, lam = support
    theta, w = ability_grid(lt, kappa=kap, lam=lam)
    p = np.atleast_2d(np.asarray(p, dtype=float))
    hist = np.atleast_2d(np.asarray(hist, dtype=float))
    R, m = p.shape
    T, Q = theta.shape
    prior = 0.5 * (lt / PRIOR_LOG_TAU_SD) ** 2
    out = np.empty((R, m))
    step = max(1, _BATCH_CELLS // (T * m * Q))
    for a in range(0, R, step):
        r = min(R, a + step) - a
        th = np.tile(theta, (r, 1))
        ww = np.tile(w, (r, 1))
        pp = np.repeat(p[a:a + r], T, axis=0)
        init = None if initial is None else np.tile(initial, (r, 1))
        beta = invert_marginals(pp, th, ww, initial=init, tol=1e-6)  # (r·T, m)
        P = bin_probabilities(beta, th, ww, edges).reshape(r, T, -1)
        V = n * P * (1.0 - P) + var_hist + 1e-9
        res = hist[a:a + r, None, :] - n * P
        nll = 0.5 * np.sum(res * res / V + np.log(V), axis=2) + prior[None, :]  # (r, T)
        post = np.exp(-(nll - nll.min(axis=1, keepdims=True)))
        post /= post.sum(axis=1, keepdims=True)
        j = _nearest_to_mean(post, lt, kap, lam)
        bsel = beta.reshape(r, T, m)[np.arange(r), j]
        out[a:a + r] = bsel - bsel.mean(axis=1, keepdims=True)
        if on_batch is not None:
            on_batch(r)
    return out


def fit_spread(
    p: np.ndarray, hist: np.ndarray, n: int, var_hist: float, edges: np.ndarray, *,
    support: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None, flexible: bool | None = None,
) -> SpreadFit:
    """Fit the ability distribution to the noisy histogram and map the marginals ``p`` to β.

    Mixture model: the Gaussian approximate likelihood of the histogram (sampling plus the known
    noise variance) times the prior on log τ, on the grid :data:`TAU_GRID` × :data:`KAPPA_GRID`
    (or the points ``support``); β is β(τ, κ, λ) (centred) at the grid point nearest the
    posterior mean of (log τ, κ, λ).  A posterior concentrated on ≤ :data:`REFINE_BELOW`
    points is recomputed on a finer grid around them that also lets the mixture be skewed
    (λ ∈ :data:`LAMBDA_GRID`).

    ``flexible`` (default: True without ``support``): when the histogram rejects the mixture at
    the point estimate, β comes from free ability weights on its grid (:func:`flexible_fit`).
    """
    hist = np.asarray(hist, dtype=float)
    if support is None:
        lt = np.repeat(np.log(TAU_GRID), KAPPA_GRID.size)
        kap = np.tile(KAPPA_GRID, TAU_GRID.size)
        lam = np.full(lt.size, 0.5)
        post, beta, nll = _posterior(p, hist, n, var_hist, edges, lt, kap, lam)
        keep = post >= 1e-6 * post.max()
        if np.count_nonzero(keep) <= REFINE_BELOW:  # concentrated: refine around the support
            dlt = np.diff(np.log(TAU_GRID))[0]
            lt_f = np.arange(lt[keep].min() - dlt, lt[keep].max() + dlt + 1e-9, dlt / 4)
            k_lo, k_hi = kap[keep].min(), kap[keep].max()
            kap_f = np.unique(np.clip(np.linspace(k_lo - 0.3, k_hi + 0.3, 9), 0.0, 0.95))
            g = np.array(np.meshgrid(lt_f, kap_f, LAMBDA_GRID, indexing="ij")).reshape(3, -1)
            g = g[:, (g[1] > 0) | (g[2] == 0.5)]  # λ is void when κ = 0
            lt, kap, lam = g
            post, beta, nll = _posterior(p, hist, n, var_hist, edges, lt, kap, lam)
            keep = post >= 1e-6 * post.max()
            if FINE_REFINE and np.count_nonzero(keep) <= REFINE_BELOW:  # still concentrated: 4× finer again
                dk = (0.6 + k_hi - k_lo) / 8  # the κ step of the first refinement
                lt_f = np.arange(lt[keep].min() - dlt / 4, lt[keep].max() + dlt / 4 + 1e-9, dlt / 16)
                kap_f = np.unique(np.clip(np.arange(kap[keep].min() - dk, kap[keep].max() + dk + 1e-9, dk / 4),
                                          0.0, 0.97))
                lam_f = np.unique(np.concatenate([lam[keep], LAMBDA_GRID[(LAMBDA_GRID >= lam[keep].min() - 0.15)
                                                                          & (LAMBDA_GRID <= lam[keep].max() + 0.15)]]))
                g = np.array(np.meshgrid(lt_f, kap_f, lam_f, indexing="ij")).reshape(3, -1)
                g = g[:, (g[1] > 0) | (g[2] == 0.5)]
                lt, kap, lam = g
                post, beta, nll = _posterior(p, hist, n, var_hist, edges, lt, kap, lam)
    else:
        lt, kap, lam = support
        post, beta, nll = _posterior(p, hist, n, var_hist, edges, lt, kap, lam)
    bc = beta - beta.mean(axis=1, keepdims=True)
    k = int(np.argmin(nll))
    # β at the grid point nearest the posterior mean of (log τ, κ, λ) (averaging β(τ) itself
    # would inflate the scale when the posterior is wide: β grows with τ)
    j = int(_nearest_to_mean(post[None, :], lt, kap, lam)[0])
    out = SpreadFit(beta=bc[j], tau=float(post @ np.exp(lt)), kappa_mean=float(post @ kap),
                    log_tau=lt, kappa=kap, lam=lam, weights=post, map_index=k)
    if support is None if flexible is None else flexible:
        theta, w = ability_grid(lt[j:j + 1], kappa=kap[j:j + 1], lam=lam[j:j + 1])
        b, wf, x0, x1, steps = flexible_fit(p, hist, n, var_hist, edges, theta[0], w[0])
        out.chi2_mixture, out.chi2 = x0, x1
        if steps:
            out.beta, out.flexible, out.free_theta, out.free_weights = b, True, theta[0], wf
    return out


#: cells (persons × items) per batch of the bootstrap's simulated replicates (a larger replicate: chunks)
SIMULATION_CELLS = 2_000_000


def simulate_releases(rng: np.random.Generator, fit, beta: np.ndarray, n: int, edges: np.ndarray,
                      sig_t: float, sig_h: float, reps: int, on_batch=None,
                      ability: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``reps`` parametric-bootstrap draws of (noisy totals, noisy histogram): (reps, m), (reps, B).

    ``beta`` (m,) is every replicate's truth, or (reps, m) one truth per replicate; the persons
    come from ``ability`` (nodes, weights), by default ``fit.ability_distribution()``."""
    theta, w = fit.ability_distribution() if ability is None else ability
    eb = np.exp(np.atleast_2d(beta))
    m, B = eb.shape[1], len(edges) - 1
    tot = np.empty((reps, m))
    hist = np.empty((reps, B))
    step, single = max(1, SIMULATION_CELLS // (n * m)), m > saddle.SINGLE_SIMULATION_ITEMS  # single: ~⅔ the time
    for a in range(0, reps, step):
        r = min(reps, a + step) - a
        th = theta[rng.choice(theta.size, size=(r, n), p=w)] + (rng.random((r, n)) - 0.5) * (theta[1] - theta[0])
        ebr = eb if eb.shape[0] == 1 else eb[a:a + r]
        if r == 1 and n * m > SIMULATION_CELLS:  # persons in chunks: the same draws (a generator
            tot[a], hist[a] = 0.0, 0.0  # fills consecutive calls as one), bounded memory
            for c in range(0, n, size := max(1, SIMULATION_CELLS // m)):
                odds = 1.0 + ebr[0][None, :] * np.exp(-th[0, c:c + size])[:, None]
                Xc = (rng.random(odds.shape, dtype=np.float32) * odds.astype(np.float32) < 1.0 if single
                      else rng.random(odds.shape) * odds < 1.0)
                tot[a] += Xc.sum(axis=0)
                hist[a] += np.bincount(np.searchsorted(edges, Xc.sum(axis=1), side="right") - 1, minlength=B)
        else:
            odds = 1.0 + ebr[:, None, :] * np.exp(-th)[:, :, None]
            X = (rng.random((r, n, m), dtype=np.float32) * odds.astype(np.float32) < 1.0 if single
                 else rng.random((r, n, m)) * odds < 1.0)
            tot[a:a + r] = X.sum(axis=1)
            b = np.searchsorted(edges, X.sum(axis=2), side="right") - 1 + B * np.arange(r)[:, None]
            hist[a:a + r] = np.bincount(b.ravel(), minlength=r * B).reshape(r, B)
        if on_batch is not None:
            on_batch(r)
    return tot + rng.normal(0.0, sig_t, tot.shape), hist + rng.normal(0.0, sig_h, hist.shape)
