"""Linearised refits of the noise-aware spectral bootstrap (``refits="one_step"``).

A full refit (:func:`~privirt.private.counts.noisy_likelihood.noise_aware_batch`) runs Fisher
scoring with the evidence update of τ² to convergence: ~14 steps at m = 2000, each an m × m
Cholesky factor and its inverse per replicate.  The one-step refit linearises a replicate's
quasi-score at the simulation point β̄, the full fit of the simulation law's expected counts
``n·E[p_i(1 − p_j)]`` (where the refits' mean lies): ``U(β) ≈ U(β̄) − J(β − β̄)``, with ``J``
the expected counts' score Jacobian at β̄ factorised ONCE, by its eigendecomposition
``J = V diag(f) Vᵀ``, for every replicate of that point.  A replicate's penalised fixed point is
then

    β(τ²) = V diag(1/(f + 1/τ²)) Vᵀ (U(β̄) + Jβ̄),

one Fisher step from β̄, and its evidence update ``τ² = ‖β(τ²)‖²/γ(τ²)``,
``γ = Σ f_k/(f_k + 1/τ²)``, is iterated on the eigenvalues alone (m numbers a step), so each
replicate keeps its own τ² as a full refit does.  Per replicate: one score (its own smoothed
discordant counts in the weights, m² pairs) and two m × m products with V; per point: one full
fit and one ``eigh``.  Post-processing of the release (it reads the simulated replicates and
the public law only); ``docs/intervals.md`` §4c.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._design import GraphDesign
from .noisy_likelihood import GUARD_PRECISION, TAU2_FLOOR, _design_effect, noise_aware_batch

__all__ = ["LinearPoint", "linear_point", "one_step_batch"]

#: Evidence (τ²) iterations at most per replicate (each costs m numbers; the full refits stop
#: at 100 Fisher steps).
_TAU2_MAX_ITER: int = 1000


@dataclass(frozen=True)
class LinearPoint:
    """The shared linearisation of one simulation law: β̄, ``p`` on the pairs there, the
    eigendecomposition (f, V) of the Jacobian J and ``Vᵀ J β̄``."""

    beta0: np.ndarray
    p: np.ndarray
    f: np.ndarray
    V: np.ndarray
    f_beta0: np.ndarray


def _pair_terms(beta: np.ndarray, design: GraphDesign) -> tuple[np.ndarray, np.ndarray]:
    """P(i right, j wrong | discordant) on the graph's pairs and p(1 − p)."""
    p = 1.0 / (1.0 + np.exp(beta[design.I] - beta[design.J]))
    return p, p * (1.0 - p)


def _smoothed(D: np.ndarray, design: GraphDesign) -> np.ndarray:
    """Discordant counts (R, pairs) -> their row-effect fits u_i + u_j floored at 1 (as the fits)."""
    u = design.row_effects(design.abs_t @ D.T).T
    return np.maximum(u[:, design.I] + u[:, design.J], 1.0)


def linear_point(expected_counts: np.ndarray, design: GraphDesign, noise_var: float, *,
                 tol: float = 1e-8) -> LinearPoint:
    """The shared linearisation of a simulation law with expected counts (m, m): the full fit
    β̄ of those counts (noise-free; to ``tol``), where the refits' mean lies, and the eigen-
    decomposition of the score's expected Jacobian there (one full fit and one ``eigh``)."""
    I, J, m = design.I, design.J, design.m
    Yx = np.where(design.graph, expected_counts, 0.0)[None]
    beta0 = noise_aware_batch(Yx, design.graph, noise_var, tol=tol, design=design)[0]
    p, pq = _pair_terms(beta0, design)
    a = expected_counts[I, J]
    D = a + expected_counts[J, I]
    Dw = _smoothed(D[None], design)[0]
    v = pq * (_design_effect(I.size, m) * Dw - 2.0 * noise_var) + noise_var
    # the Jacobian of the expected counts' score s = g·r/v (g = Dw·pq, r = a − p·D) in
    # x = β_i − β_j, weights ds/dx: its residual carries D itself (not the smoothed Dw of
    # Fisher scoring's g²/v), and at β̄ (shrunk) the residual is not zero
    w = pq * (Dw * pq * D / v - (1.0 - 2.0 * p) * (a - p * D) * Dw * noise_var / (v * v))
    F = np.zeros((m, m))
    F[I, J] = -w
    F[J, I] = -w
    F[np.diag_indices(m)] = -F.sum(axis=1)
    f, V = np.linalg.eigh(F)
    f = np.clip(f, 0.0, None)
    f[np.argmin(f)] = 0.0  # the constant direction (a connected graph's Laplacian)
    return LinearPoint(beta0=beta0, p=p, f=f, V=V, f_beta0=f * (V.T @ beta0))


def one_step_batch(Y: np.ndarray, point: LinearPoint, design: GraphDesign, noise_var: float, *,
                   tol: float = 1e-8) -> np.ndarray:
    """The one-step refits (shrunk β, (R, m)) of noisy counts ``Y`` (R, m, m) at ``point``.

    Each replicate's score at β̄ (its own smoothed discordant counts in the weights, as a
    full refit), one Fisher step with the shared factor, and its own τ² by the evidence
    fixed point started at 1 (stopped when its relative change falls below ``tol``, at most
    :data:`_TAU2_MAX_ITER` times); τ² at the floor gives equal difficulties, as the full refit.
    """
    I, J, m = design.I, design.J, design.m
    Y = np.asarray(Y, dtype=np.float64)
    a = Y[:, I, J]
    Dt = a + Y[:, J, I]
    Dw = _smoothed(Dt, design)
    kappa = _design_effect(I.size, m)
    p = point.p
    pq = p * (1.0 - p)
    s = Dw * pq * (a - p * Dt) / (pq * (kappa * Dw - 2.0 * noise_var) + noise_var)
    U = (design.inc_t @ s.T).T  # (R, m): the score at β̄
    c = U @ point.V + point.f_beta0  # Vᵀ(U + Jβ̄), (R, m)
    c[:, np.argmin(point.f)] = 0.0  # centred: no component on the ones
    f = point.f[None, :]
    c2 = c * c
    tau2 = np.ones(Y.shape[0])
    todo = np.arange(Y.shape[0])
    for _ in range(_TAU2_MAX_ITER):
        t = tau2[todo, None]
        d = f + 1.0 / t
        gamma = np.sum(f / d, axis=1)
        new = np.clip(np.sum(c2[todo] / (d * d), axis=1) / np.maximum(gamma, 1e-300), TAU2_FLOOR,
                      1.0 / GUARD_PRECISION)
        old = tau2[todo]
        change = np.where((new == TAU2_FLOOR) & (old == TAU2_FLOOR), 0.0, np.abs(new - old) / old)
        tau2[todo] = new
        todo = todo[change >= tol]
        if todo.size == 0:
            break
    beta = (c / (f + 1.0 / tau2[:, None])) @ point.V.T
    beta -= beta.mean(axis=1, keepdims=True)
    beta[tau2 <= TAU2_FLOOR] = 0.0
    return beta
