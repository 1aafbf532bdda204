"""Post-processing of the 2PNO release: a noise-aware least-squares fit of the one-factor
normal-ogive model to the noisy first and second moments, empirical-Bayes shrinkage of the
discriminations, and simulation of releases for the parametric bootstrap
(``docs/private_2pl.md`` §3–§5).

The model: z_i = λ_i ξ + √(1 − λ_i²) e_i, X_i = 1 ⟺ z_i > τ_i, so that
P(X_i = 1) = Φ(−τ_i) and P(X_i = X_j = 1) = U(τ_i, τ_j; λ_i λ_j) (``orthant``); in the 2PNO
parameterisation P = Φ(a θ − b): a = λ/√(1 − λ²), b = τ/√(1 − λ²).  The fit minimises
Σ (p̃ − model)²/v over the m proportions and the m(m − 1)/2 pair proportions, v the sampling
variance plus the known privacy-noise variance (σ/n)², by Levenberg–Marquardt over a batch
of data sets at once (the bootstrap).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse, special

from ..._threads import one_blas_thread
from .orthant import orthant_gradients, upper_orthant
from .statistics import pair_index

__all__ = ["LOG_A_PRIOR_SD", "MEAN_PRIOR_SD", "TAU_PRIOR_SD", "FactorFit", "fit_factor", "shrink_log_a", "to_2pno", "simulate_statistics"]

#: Prior on log a in the fit: N(μ, LOG_A_PRIOR_SD²) with the common μ fitted too, weak (a within
#: e^{±2} of the common value at 95 %), and μ ~ N(0, MEAN_PRIOR_SD²); they keep loadings whose
#: pairs carry no information away from λ → 1 (``docs/private_2pl.md`` §3).
LOG_A_PRIOR_SD: float = 1.0
MEAN_PRIOR_SD: float = 1.0
#: Prior τ_i ~ N(0, TAU_PRIOR_SD²) on the thresholds (P(correct) = Φ(−τ)): negligible wherever
#: a total carries information; where the noise swamps the totals it keeps τ (and b) from
#: running off to ±∞ when a noisy proportion falls outside [0, 1] (``docs/private_2pl.md`` §3).
TAU_PRIOR_SD: float = 3.0


@dataclass
class FactorFit:
    """Batched fit: thresholds ``tau`` and loadings ``lam`` (R, m); ``cov`` the noise-only
    covariance of (τ, log a) for R = 1 (or None); ``iterations`` used."""

    tau: np.ndarray
    lam: np.ndarray
    cov: np.ndarray | None
    iterations: int


def to_2pno(tau: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) of the 2PNO P = Φ(aθ − b) from thresholds and loadings."""
    q = np.sqrt(1.0 - lam * lam)
    return lam / q, tau / q


def _scatter(m: int) -> tuple[sparse.csr_matrix, sparse.csr_matrix, np.ndarray, np.ndarray]:
    """Sparse maps from per-pair gradient blocks to J^T r (2m) and J^T J (2m × 2m)."""
    i, j = pair_index(m)
    P = i.size
    cols = np.stack([i, j, m + i, m + j], axis=1)  # (P, 4)
    g_map = sparse.csr_matrix((np.ones(4 * P), (np.arange(4 * P), cols.ravel())), shape=(4 * P, 2 * m))
    rows = (cols[:, :, None] * (2 * m) + cols[:, None, :]).ravel()  # (P*16,)
    h_map = sparse.csr_matrix((np.ones(16 * P), (np.arange(16 * P), rows)), shape=(16 * P, 4 * m * m))
    return g_map, h_map, i, j


def _loading(log_a: np.ndarray) -> np.ndarray:
    a = np.exp(np.clip(log_a, -30.0, 30.0))
    return a / np.sqrt(1.0 + a * a)


def _model(theta: np.ndarray, m: int, i: np.ndarray, j: np.ndarray):
    tau = theta[:, :m]
    lam = _loading(theta[:, m:2 * m])
    r = lam[:, i] * lam[:, j]
    pt = special.ndtr(-tau)
    # P(X_i ≠ X_j) = π_i + π_j − 2 π_ij
    return tau, lam, r, pt, pt[:, i] + pt[:, j] - 2.0 * upper_orthant(tau[:, i], tau[:, j], r)


