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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special
from scipy.linalg import lapack

from ..._threads import one_blas_thread
from ._pairs import _numba_kernels, _pair_sums, _pair_terms, _PairSums, pair_regression
from .orthant import _RULES, FEW_NODES_UP_TO, upper_orthant
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
    """Batched fit: thresholds ``tau`` and loadings ``lam`` (R, m); ``iterations`` used (by the
    slowest row), ``row_iterations`` (R,) by each row;
    ``log_a`` (R, m) and ``mean_log_a`` (R,) the fitted log a and their prior mean μ; with
    ``hessian=True``, ``hessian`` (the Newton matrices (R, 2m + 1, 2m + 1) at the fit, the priors'
    constant part) and ``gauss_newton`` (the Gauss–Newton matrices, priors included)."""

    tau: np.ndarray
    lam: np.ndarray
    iterations: int
    row_iterations: np.ndarray | None = None
    log_a: np.ndarray | None = None
    mean_log_a: np.ndarray | None = None
    hessian: tuple | None = None
    gauss_newton: np.ndarray | None = None

    def start(self) -> np.ndarray:
        """(τ, log a, μ) of the fit, (R, 2m + 1): a starting point for refits."""
        return np.concatenate([self.tau, self.log_a, self.mean_log_a[:, None]], axis=1)


