"""The pairs' terms of the 2PNO fit (``fit``): per-item sums over pairs, the scaled Jacobian of the
pair residuals and the pairs' parts of the normal equations, by numpy or, with numba installed
(the ``fast`` extra), by the one-pass kernels of :mod:`._pairs_numba` (``docs/private_2pl.md`` §3)."""

from __future__ import annotations

import functools

import numpy as np

from ..._backend import numba_available
from .orthant import orthant_gradients, orthant_hessian
from .statistics import pair_index


class _PairSums:
    """Per-item sums over pairs (``pair_index`` order, i < j): ``first(X)`` sums X (R, P) over the
    pairs whose first item is each item, ``second(X)`` over those whose second item is (R, m).
    The pairs come sorted by i, so a sum is one ``np.add.reduceat`` over contiguous runs (and a
    gather into j order for the second); it replaces the sparse scatter of the whole
    (R, P, 4, 4) block array into the (2m)² matrix."""

    def __init__(self, m: int):
        self.m = m
        self.i, self.j = pair_index(m)
        self.perm = np.argsort(self.j, kind="stable")
        self.items_i, self.start_i = np.unique(self.i, return_index=True)
        self.items_j, self.start_j = np.unique(self.j[self.perm], return_index=True)

    def first(self, X: np.ndarray) -> np.ndarray:
        out = np.zeros((X.shape[0], self.m))
        if self.i.size:
            out[:, self.items_i] = np.add.reduceat(X, self.start_i, axis=1)
        return out

    def second(self, X: np.ndarray) -> np.ndarray:
        out = np.zeros((X.shape[0], self.m))
        if self.j.size:
            # (np.take: 1.6× faster than the fancy-index gather at 10⁵–10⁶ pairs, the same values)
            out[:, self.items_j] = np.add.reduceat(np.take(X, self.perm, axis=1), self.start_j, axis=1)
        return out

    def both(self, X_first: np.ndarray, X_second: np.ndarray) -> np.ndarray:
        return self.first(X_first) + self.second(X_second)


