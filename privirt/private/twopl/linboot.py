"""Linearised refits of the 2PNO bootstrap's replicates (the default from 10 000 persons or 200
items: ``estimate.BOOTSTRAP_REFITS``, ``LINEAR_REFITS_MIN_PERSONS``, ``LINEAR_REFITS_MIN_ITEMS``;
``docs/private_2pl.md`` §3, "Intervals").

Every replicate of the parametric bootstrap is simulated at the same point x0 = (τ, log a, μ),
so the model's Jacobian J at x0 and the Gauss–Newton matrix A = JᵀWJ + H_prior (W the inverse
variances of the MODEL proportions at x0 plus the known noise variances, H_prior the priors'
constant Hessian) are the same for every replicate: A is factored once (Cholesky) and each
replicate's step is δ_k = A⁻¹ (Jᵀ W r_k − H_prior x0), r_k = y_k − model(x0) (the second term
the priors' gradient at x0: the step is a Gauss–Newton step of :func:`fit.fit_factor`'s
objective, with fixed weights).  The right-hand sides are per-pair 4-vectors scattered with the
pair sums: O(P) per replicate, no orthant evaluations.  ``steps=2`` (a chord step) evaluates
the residual once more at x0 + δ_k and solves with the same factorisation, which captures the
first nonlinear (bias) term.

The Jacobian and the assembly of A are the fit's own (``_pairs._scaled_jacobian``,
``fit._assemble``, which ``fit_factor``'s normal equations use), and the rows go in the fit's
chunks (``fit.FIT_BATCH_BYTES``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import linalg

from ..._threads import one_blas_thread
from ._pairs import _pair_sums, _scaled_jacobian
from .fit import FIT_BATCH_BYTES, LOG_A_PRIOR_SD, FactorFit, _assemble, _loading, _model, _prior_hessian, batch_bytes

__all__ = ["linear_refits"]


class _Linearisation:
    """J, W and the Cholesky factor of A at x0 (``m`` items, scalar ``n`` and noise SDs)."""

    def __init__(self, x0: np.ndarray, n: float, sigma_totals: float, sigma_pairs: float, prior_sd: float):
        m = (x0.size - 1) // 2
        self.m, self.x0 = m, x0
        self.sums = sums = _pair_sums(m)
        i, j = sums.i, sums.j
        self.n = float(n)
        tau, lam, r, pt, pn = _model(x0[None, :], m, i, j)
        self.pt, self.pn = pt, pn
        pc, qc = np.clip(pt, 1.0 / n, 1 - 1.0 / n), np.clip(pn, 1.0 / n, 1 - 1.0 / n)
        self.sd_t = np.sqrt(pc * (1 - pc) / n + (sigma_totals / n) ** 2)
        self.sd_n = np.sqrt(qc * (1 - qc) / n + (sigma_pairs / n) ** 2)
        self.u, self.dt, _ = _scaled_jacobian(tau, lam, r, self.sd_t, self.sd_n, i, j)
        u0, u1, u2, u3 = self.u
        A = _assemble(sums.both(u0 * u0, u1 * u1) + self.dt * self.dt, sums.both(u2 * u2, u3 * u3),
                      sums.both(u0 * u2, u1 * u3), (u0 * u1, u2 * u3, u0 * u3, u1 * u2), m, i, j)[0]
        self.prior = _prior_hessian(m, prior_sd)
        self.A = A + self.prior
        self.factor = linalg.cho_factor(self.A)

    def rhs(self, rt: np.ndarray, rn: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """Jᵀ W r − H_prior θ for scaled residuals rt (R, m), rn (R, P) at θ (R, 2m + 1)."""
        m, sums = self.m, self.sums
        u0, u1, u2, u3 = self.u
        g = -theta @ self.prior  # the priors' gradient (quadratic priors, centred at 0)
        g[:, :m] += sums.both(u0 * rn, u1 * rn) + self.dt * rt
        g[:, m:2 * m] += sums.both(u2 * rn, u3 * rn)
        return g

    def step(self, g: np.ndarray) -> np.ndarray:
        return linalg.cho_solve(self.factor, g.T).T


@one_blas_thread
def linear_refits(totals: np.ndarray, pairs: np.ndarray, n: float, sigma_totals: float, sigma_pairs: float,
                  start: np.ndarray, *, steps: int = 1, prior_sd: float | None = None,
                  tick: Callable[[int], None] | None = None) -> FactorFit:
    """Refits of replicates (totals (R, m), disagreement counts (R, P)) simulated at ``start``
    (2m + 1,) by ``steps`` (1 or 2) Gauss–Newton/chord steps from ``start`` with the Jacobian,
    weights and factorisation of ``start`` (module docstring).  No missingness: one ``n`` and
    scalar noise SDs.  ``tick(k)`` as each chunk of ``k`` rows is done."""
    if steps not in (1, 2):
        raise ValueError(f"steps must be 1 or 2, got {steps!r}")
    x0 = np.asarray(start, float)
    t = np.atleast_2d(np.asarray(totals, float))
    q = np.atleast_2d(np.asarray(pairs, float))
    R, m = t.shape
    lin = _Linearisation(x0, n, sigma_totals, sigma_pairs, LOG_A_PRIOR_SD if prior_sd is None else prior_sd)
    i, j = lin.sums.i, lin.sums.j
    size = max(1, FIT_BATCH_BYTES // batch_bytes(m))
    theta = np.empty((R, 2 * m + 1))
    for lo in range(0, R, size):
        rows = slice(lo, min(lo + size, R))
        th = np.broadcast_to(x0, (rows.stop - rows.start, 2 * m + 1))
        rt = (t[rows] / lin.n - lin.pt) / lin.sd_t
        rn = (q[rows] / lin.n - lin.pn) / lin.sd_n
        th = th + lin.step(lin.rhs(rt, rn, th))
        if steps == 2:  # the chord step: residuals at x0 + δ, the same J, W and factorisation
            _, _, _, pt, pn = _model(th, m, i, j)
            rt = (t[rows] / lin.n - pt) / lin.sd_t
            rn = (q[rows] / lin.n - pn) / lin.sd_n
            th = th + lin.step(lin.rhs(rt, rn, th))
        theta[rows] = th
        if tick is not None:
            tick(rows.stop - rows.start)
    return FactorFit(tau=theta[:, :m].copy(), lam=_loading(theta[:, m:2 * m]), iterations=steps,
                     row_iterations=np.full(R, steps), log_a=theta[:, m:2 * m].copy(),
                     mean_log_a=theta[:, -1].copy())