def to_2pno(tau: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) of the 2PNO P = Φ(aθ − b) from thresholds and loadings."""
    q = np.sqrt(1.0 - lam * lam)
    return lam / q, tau / q


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


def _assemble(tt: np.ndarray, ll: np.ndarray, tl: np.ndarray, cross: tuple, m: int, i: np.ndarray,
              j: np.ndarray) -> np.ndarray:
    """The symmetric (R, 2m + 1, 2m + 1) matrix over (τ, log a, μ) from the items' own entries
    (τ_i τ_i, ℓ_i ℓ_i, τ_i ℓ_i; (R, m)) and the pairs' cross entries (τ_i τ_j, ℓ_i ℓ_j, τ_i ℓ_j,
    τ_j ℓ_i; (R, P)); the μ row and column are left 0 (the priors')."""
    x_tt, x_ll, x_tl, x_lt = cross
    H = np.zeros((tt.shape[0], 2 * m + 1, 2 * m + 1))
    kt, kl = np.arange(m), np.arange(m, 2 * m)
    H[:, kt, kt] = tt
    H[:, kl, kl] = ll
    H[:, kt, kl] = H[:, kl, kt] = tl
    for r, c, x in ((i, j, x_tt), (m + i, m + j, x_ll), (i, m + j, x_tl), (j, m + i, x_lt)):
        _put_symmetric(H, r, c, x)
    return H


def _put_symmetric(H: np.ndarray, r: np.ndarray, c: np.ndarray, x: np.ndarray) -> None:
    """H[:, r, c] = H[:, c, r] = x, through indices into the flattened matrices (a third of the
    time of the two-index assignment at 10⁵–10⁶ pairs)."""
    K = H.shape[1]
    flat = H.reshape(H.shape[0], K * K)  # a view: H is C-contiguous
    flat[:, r * K + c] = x
    flat[:, c * K + r] = x


#: Whether a row whose Levenberg–Marquardt step failed reuses the last iteration's normal equations
#: (its point and Newton flag unchanged, they are identical) rather than recomputing them: 22–41 %
#: of the steps fail where the noise swamps the pairs (BENCHMARKS.md, "Issue 25, twelfth round").
REUSE_FAILED_STEPS: bool = True

#: Whether a row's trial point is evaluated only where its step is a descent direction (only such a
#: step can be taken; the others' evaluation, 5–7 % of the trials where the noise swamps the pairs,
#: changed nothing): the same steps to the same point.
EVALUATE_DESCENT_ONLY: bool = True

#: Memory (bytes) for one batch of the fit's work arrays: a batch of R rows of m items holds about
#: :func:`batch_bytes` ``(m)`` × R (the pairs' quadrature nodes and Jacobian terms, the normal
#: matrices); larger batches (the bootstrap's refits) are fitted in chunks of rows, one after the
#: other.  The rows are independent, so the chunks change no result; without them a 200-replicate
#: bootstrap at m = 400 held 9 GB.
FIT_BATCH_BYTES: int = 1 << 28


def batch_bytes(m: int) -> int:
    """Bytes of work arrays one row of the fit holds at once at m items (an upper estimate)."""
    P = m * (m - 1) // 2
    return 8 * (40 * P + 4 * (2 * m + 1) ** 2)


def _row_slice(x, rows: slice, R: int):
    """``x`` (a scalar, an array broadcasting against (R, ·), or a pair of them) for ``rows``."""
    if isinstance(x, tuple):
        return tuple(_row_slice(v, rows, R) for v in x)
    a = np.asarray(x)
    return a[rows] if a.ndim == 2 and a.shape[0] == R and R > 1 else x


def fit_factor(totals: np.ndarray, pairs: np.ndarray, n: float | tuple, sigma_totals: float | np.ndarray,
               sigma_pairs: float | np.ndarray,
               *, max_iter: int = 100, tol: float = 1e-8,
               prior_sd: float | None = None, common: bool = False,
               start: np.ndarray | None = None, hessian: bool = False,
               tick: Callable[[int], None] | None = None) -> FactorFit:
    """Fit (τ, λ) to noisy totals (R, m) and pair counts (R, P) of ``n`` persons.

    ``n`` may also be a pair (n per total, n per pair), arrays broadcasting against the totals
    and the pairs (the answered and co-answered counts of an MCAR release, ``docs/private_2pl.md``
    §6), and the σ's arrays likewise (each coordinate's noise SD on the count scale).

    Weighted least squares on the proportions with weights 1/(p(1 − p)/n + σ²/n²) (p the
    observed proportion, clipped into [1/n, 1 − 1/n]; with 2 items of complete data the pair's
    residual given the totals and its variance, :func:`._pairs.pair_regression`) plus the weak
    prior on log a;
    Levenberg–Marquardt on (τ, log a) for every row of the batch at once (a row that has
    converged drops out of the batch): Gauss–Newton steps while they make headway, then
    Newton steps (the residuals' curvature added), which converge where the noise swamps the
    pairs and Gauss–Newton crawls (``docs/private_2pl.md`` §3).  ``prior_sd``: the SD of log a
    about the common value (default :data:`LOG_A_PRIOR_SD`).  ``common``: all a equal (one
    log a shared by every item: the steps are taken in that subspace).  ``start``: the
    starting (τ, log a, μ), shape (2m + 1,) or (R, 2m + 1) (default: τ from the observed
    proportions, a = 0.75); refits of simulated releases start at the values they were
    simulated from.

    The rows are fitted in chunks of at most :data:`FIT_BATCH_BYTES` of work arrays (the rows are
    independent: identical results); ``tick(k)`` is called as each chunk of ``k`` rows is done
    (a progress bar).
    """
    t = np.atleast_2d(np.asarray(totals, float))
    q = np.atleast_2d(np.asarray(pairs, float))
    R, m = t.shape
    size = max(1, FIT_BATCH_BYTES // batch_bytes(m))
    if R <= size:
        fit = _fit_batch(t, q, n, sigma_totals, sigma_pairs, max_iter=max_iter, tol=tol, prior_sd=prior_sd,
                         common=common, start=start, hessian=hessian)
        if tick is not None:
            tick(R)
        return fit
    parts = []
    for lo in range(0, R, size):
        rows = slice(lo, min(lo + size, R))
        parts.append(_fit_batch(t[rows], q[rows], _row_slice(n, rows, R), _row_slice(sigma_totals, rows, R),
                                _row_slice(sigma_pairs, rows, R), max_iter=max_iter, tol=tol, prior_sd=prior_sd,
                                common=common, start=None if start is None else _row_slice(start, rows, R),
                                hessian=hessian))
        if tick is not None:
            tick(rows.stop - rows.start)

    def cat(name):
        return np.concatenate([getattr(f, name) for f in parts], axis=0)

    hess = (np.concatenate([f.hessian[0] for f in parts], axis=0), parts[0].hessian[1]) if hessian else None
    return FactorFit(tau=cat("tau"), lam=cat("lam"), iterations=max(f.iterations for f in parts),
                     row_iterations=cat("row_iterations"), log_a=cat("log_a"), mean_log_a=cat("mean_log_a"),
                     hessian=hess, gauss_newton=cat("gauss_newton") if hessian else None)


@dataclass(frozen=True)
class FitWeights:
    """The proportions the fit takes and their weights (:func:`fit_weights`)."""

    t: np.ndarray  # totals / n, (R, m)
    q: np.ndarray  # disagreements / n, (R, P); at m = 2 the pair's residual given the totals
    n_t: Any
    sd_t: np.ndarray
    sd_n: np.ndarray  # each pair's (residual's) SD: sampling at the observed proportion + noise
    pair_noise: np.ndarray  # the noise's part of sd_n²
    beta: tuple | None  # the pair's regression on the two totals (m = 2, complete data)


def fit_weights(totals: np.ndarray, pairs: np.ndarray, n: float | tuple, sigma_totals: float | np.ndarray,
                sigma_pairs: float | np.ndarray) -> FitWeights:
    """Weighted least squares' data and weights for :func:`fit_factor` (and the level's noise
    share, :func:`.level.level_noise_share`): proportions, their SDs 1/√(p(1 − p)/n + σ²/n²) (p
    clipped into [1/n, 1 − 1/n]), and with two items of complete data the pair's residual given
    the two totals (:func:`._pairs.pair_regression`)."""
    # one n for every coordinate, or (n per total, n per pair): answered counts under MCAR (§6)
    n_t, n_p = (np.asarray(n[0], float), np.asarray(n[1], float)) if isinstance(n, tuple) else (n, n)
    t = np.atleast_2d(np.asarray(totals, float)) / n_t
    q = np.atleast_2d(np.asarray(pairs, float)) / n_p
    m = t.shape[1]
    pc, qc = np.clip(t, 1.0 / n_t, 1 - 1.0 / n_t), np.clip(q, 1.0 / n_p, 1 - 1.0 / n_p)
    noise_t, noise_n = (sigma_totals / n_t) ** 2, (sigma_pairs / n_p) ** 2
    sd_t = np.sqrt(pc * (1 - pc) / n_t + noise_t)
    sd_n = np.sqrt(qc * (1 - qc) / n_p + noise_n)
    pair_noise, beta = np.broadcast_to(noise_n, qc.shape), None
    if m == 2 and not isinstance(n, tuple):
        # the one pair's residual given the two totals (the full covariance of the three
        # proportions): weighted by its marginal variance, up to 50-fold too wide for items on
        # opposite sides, the pair looked nearly uninformative and the priors took the level;
        # from 3 items the pairs' own covariances would be needed too, and under MCAR the
        # totals count other persons than the pair (both left as they were)
        i, j = pair_index(m)
        bi, bj, sd_n = pair_regression(pc, qc, n_t, n_p, noise_t, noise_n, i, j)
        q = q - bi * t[:, i] - bj * t[:, j]
        vt = np.broadcast_to(noise_t, pc.shape)
        pair_noise, beta = noise_n + bi * bi * vt[:, i] + bj * bj * vt[:, j], (bi, bj)
    return FitWeights(t=t, q=q, n_t=n_t, sd_t=sd_t, sd_n=sd_n, pair_noise=pair_noise, beta=beta)


@one_blas_thread  # batched small solves: BLAS's threads only cost on shared cores (privirt._threads)
def _fit_batch(totals: np.ndarray, pairs: np.ndarray, n: float | tuple, sigma_totals: float | np.ndarray,
               sigma_pairs: float | np.ndarray,
               *, max_iter: int = 100, tol: float = 1e-8,
               prior_sd: float | None = None, common: bool = False,
               start: np.ndarray | None = None, hessian: bool = False) -> FactorFit:
    """One chunk of rows of :func:`fit_factor`."""
    S = LOG_A_PRIOR_SD if prior_sd is None else float(prior_sd)
    w = fit_weights(totals, pairs, n, sigma_totals, sigma_pairs)
    t, q, n_t, sd_t, sd_n, beta = w.t, w.q, w.n_t, w.sd_t, w.sd_n, w.beta
    R, m = t.shape
    sums = _pair_sums(m)
    i, j = sums.i, sums.j
    if start is None:
        theta = np.concatenate([-special.ndtri(np.clip(t, 0.5 / n_t, 1 - 0.5 / n_t)),
                                np.full((R, m + 1), np.log(0.75))], axis=1)  # τ, log a, μ
    else:
        theta = np.array(np.broadcast_to(np.asarray(start, float), (R, 2 * m + 1)))
    if common:
        theta[:, m:] = theta[:, m:2 * m].mean(axis=1, keepdims=True)
    mu = np.full(R, 1e-2)
    newton = np.zeros(R, bool)
    steps = np.zeros(R, np.int64)

    kernels = None if beta is not None else _numba_kernels(i.size)

    def evaluate(th, rows):
        """Residuals and the model state (τ, λ and, with numpy, r) at ``th`` for the batch rows ``rows``."""
        if kernels is None:
            tau, lam, r, pt, pn = _model(th, m, i, j)
            state = (tau, lam, r)
        else:
            tau, lam = th[:, :m], _loading(th[:, m:2 * m])
            pt, pn = special.ndtr(-tau), np.empty((th.shape[0], i.size))
            (x8, w8), (x12, w12) = _RULES[8], _RULES[12]
            if common:  # one loading a row: the rule's sines once a row, not once a pair (the same values)
                kernels.disagreement_one_loading(tau, lam[:, 0].copy(), pt, i, j, FEW_NODES_UP_TO, x8, w8, x12, w12, pn)
            else:
                kernels.disagreement(tau, lam, pt, i, j, FEW_NODES_UP_TO, x8, w8, x12, w12, pn)
            state = (tau, lam)
        if beta is not None:
            pn = pn - beta[0][rows] * pt[:, i] - beta[1][rows] * pt[:, j]
        res = ((t[rows] - pt) / sd_t[rows], (q[rows] - pn) / sd_n[rows], (th[:, -1:] - th[:, m:2 * m]) / S,
               -th[:, -1:] / MEAN_PRIOR_SD, -th[:, :m] / TAU_PRIOR_SD)
        return res, state

    def cost_of(res):
        return sum((x * x).sum(1) for x in res)

    def normal_eq(state, res, rows, newton_rows, reduce=False):
        """Gradient g = −∇(cost/2), the Gauss–Newton matrix plus, for the rows flagged in
        ``newton_rows``, the residuals' curvature Σ r ∇²r (the Newton matrix), and the
        Gauss–Newton diagonal D (positive: the damping's scale); ``reduce``: all three in the
        subspace of all a equal (:func:`_common_subspace` of them, the matrix assembled there)."""
        rt, rn, rp, r0, rtau = res
        tau, lam = state[:2]
        Rk = tau.shape[0]
        st, sn = sd_t[rows], sd_n[rows]
        if kernels is None:
            own_tt, own_ll, own_tl, gn_tt, gn_ll, g_t, g_l, cross, dt, phi = _pair_terms(
                tau, lam, state[2], st, sn, rn, newton_rows, sums, None if beta is None else (beta[0][rows], beta[1][rows]))
        else:  # one pass over the pairs (numba): the same terms to round-off
            own, gn, grad = (np.zeros((Rk, c, m)) for c in (3, 2, 2))
            x = np.empty((Rk, 4, i.size))
            kernels.pair_terms(tau, lam, rn, sn, newton_rows, i, j, own, gn, grad, x)
            (own_tt, own_ll, own_tl), (gn_tt, gn_ll), (g_t, g_l) = own.transpose(1, 0, 2), gn.transpose(1, 0, 2), \
                grad.transpose(1, 0, 2)
            cross = tuple(x.transpose(1, 0, 2))
            phi = np.exp(-0.5 * tau * tau) / np.sqrt(2 * np.pi)
            dt = -phi / st
        D = np.zeros((Rk, 2 * m + 1))
        D[:, :m] = gn_tt + dt * dt
        D[:, m:2 * m] = gn_ll
        H = _assemble_common(own_tt + dt * dt, own_ll, own_tl, cross, sums) if reduce else \
            _assemble(own_tt + dt * dt, own_ll, own_tl, cross, m, i, j)
        kt, k = np.arange(m), np.flatnonzero(newton_rows)
        if k.size:
            H[k[:, None], kt[None, :], kt[None, :]] += -rt[k] / st[k] * tau[k] * phi[k]  # ∂²Φ(−τ)/∂τ² = τ φ
        g = np.zeros((Rk, 2 * m + 1))
        g[:, :m] = g_t
        g[:, m:2 * m] = g_l
        g[:, :m] += dt * rt
        # the prior (residuals (μ − log a_i)/S, −μ/S_μ, −τ_i/S_τ: linear, no curvature)
        kk, S2 = np.arange(m, 2 * m), S * S
        if not reduce:  # (in the subspace the prior on log a_i − μ vanishes: its entries sum to 0)
            H[:, kk, kk] += 1.0 / S2
            H[:, -1, -1] += m / S2
            H[:, kk, -1] -= 1.0 / S2
            H[:, -1, kk] -= 1.0 / S2
        g[:, m:2 * m] += rp / S
        g[:, -1] -= rp.sum(1) / S
        H[:, -1, -1] += 1.0 / MEAN_PRIOR_SD**2
        g[:, -1] += r0[:, 0] / MEAN_PRIOR_SD
        H[:, kt, kt] += 1.0 / TAU_PRIOR_SD**2
        g[:, :m] += rtau / TAU_PRIOR_SD
        D[:, m:2 * m] += 1.0 / S2
        D[:, :m] += 1.0 / TAU_PRIOR_SD**2
        D[:, -1] += m / S2 + 1.0 / MEAN_PRIOR_SD**2
        if reduce:
            _, g, D = _common_subspace(None, g, D, m)
        return H, g, D

    everyone = np.arange(R)
    res, state = evaluate(theta, everyone)
    cost = cost_of(res)
    active = everyone
    it = 0
    kept = None  # the last iteration's undamped (rows, H, g, d, which rows can reuse them)
    for it in range(1, max_iter + 1):
        # only the rows still converging are computed (one slow replicate no longer costs the batch)
        rows = active
        # the normal equations of a row whose last step failed (same point, same Newton flag) are
        # those of the last iteration: reused, only the damping rises (identical values)
        reuse = np.zeros(rows.size, bool) if kept is None or not REUSE_FAILED_STEPS \
            else kept[4][np.searchsorted(kept[0], rows)]
        fresh = rows[~reuse]
        if fresh.size:  # the subspace (τ, ℓ) ↦ (τ, ℓ, …, ℓ, μ = ℓ) where common
            new = normal_eq(tuple(x[fresh] for x in state), tuple(x[fresh] for x in res), fresh, newton[fresh],
                            reduce=common)
        if not reuse.any():
            H, g, d = new
        else:
            old = np.searchsorted(kept[0], rows[reuse])
            H, g, d = (np.empty((rows.size,) + x.shape[1:]) for x in kept[1:4])
            for x, x_old, x_new in zip((H, g, d), kept[1:4], new if fresh.size else (None,) * 3):
                x[reuse] = x_old[old]
                if fresh.size:
                    x[~reuse] = x_new
        # Levenberg–Marquardt on the Newton matrix, damped by the (positive) Gauss–Newton diagonal;
        # a step that is not a descent direction (the Newton matrix can be indefinite far from the
        # optimum) counts as a failed step and raises the damping
        k = np.arange(H.shape[1])
        diagonal = H[:, k, k].copy()
        H[:, k, k] += mu[rows, None] * d + 1e-12  # damped in place for the solve, then restored
        step = _solve(H, g)
        H[:, k, k] = diagonal
        was_newton = newton[rows].copy()
        descent = np.einsum("rk,rk->r", step, g) > 0
        if common:  # back to (τ, log a, μ)
            step = np.concatenate([step, np.repeat(step[:, -1:], m, axis=1)], axis=1)
        trial = theta[rows] + step
        # only a descent step can be taken: the model is evaluated at those trials alone (the rows
        # are independent, so the others' evaluation changed nothing but the time)
        tried = slice(None) if descent.all() or not EVALUATE_DESCENT_ONLY else descent
        res2, state2 = evaluate(trial[tried], rows[tried])
        cost2 = np.full(rows.size, np.inf)
        cost2[tried] = cost_of(res2)
        better = (cost2 <= cost[rows]) & descent
        up = rows[better]
        theta[up] = trial[better]
        for x, x2 in zip(res + state, res2 + state2):
            x[up] = x2[better[tried]]
        gain = np.zeros(rows.size)
        gain[better] = cost[up] - cost2[better]
        cost[up] = cost2[better]
        mu[rows] = np.where(better, np.maximum(mu[rows] / 3.0, 1e-9), np.minimum(mu[rows] * 4.0, 1e12))
        done = (better & (gain <= tol * (1.0 + cost[rows]))) | (mu[rows] >= 1e12)
        # Gauss–Newton while it makes headway (far from the optimum the Newton matrix is often
        # indefinite), Newton once it slows down (small relative gains, or failed steps)
        newton[rows] |= (better & (gain <= 1e-3 * (1.0 + cost[rows]))) | (~better & (mu[rows] >= 1.0))
        steps[rows] += 1
        kept = (rows, H, g, d, ~better & (newton[rows] == was_newton))
        active = rows[~done]
        if active.size == 0:
            break
    tau, lam = theta[:, :m], _loading(theta[:, m:2 * m])
    hess = gn = None
    if hessian:  # the objective's curvature at the optimum (Newton matrix), and the priors' part;
        # and the Gauss–Newton matrix (positive definite with the priors: the fallback where the
        # Newton matrix is not, at a fit that stopped short of a minimum)
        H, _, _ = normal_eq(state, res, everyone, np.ones(R, bool))
        hess = (H, _prior_hessian(m, S))
        gn, _, _ = normal_eq(state, res, everyone, np.zeros(R, bool))
    return FactorFit(tau=tau, lam=lam, iterations=it, row_iterations=steps, log_a=theta[:, m:2 * m].copy(),
                     mean_log_a=theta[:, -1].copy(), hessian=hess, gauss_newton=gn)


#: From this size of the normal equations (2m + 1, or m + 1 with all a equal) each row's damped
#: system is solved by Cholesky (LAPACK ``posv``: 1.5–1.65× faster than the batched LU at 129–2001
#: unknowns, measured on one thread), by LU only where it is not positive definite (a Newton
#: matrix far from the optimum); below, the batched LU of many small systems at once.
CHOLESKY_FROM: int = 128


def _solve(A: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Solve A_r x_r = g_r for each row r of a batch (A (R, k, k) symmetric); a singular system
    gives the zero step (a failed step: the damping rises)."""
    if A.shape[1] < CHOLESKY_FROM:
        try:
            return np.linalg.solve(A, g[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            return np.zeros_like(g)
    out = np.zeros_like(g)
    for r in range(A.shape[0]):
        # A[r] is symmetric: its transpose, the same matrix in Fortran order, reaches LAPACK by a
        # plain copy instead of a transposing one (a sixth of the solve's time at 2001 unknowns)
        At = A[r].T
        _, x, info = lapack.dposv(At, g[r])
        if info > 0:  # not positive definite
            _, _, x, info = lapack.dgesv(At, g[r])
        if info == 0 and np.all(np.isfinite(x)):
            out[r] = x
    return out


def _assemble_common(tt: np.ndarray, ll: np.ndarray, tl: np.ndarray, cross: tuple, sums: _PairSums) -> np.ndarray:
    """:func:`_assemble`'s matrix in the subspace of all a equal, Tᵀ H T (:func:`_common_subspace`),
    from the same entries without the (2m + 1)² matrix: the τ block, each τ_i's entries over
    every log a summed, and the sum of the whole log a block; the μ row and column's share left 0."""
    x_tt, x_ll, x_tl, x_lt = cross
    m = sums.m
    H = np.zeros((tt.shape[0], m + 1, m + 1))
    kt = np.arange(m)
    H[:, kt, kt] = tt
    _put_symmetric(H, sums.i, sums.j, x_tt)
    H[:, :m, m] = H[:, m, :m] = tl + sums.first(x_tl) + sums.second(x_lt)
    H[:, m, m] = ll.sum(axis=1) + 2.0 * x_ll.sum(axis=1)
    return H


def _common_subspace(H: np.ndarray | None, g: np.ndarray, d: np.ndarray, m: int):
    """Tᵀ H T, gᵀ T and the damping diagonal in the subspace of all a equal, T: (τ, ℓ) ↦ (τ, ℓ, …,
    ℓ, μ = ℓ), by sums over the log a and μ block (O(m²); the product with T cost O(m³));
    ``H=None``: g and d only."""
    R = g.shape[0]
    Hc = None if H is None else np.empty((R, m + 1, m + 1))
    if H is not None:
        Hc[:, :m, :m] = H[:, :m, :m]
        Hc[:, :m, m] = Hc[:, m, :m] = H[:, :m, m:].sum(axis=2)
        Hc[:, m, m] = H[:, m:, m:].sum(axis=(1, 2))
    gc = np.concatenate([g[:, :m], g[:, m:].sum(axis=1, keepdims=True)], axis=1)
    dc = np.concatenate([d[:, :m], d[:, m:].sum(axis=1, keepdims=True)], axis=1)
    return Hc, gc, dc


def _prior_hessian(m: int, S: float) -> np.ndarray:
    """The priors' part of the (half) objective's Hessian over (τ, log a, μ): constant."""
    H = np.zeros((2 * m + 1, 2 * m + 1))
    kk = np.arange(m, 2 * m)
    H[kk, kk] = 1.0 / S**2
    H[kk, -1] = H[-1, kk] = -1.0 / S**2
    H[-1, -1] = m / S**2 + 1.0 / MEAN_PRIOR_SD**2
    H[np.arange(m), np.arange(m)] = 1.0 / TAU_PRIOR_SD**2
    return H


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


#: Above this many persons the bootstrap draws the sampling part of the statistics from the
#: Gaussian with their exact means and the covariance of this many persons simulated once
#: (``docs/private_2pl.md`` §3): simulating every replicate's n persons cost O(reps · n · m²).
SIM_PERSONS: int = 2000


@one_blas_thread
def simulate_statistics(rng: np.random.Generator, a: np.ndarray, b: np.ndarray, n: int,
                        reps: int, *, exact: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``reps`` data sets of ``n`` persons from the 2PNO (θ ~ N(0, 1)): totals (reps, m) and
    disagreement counts D_ij (reps, P).

    Up to :data:`SIM_PERSONS` persons (or ``exact=True``) the exact counts of simulated data
    sets; above, the central-limit draw: the exact expected counts n·Φ(−τ), n·δ_ij plus a
    Gaussian whose covariance is n times that of one person's (x_i, [x_i ≠ x_j]) vector,
    estimated from :data:`SIM_PERSONS` simulated persons (a multiplier draw W·V, never the
    covariance matrix itself)."""
    m = a.size
    i, j = pair_index(m)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    if exact or (exact is None and n <= SIM_PERSONS):
        tot = np.empty((reps, m))
        prs = np.empty((reps, i.size))
        dtype = np.float32 if n < (1 << 24) else np.float64
        for r in range(reps):  # X = 1 ⟺ aθ − b > e, e ~ N(0, 1)
            th = rng.standard_normal(n, dtype=np.float32)
            X = (th[:, None] * a32 - b32 > rng.standard_normal((n, m), dtype=np.float32)).astype(dtype)
            G = X.T @ X  # BLAS, one thread (its threads crawl on a busy machine; exact in float32 below 2²⁴)
            tot[r] = np.diag(G)
            prs[r] = tot[r, i] + tot[r, j] - 2.0 * G[i, j]  # disagreements
        return tot, prs
    N = SIM_PERSONS
    th = rng.standard_normal(N, dtype=np.float32)
    X = (th[:, None] * a32 - b32 > rng.standard_normal((N, m), dtype=np.float32)).astype(np.float32)
    W = rng.standard_normal((reps, N), dtype=np.float32)
    scale = np.sqrt(n / (N - 1.0))
    q = np.sqrt(1.0 + a * a)
    tau, lam = b / q, a / q
    pt = special.ndtr(-tau)
    tot = n * pt + scale * (W @ (X - X.mean(axis=0)))
    prs = np.empty((reps, i.size))
    step = max(1, (1 << 22) // N)  # columns per chunk (a chunk of V is N × step floats)
    for c in range(0, i.size, step):
        ic, jc = i[c:c + step], j[c:c + step]
        V = X[:, ic] + X[:, jc] - 2.0 * X[:, ic] * X[:, jc]
        V -= V.mean(axis=0)
        prs[:, c:c + step] = n * (pt[ic] + pt[jc] - 2.0 * upper_orthant(tau[ic], tau[jc], lam[ic] * lam[jc])) \
            + scale * (W @ V)
    return tot, prs