def pair_regression(pc: np.ndarray, qc: np.ndarray, n_t, n_p, noise_t, noise_n, i: np.ndarray,
                    j: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The regression of each pair's disagreement proportion on its two items' proportions, and the
    SD about it, under the sampling law of a 2 × 2 table (cells from the observed proportions
    ``pc`` (R, m) and ``qc`` (R, P), each at least 1/(2n)) plus the independent noise variances
    ``noise_t``, ``noise_n``; ``n_t``, ``n_p`` the persons per total and per pair (under MCAR the
    pair's co-answerers are among each item's answerers).

    Returns
    -------
    beta_i, beta_j, sd : numpy.ndarray (R, P)
        D̂/n − β_i p̂_i − β_j p̂_j has variance sd² and is uncorrelated with (p̂_i, p̂_j): the
        pair's residual given the totals.  Where the items lie on opposite sides (p ≈ 0.8 and
        0.2) the disagreements are mostly fixed by the totals, and sd² is some 50 times below
        the marginal D(1 − D)/n (``docs/private_2pl.md`` §3).
    """
    R, m = pc.shape
    nt = np.broadcast_to(np.asarray(n_t, float), (R, m))
    vt = np.broadcast_to(np.asarray(noise_t, float), (R, m))
    ni, nj = nt[:, i], nt[:, j]
    npair = np.minimum(np.broadcast_to(np.asarray(n_p, float), qc.shape), np.minimum(ni, nj))
    p11 = 0.5 * (pc[:, i] + pc[:, j] - qc)
    cells = np.stack([p11, pc[:, i] - p11, pc[:, j] - p11, 1.0 - pc[:, i] - pc[:, j] + p11])
    cells = np.maximum(cells, 0.5 / npair)
    c11, c10, c01, _ = cells / cells.sum(axis=0)
    pi, pj, d = c11 + c10, c11 + c01, c10 + c01
    vii, vjj = pi * (1.0 - pi) / ni + vt[:, i], pj * (1.0 - pj) / nj + vt[:, j]
    vij = npair * (c11 - pi * pj) / (ni * nj)
    ci, cj = (c10 - pi * d) / ni, (c01 - pj * d) / nj  # Cov(p̂_i, D̂/n), Cov(p̂_j, D̂/n)
    det = vii * vjj - vij * vij
    bi, bj = (vjj * ci - vij * cj) / det, (vii * cj - vij * ci) / det
    vd = d * (1.0 - d) / npair + noise_n
    return bi, bj, np.sqrt(np.maximum(vd - bi * ci - bj * cj, 1e-12 * vd))


@functools.lru_cache(maxsize=4)
def _pair_sums(m: int) -> _PairSums:
    """The pair sums of m items (built once per m: the bootstrap's chunks share them)."""
    return _PairSums(m)



def _scaled_jacobian(tau: np.ndarray, lam: np.ndarray, r: np.ndarray, sd_t: np.ndarray, sd_n: np.ndarray,
                     i: np.ndarray, j: np.ndarray, beta: tuple | None = None):
    """The Jacobian of the scaled residuals at (τ, λ) (rows (R, m); r = λ_i λ_j (R, P)): per pair
    (u0, u1, u2, u3) = ∂[P(X_i ≠ X_j)/sd]/∂(τ_i, τ_j, log a_i, log a_j), per item dt =
    ∂[Φ(−τ_i)/sd]/∂τ_i, and (dλ/d log a, φ(τ), (∂U/∂h, ∂U/∂k, ∂U/∂r)) for the Newton terms (the
    orthant's second derivatives follow from its gradients).  ``beta`` = (β_i, β_j) (R, P): the
    pair's residual is that given its items' totals (:func:`pair_regression`), P − β_i Φ(−τ_i) −
    β_j Φ(−τ_j) the modelled value."""
    dh, dk, dr = orthant_gradients(tau[:, i], tau[:, j], r)
    grads = (dh, dk, dr)
    dlam = lam * (1.0 - lam * lam)  # dλ/d log a
    phi = np.exp(-0.5 * tau * tau) / np.sqrt(2 * np.pi)  # −∂Φ(−τ)/∂τ
    ki, kj = (1.0, 1.0) if beta is None else (1.0 - beta[0], 1.0 - beta[1])
    # ∂P(X_i ≠ X_j)/∂(τ_i, τ_j, r) = (−φ_i − 2 ∂U/∂h, −φ_j − 2 ∂U/∂k, −2 ∂U/∂r) (φ_i (1 − β_i) given the totals)
    dh, dk, dr = -phi[:, i] * ki - 2.0 * dh, -phi[:, j] * kj - 2.0 * dk, -2.0 * dr
    # the Jacobian of the scaled pair residuals w.r.t. (τ_i, τ_j, log a_i, log a_j), pair by pair
    inv = 1.0 / sd_n
    u0, u1 = dh * inv, dk * inv
    u2, u3 = dr * lam[:, j] * dlam[:, i] * inv, dr * lam[:, i] * dlam[:, j] * inv
    dt = -phi / sd_t  # ∂Φ(−τ)/∂τ, scaled
    return (u0, u1, u2, u3), dt, (dlam, phi, grads)


def _pair_terms(tau, lam, r, st, sn, rn, newton_rows, sums, beta=None):
    """The pairs' parts of the normal equations (numpy): the items' own entries (τ_iτ_i, ℓ_iℓ_i,
    τ_iℓ_i; the residuals' curvature added on the rows flagged in ``newton_rows``), the
    Gauss–Newton τ_iτ_i and ℓ_iℓ_i (the damping's scale), the gradient's τ and log a parts, the
    cross entries (τ_iτ_j, ℓ_iℓ_j, τ_iℓ_j, τ_jℓ_i; (R, P) each), and the items' dt and φ(τ);
    ``beta``: the pairs' residuals given the totals (:func:`_scaled_jacobian`)."""
    i, j = sums.i, sums.j
    (u0, u1, u2, u3), dt, (dlam, phi, grads) = _scaled_jacobian(tau, lam, r, st, sn, i, j, beta)
    ki, kj = (1.0, 1.0) if beta is None else (1.0 - beta[0][newton_rows], 1.0 - beta[1][newton_rows])
    # Gauss–Newton entries: an item's own (τ_i τ_i, ℓ_i ℓ_i, τ_i ℓ_i) summed over its pairs; the
    # cross entries (τ_i τ_j, ℓ_i ℓ_j, τ_i ℓ_j, τ_j ℓ_i) from one pair each
    own_tt, own_ll = sums.both(u0 * u0, u1 * u1), sums.both(u2 * u2, u3 * u3)
    own_tl = sums.both(u0 * u2, u1 * u3)
    gn_tt, gn_ll = own_tt.copy(), own_ll.copy()
    x_tt, x_ll, x_tl, x_lt = u0 * u1, u2 * u3, u0 * u3, u1 * u2
    k = np.flatnonzero(newton_rows)
    if k.size:
        # the residuals' curvature Σ r ∇²r (Newton rather than Gauss–Newton): where the noise
        # swamps the pairs the residuals stay large while the model flattens toward λ → 1,
        # and Gauss–Newton alone then crawls along that valley for a hundred iterations
        ti, tj, lk, rk = tau[k][:, i], tau[k][:, j], lam[k], r[k]
        uhh, ukk, uhk, uhr, ukr, urr = orthant_hessian(ti, tj, rk, gradients=tuple(x[k] for x in grads))
        urk = uhk  # ∂U/∂r = φ₂ = U_hk
        dl = dlam[k]
        d2l = dl * (1.0 - 3.0 * lk * lk)
        r3, r4 = dl[:, i] * lk[:, j], lk[:, i] * dl[:, j]
        w = -rn[k] / sn[k]  # ∇²r = −∇²P/sd for the residual r = (q − P)/sd
        ph = phi[k]
        # w × ∂²P(X_i ≠ X_j) over (τ_i, τ_j, log a_i, log a_j): 0 ↔ τ_i, 1 ↔ τ_j, 2 ↔ ℓ_i, 3 ↔ ℓ_j
        c00 = w * (ti * ph[:, i] * ki - 2.0 * uhh)
        c11 = w * (tj * ph[:, j] * kj - 2.0 * ukk)
        c22 = w * -2.0 * (urr * r3 * r3 + urk * d2l[:, i] * lk[:, j])
        c33 = w * -2.0 * (urr * r4 * r4 + urk * lk[:, i] * d2l[:, j])
        c02, c13 = w * -2.0 * uhr * r3, w * -2.0 * ukr * r4
        own_tt[k] += sums.both(c00, c11)
        own_ll[k] += sums.both(c22, c33)
        own_tl[k] += sums.both(c02, c13)
        x_tt[k] += w * -2.0 * uhk
        x_ll[k] += w * -2.0 * (urr * r3 * r4 + urk * dl[:, i] * dl[:, j])
        x_tl[k] += w * -2.0 * uhr * r4  # (τ_i, ℓ_j)
        x_lt[k] += w * -2.0 * ukr * r3  # (τ_j, ℓ_i)
    g_t, g_l = sums.both(u0 * rn, u1 * rn), sums.both(u2 * rn, u3 * rn)
    return own_tt, own_ll, own_tl, gn_tt, gn_ll, g_t, g_l, (x_tt, x_ll, x_tl, x_lt), dt, phi


#: The fit's pair terms (the model's disagreement probabilities, the normal equations' pair
#: entries): ``"auto"`` by the numba kernels of :mod:`._pairs_numba` when numba is installed (the
#: ``fast`` extra) and a row has at least :data:`NUMBA_FROM_PAIRS` pairs (below, a first call's
#: compilation would cost more than it saves), else by numpy; ``"numpy"``: always numpy.  The
#: two agree to round-off (BENCHMARKS.md, "Issue 25, thirteenth round").
PAIR_ENGINE: str = "auto"
NUMBA_FROM_PAIRS: int = 20_000


def _numba_kernels(pairs: int):
    """:mod:`._pairs_numba` where :data:`PAIR_ENGINE` takes it for rows of ``pairs`` pairs, else None."""
    if PAIR_ENGINE not in ("auto", "numpy"):
        raise ValueError(f'PAIR_ENGINE must be "auto" or "numpy", got {PAIR_ENGINE!r}')
    if PAIR_ENGINE == "numpy" or pairs < NUMBA_FROM_PAIRS or not numba_available():
        return None
    from . import _pairs_numba
    return _pairs_numba