@one_blas_thread  # batched small solves: BLAS's threads only cost on shared cores (privirt._threads)
def fit_factor(totals: np.ndarray, pairs: np.ndarray, n: int, sigma_totals: float, sigma_pairs: float,
               *, max_iter: int = 100, tol: float = 1e-8, noise_cov: bool = False,
               prior_sd: float | None = None, common: bool = False) -> FactorFit:
    """Fit (τ, λ) to noisy totals (R, m) and pair counts (R, P) of ``n`` persons.

    Weighted least squares on the proportions with weights 1/(p(1 − p)/n + σ²/n²) (p the
    observed proportion, clipped into [1/n, 1 − 1/n]) plus the weak prior on log a;
    Levenberg–Marquardt on (τ, log a) for every row of the batch at once.  ``noise_cov``: also the sandwich covariance of
    (τ, log a) due to the privacy noise alone (R = 1 only).  ``prior_sd``: the SD of log a
    about the common value (default :data:`LOG_A_PRIOR_SD`).  ``common``: all a equal (one
    log a shared by every item: the steps are taken in that subspace).
    """
    S = LOG_A_PRIOR_SD if prior_sd is None else float(prior_sd)
    t = np.atleast_2d(np.asarray(totals, float)) / n
    q = np.atleast_2d(np.asarray(pairs, float)) / n
    R, m = t.shape
    g_map, h_map, i, j = _scatter(m)
    lo = 1.0 / n
    pc, qc = np.clip(t, lo, 1 - lo), np.clip(q, lo, 1 - lo)
    noise_t, noise_n = (sigma_totals / n) ** 2, (sigma_pairs / n) ** 2
    sd_t = np.sqrt(pc * (1 - pc) / n + noise_t)
    sd_n = np.sqrt(qc * (1 - qc) / n + noise_n)
    theta = np.concatenate([-special.ndtri(np.clip(t, 0.5 / n, 1 - 0.5 / n)),
                            np.full((R, m + 1), np.log(0.75))], axis=1)  # τ, log a, μ
    mu = np.full(R, 1e-2)

    def residuals(th):
        _, _, _, pt, pn = _model(th, m, i, j)
        return (t - pt) / sd_t, (q - pn) / sd_n, (th[:, -1:] - th[:, m:2 * m]) / S, \
            -th[:, -1:] / MEAN_PRIOR_SD, -th[:, :m] / TAU_PRIOR_SD

    def cost_of(res):
        return sum((x * x).sum(1) for x in res)

    def normal_eq(th, res, weights=None):
        rt, rn, rp, r0, rtau = res
        tau, lam, r, _, _ = _model(th, m, i, j)
        dh, dk, dr = orthant_gradients(tau[:, i], tau[:, j], r)
        dlam = lam * (1.0 - lam * lam)  # dλ/d log a
        phi = np.exp(-0.5 * tau * tau) / np.sqrt(2 * np.pi)  # −∂Φ(−τ)/∂τ
        # ∂P(X_i ≠ X_j)/∂(τ_i, τ_j, r) = (−φ_i − 2 ∂U/∂h, −φ_j − 2 ∂U/∂k, −2 ∂U/∂r)
        dh, dk, dr = -phi[:, i] - 2.0 * dh, -phi[:, j] - 2.0 * dk, -2.0 * dr
        blocks = np.stack([dh, dk, dr * lam[:, j] * dlam[:, i], dr * lam[:, i] * dlam[:, j]], axis=2) / sd_n[:, :, None]
        dt = -phi / sd_t  # ∂Φ(−τ)/∂τ, scaled
        wn = 1.0 if weights is None else weights[1][:, :, None, None]
        H = np.zeros((R, 2 * m + 1, 2 * m + 1))
        H[:, :2 * m, :2 * m] = (h_map.T @ ((blocks[:, :, :, None] * blocks[:, :, None, :]) * wn).reshape(R, -1).T
                                ).T.reshape(R, 2 * m, 2 * m)
        wt = 1.0 if weights is None else weights[0]
        H[:, np.arange(m), np.arange(m)] += dt * dt * wt
        g = np.zeros((R, 2 * m + 1))
        g[:, :2 * m] = (g_map.T @ (blocks * rn[:, :, None]).reshape(R, -1).T).T
        g[:, :m] += dt * rt
        if weights is None:  # the prior (no noise in it): residual (μ − log a_i)/S
            k, S2 = np.arange(m, 2 * m), S * S
            H[:, k, k] += 1.0 / S2
            H[:, -1, -1] += m / S2
            H[:, k, -1] -= 1.0 / S2
            H[:, -1, k] -= 1.0 / S2
            g[:, m:2 * m] += rp / S
            g[:, -1] -= rp.sum(1) / S
            H[:, -1, -1] += 1.0 / MEAN_PRIOR_SD**2
            g[:, -1] += r0[:, 0] / MEAN_PRIOR_SD
            k = np.arange(m)
            H[:, k, k] += 1.0 / TAU_PRIOR_SD**2
            g[:, :m] += rtau / TAU_PRIOR_SD
        return H, g

    res = residuals(theta)
    cost = cost_of(res)
    active = np.ones(R, bool)
    it = 0
    T = np.eye(2 * m + 1)
    if common:  # (τ, ℓ) ↦ (τ, ℓ, …, ℓ, μ = ℓ): the prior on log a_i − μ vanishes there
        T = np.zeros((2 * m + 1, m + 1))
        T[np.arange(m), np.arange(m)] = 1.0
        T[m:, m] = 1.0
    for it in range(1, max_iter + 1):
        H, g = normal_eq(theta, res)
        H, g = np.einsum("ki,rkl,lj->rij", T, H, T), g @ T
        d = np.einsum("rkk->rk", H)
        A = H + (mu[:, None] * d + 1e-12)[:, :, None] * np.eye(T.shape[1])[None]
        step = np.linalg.solve(A, g[:, :, None])[:, :, 0] @ T.T
        step[~active] = 0.0
        trial = theta + step
        res2 = residuals(trial)
        cost2 = cost_of(res2)
        better = (cost2 <= cost) & active
        theta[better] = trial[better]
        for x, x2 in zip(res, res2):
            x[better] = x2[better]
        gain = np.where(better, cost - cost2, 0.0)
        cost = np.where(better, cost2, cost)
        mu = np.where(better, np.maximum(mu / 3.0, 1e-9), np.minimum(mu * 4.0, 1e12))
        done = (better & (gain <= tol * (1.0 + cost))) | (mu >= 1e12)
        active &= ~done
        if not active.any():
            break
    tau, lam = theta[:, :m], _loading(theta[:, m:2 * m])
    cov = None
    if noise_cov and R == 1:
        H, _ = normal_eq(theta, res)
        B, _ = normal_eq(theta, res, weights=(noise_t / sd_t**2, noise_n / sd_n**2))
        Hi = np.linalg.pinv(H[0])
        cov = (Hi @ B[0] @ Hi)[:2 * m, :2 * m]  # (τ, log a): the sandwich, noise part only
    return FactorFit(tau=tau, lam=lam, cov=cov, iterations=it)


