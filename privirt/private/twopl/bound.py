"""The information bound of the 2PNO release: how well any post-processing can estimate (τ, a, b)
from the noisy totals and disagreement counts (``docs/private_2pl.md``, "Difficulties").

Linearised at parameters (τ, log a), the expected proportions π_i = Φ(−τ_i) and
δ_ij = P(X_i ≠ X_j) have the Jacobian J (m + m(m − 1)/2 rows, 2m columns); the privacy noise adds
independent variances (σ_s/n)² and (σ_D/n)².  The covariance (Jᵀ Σ⁻¹ J)⁻¹ is then the smallest
noise-induced covariance of any unbiased estimate of (τ, log a) (Cramér–Rao for the Gaussian
approximation of the noise), and its image under b = τ √(1 + a²) that of b.  The error of b is
the threshold's error plus τ a²/√(1 + a²) times the error of log a: with the discriminations
estimated, b carries their error, which the Rasch totals estimator's β does not have.
"""

from __future__ import annotations

import numpy as np

from .fit import _model
from .statistics import pair_index

__all__ = ["jacobian", "noise_covariance", "relative_bounds", "relative_noise_bounds"]


def jacobian(tau: np.ndarray, a: np.ndarray) -> np.ndarray:
    """J: the derivatives of the expected proportions (π_i, then δ_ij, i < j) with respect to
    (τ, log a), shape (m + m(m − 1)/2, 2m) (central differences of the fit's model)."""
    tau, la = np.asarray(tau, float), np.log(np.asarray(a, float))
    m = tau.size
    i, j = pair_index(m)

    def model(th: np.ndarray) -> np.ndarray:
        return np.concatenate([x[0] for x in _model(th[None], m, i, j)[3:]])

    th = np.concatenate([tau, la, [0.0]])
    h = 1e-6
    J = np.empty((m + i.size, 2 * m))
    for c in range(2 * m):  # central differences of the proportions
        step = np.zeros(2 * m + 1)
        step[c] = h
        J[:, c] = (model(th + step) - model(th - step)) / (2 * h)
    return J


def noise_covariance(tau: np.ndarray, a: np.ndarray, n: int, sigma_totals: float,
                     sigma_pairs: float) -> np.ndarray:
    """(Jᵀ Σ⁻¹ J)⁻¹: the noise-only covariance bound of (τ, log a), shape (2m, 2m)."""
    m = np.asarray(tau).size
    J = jacobian(tau, a)
    i = pair_index(m)[0]
    w = np.concatenate([np.full(m, (n / sigma_totals) ** 2), np.full(i.size, (n / sigma_pairs) ** 2)])
    return np.linalg.inv(J.T @ (w[:, None] * J))


def relative_noise_bounds(tau: np.ndarray, a: np.ndarray, n: int, sigma_totals: float,
                          sigma_pairs: float) -> dict:
    """Root expected relative ℓ2 errors due to the noise at the bound: ``b`` and ``tau`` centred
    (‖x̂ − x‖/‖x‖ of the centred vectors, as difficulties are compared), ``a`` uncentred; and
    ``b_from_a`` and ``b_from_tau``, the parts of b's that come from the error of a and of τ alone
    (their squares add up to b's but for the covariance of the two)."""
    C = noise_covariance(tau, a, n, sigma_totals, sigma_pairs)
    return relative_bounds(C, tau, a)


def relative_bounds(C: np.ndarray, tau: np.ndarray, a: np.ndarray) -> dict:
    """The relative errors of :func:`relative_noise_bounds` for any covariance ``C`` of (τ, log a)
    (shape (2m, 2m)): b and τ centred, a uncentred (used for other releases' bounds too)."""
    tau, a = np.asarray(tau, float), np.asarray(a, float)
    m = tau.size
    q = np.sqrt(1.0 + a * a)
    b = tau * q
    G = np.zeros((m, 2 * m))  # ∂b/∂(τ, log a)
    G[np.arange(m), np.arange(m)] = q
    G[np.arange(m), m + np.arange(m)] = tau * a * a / q

    def centred_trace(V: np.ndarray) -> float:
        return float(np.trace(V - V.mean(0) - V.mean(1)[:, None] + V.mean()))

    Ga, Gt = G[:, m:], G[:, :m]
    return {
        "b": np.sqrt(centred_trace(G @ C @ G.T)) / np.linalg.norm(b - b.mean()),
        "b_from_a": np.sqrt(centred_trace(Ga @ C[m:, m:] @ Ga.T)) / np.linalg.norm(b - b.mean()),
        "b_from_tau": np.sqrt(centred_trace(Gt @ C[:m, :m] @ Gt.T)) / np.linalg.norm(b - b.mean()),
        "tau": np.sqrt(centred_trace(C[:m, :m])) / np.linalg.norm(tau - tau.mean()),
        "a": float(np.sqrt(np.sum(np.diag(C[m:, m:]) * a * a)) / np.linalg.norm(a)),
    }