def shrink_log_a(log_a: np.ndarray, var_noise: np.ndarray, centre: float | None = None,
                 max_spread: float = 2.0) -> tuple[np.ndarray, float, float]:
    """Empirical-Bayes shrinkage of log a (or of the thresholds τ) toward a common value
    against the privacy noise.

    log â_i ~ N(μ, s² + v_i) (v_i the noise variance); s by maximum marginal likelihood on a
    grid over [0, ``max_spread``], μ = ``centre`` (the all-a-equal fit) or profiled out;
    returns (μ + s²/(s² + v_i)(log â_i − μ), s, μ).
    """
    x = np.asarray(log_a, float)
    v = np.maximum(np.asarray(var_noise, float), 0.0)
    grid = np.linspace(0.0, float(max_spread), 801)
    best = (-np.inf, 0.0, float(np.mean(x)))
    for s in grid:
        w = 1.0 / (s * s + v + 1e-12)
        mu = float(np.sum(w * x) / np.sum(w)) if centre is None else float(centre)
        ll = 0.5 * np.sum(np.log(w)) - 0.5 * np.sum(w * (x - mu) ** 2)
        if ll > best[0]:
            best = (ll, float(s), mu)
    _, s, mu = best
    k = s * s / (s * s + v) if s > 0 else np.zeros_like(x)
    return mu + k * (x - mu), s, mu


def simulate_statistics(rng: np.random.Generator, a: np.ndarray, b: np.ndarray, n: int,
                        reps: int) -> tuple[np.ndarray, np.ndarray]:
    """``reps`` data sets of ``n`` persons from the 2PNO (θ ~ N(0, 1)): totals (reps, m) and
    disagreement counts D_ij (reps, P), exact counts."""
    m = a.size
    i, j = pair_index(m)
    tot = np.empty((reps, m))
    prs = np.empty((reps, i.size))
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    dtype = np.float32 if n < (1 << 24) else np.float64
    for r in range(reps):  # X = 1 ⟺ aθ − b > e, e ~ N(0, 1)
        th = rng.standard_normal(n, dtype=np.float32)
        X = (th[:, None] * a32 - b32 > rng.standard_normal((n, m), dtype=np.float32)).astype(dtype)
        G = np.einsum("li,lj->ij", X, X)  # not BLAS: its threads crawl on a busy machine
        tot[r] = np.diag(G)
        prs[r] = tot[r, i] + tot[r, j] - 2.0 * G[i, j]  # disagreements
    return tot, prs
