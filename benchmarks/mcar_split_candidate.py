"""A candidate budget split of the declared-MCAR 2PNO release, measured and NOT adopted
(``docs/private_2pl.md`` §6.2, "Re-derived for the shrunk denominators"; ``bench_private_2pl.py
--parts mcar_split``): the share g of the items' budget on the answered counts a_i and the share h
of the pairs' budget on the co-answered counts C_ij, from public n, m, ρ and a public reference
model and mask, pricing the denominators' noise at what their shrinkage
(:func:`privirt.private.twopl.mcar.shrink_denominators`) leaves of it.

Two criteria: ``"ratios"`` minimises the ratios' summed delta-method noise variance (the rule in
the package, with the James–Stein risks in place of the full noise); ``"linearised"`` the
linearised error of (a, b) of the fit (:func:`split_error`), which also counts the error that a′
carries into C′ through a′_i a′_j/n, common to an item's m − 1 pairs.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize, special, stats

from privirt._threads import one_blas_thread
from privirt.private.totals.marginal_missing import ANSWERED_PRIOR_SD, PRIOR_ICC_SD, REFERENCE_ANSWERED
from privirt.private.totals.shrinkage import SPREAD_PER_LOGIT
from privirt.private.twopl.bound import jacobian
from privirt.private.twopl.mcar import _reference, co_answered_parts
from privirt.private.twopl.measurement import TOTALS_SHARE
from privirt.private.twopl.statistics import pair_index

__all__ = ["js_risk", "mcar_shares", "split_error", "candidate_scales"]

#: quantile nodes of T in :func:`js_risk` and of the mask priors
_RISK_NODES = 32
_PRIOR_NODES = 6
#: g and h are searched in these bounds
SHARE_BOUNDS = (0.02, 0.8)
#: the linearised error is evaluated on at most this many reference items (the noise scales and
#: the shrinkages' dimensions are those of the real m)
_REFERENCE_ITEMS = 30


def js_risk(d: int, spread, var) -> np.ndarray:
    """R: the expected squared error, per coordinate and over the noise variance σ² (``var``),
    that the positive-part James–Stein factor c = max(0, 1 − (d − 2)σ²/T) leaves in d
    coordinates x = t + e shrunk toward a fixed point, the truths t ~ N(0, A) per coordinate
    (A = ``spread``); 1 for d < 3 (no shrinkage).  ``spread`` and ``var`` broadcast.

    With T = Σ x² ~ (A + σ²)χ²_d and k = A/(A + σ²) (the oracle factor), t | x ~ N(kx, kσ²)
    coordinatewise, so E[Σ (c x − t)² | T] = T (c − k)² + d k σ² (as for the totals' answered
    counts, ``docs/totals.md`` §7.2), averaged over quantile nodes of T.
    """
    A, v = np.broadcast_arrays(np.asarray(spread, dtype=float), np.asarray(var, dtype=float))
    if d < 3:
        return np.ones(A.shape)
    v = np.maximum(v, 1e-300)
    k = A / (A + v)
    T = (A + v)[..., None] * _chi2_nodes(d)
    c = np.clip(1.0 - (d - 2) * v[..., None] / T, 0.0, 1.0)
    return np.mean(T * (c - k[..., None]) ** 2, axis=-1) / (d * v) + k


@functools.lru_cache(maxsize=256)
def _chi2_nodes(d: int) -> np.ndarray:
    return stats.chi2.ppf((np.arange(_RISK_NODES) + 0.5) / _RISK_NODES, d)


def _mask_priors() -> tuple[float, np.ndarray, np.ndarray]:
    """(q, logit SDs of the items' answer rates, intra-class correlations φ of a person's answered
    indicators) at quantile nodes: the totals estimator's public reference mask and priors
    (``docs/totals.md`` §7.2: mean answered share 0.8; half-normal priors of scale 0.8 logits on
    the spread of the rates and 0.1 on φ)."""
    u = stats.halfnorm.ppf((np.arange(_PRIOR_NODES) + 0.5) / _PRIOR_NODES)
    return float(REFERENCE_ANSWERED), SPREAD_PER_LOGIT * ANSWERED_PRIOR_SD * u, PRIOR_ICC_SD * u


@functools.lru_cache(maxsize=64)
def _geometry(m: int):
    """(J, p, d, E, b): the reference model's Jacobian (:func:`~privirt.private.twopl.bound.jacobian`),
    proportions, pair-to-item incidence and difficulties, on m items."""
    p, d = _reference(m)
    b = special.ndtri((np.arange(m) + 0.5) / m)
    J = jacobian(b / math.sqrt(2.0), np.ones(m))
    i, j = pair_index(m)
    E = np.zeros((i.size, m))
    E[np.arange(i.size), i] = 1.0
    E[np.arange(i.size), j] = 1.0
    return J, p, d, E, b


def split_error(g: float, h: float, n: int, m: int, rho: float, totals_share: float = TOTALS_SHARE) -> float:
    """The linearised noise error of the MCAR fit at the reference model (a = 1, b at normal
    quantiles, a share q = 0.8 answered): relative squared error of a plus that of b (centred),
    with g of the items' budget on a and h of the pairs' on C (``docs/private_2pl.md`` §6.2).

    The noise of each ratio by the delta method, with the denominators as the shrinkage leaves
    them: a′ keeps its mean's noise σ_a²/m and R_a σ_a² in each centred coordinate; C′ − C is
    κ·q(δa′_i + δa′_j) (what a′_i a′_j/n carries, κ the mean of 1 − k over the priors) plus
    independent noise of the variance the James–Stein risk R_C σ_C² leaves beyond that.  The
    error of (τ, log a) is the sandwich H⁻¹ Bᵀ V B H⁻¹ of the fit's weighted least squares
    (weights 1/(sampling + noise variance) per ratio, as the fit's), mapped to b = τ√(1 + a²).
    """
    M, f, n = int(m), float(totals_share), float(n)
    mr = min(M, _REFERENCE_ITEMS)
    J, p, d, E, b = _geometry(mr)
    q, spreads, phis = _mask_priors()
    LD, LC = M * M // 3, M * (M - 1) // 2
    vs, va = M / (2 * f * (1 - g) * rho), M / (2 * f * g * rho)
    vD, vC = LD / (2 * (1 - f) * (1 - h) * rho), LC / (2 * (1 - f) * h * rho)
    A_a = (n * q * (1 - q) * (1 - phis[:, None]) + (n * q * (1 - q) * spreads[None, :]) ** 2).ravel()
    Ra = float(js_risk(M - 1, A_a, va).mean()) if M >= 4 else 1.0
    va_left = va * (1 + (M - 1) * Ra) / M
    A_c = n * q * q * (1 - q) ** 2 + (n * phis * q * (1 - q)) ** 2 + 2 * q * q * va_left
    if LC >= 3:
        Rc = float(js_risk(LC, A_c, vC).mean())
        kappa = float(np.mean(vC / (A_c + vC)))
    else:
        Rc, kappa = 1.0, 0.0
    v_ind = max(Rc * vC - kappa**2 * 2 * q * q * va_left, 0.0)
    Ni, Nij = n * q, n * q * q
    wp = 1.0 / (p * (1 - p) / Ni + (vs + p * p * va_left) / Ni**2)
    wd = 1.0 / (d * (1 - d) / Nij + (vD + d * d * Rc * vC) / Nij**2)
    Bp, Bd = J[:mr].T * wp, J[mr:].T * wd
    H = Bp @ J[:mr] + Bd @ J[mr:]
    Ma = -Bp * (p / Ni) - kappa * q * (Bd * (d / Nij)) @ E
    one = np.full((mr, 1), 1.0 / math.sqrt(mr))
    Sa = Ra * va * (np.eye(mr) - one @ one.T) + va * mr / M * (one @ one.T)  # the mean keeps σ_a²/m per item
    Ms, MD, MC = Bp / Ni, Bd / Nij, Bd * (d / Nij)
    V = vs * Ms @ Ms.T + Ma @ Sa @ Ma.T + vD * MD @ MD.T + v_ind * MC @ MC.T
    Hi = np.linalg.inv(H)
    C = Hi @ V @ Hi
    tau = b / math.sqrt(2.0)
    G = np.hstack([math.sqrt(2.0) * np.eye(mr), np.diag(tau / math.sqrt(2.0))])  # ∂b/∂(τ, log a) at a = 1
    Cb = G @ C @ G.T
    Cb = Cb - Cb.mean(0) - Cb.mean(1)[:, None] + Cb.mean()
    return float(np.trace(C[mr:, mr:]) / mr + np.trace(Cb) / np.sum((b - b.mean()) ** 2))


def mcar_shares(n_items: int, n_persons: int, rho: float, totals_share: float = TOTALS_SHARE,
                criterion: str = "linearised") -> tuple[float, float]:
    """(g, h) of the candidate rule; public n, m, ρ and the reference only.

    ``"ratios"``: E(g) = 1/(1 − g) + P₁(1 + (m − 1)R_a)/(m g) and E(h) = 1/(1 − h) + d̄²(L_C/L_D)R_C/h
    (the package's rule, R = 1, with the James–Stein risks R_a, R_C of :func:`js_risk` averaged
    over the reference mask's priors), each minimised on a grid.  ``"linearised"``: the minimiser
    of :func:`split_error` (coordinate search from the package's rule).
    """
    from privirt.private.twopl.mcar import mcar_shares as package_rule

    m, n, rho, f = int(n_items), int(n_persons), float(rho), float(totals_share)
    g0, h0 = package_rule(m)
    if m < 2:
        return g0, h0
    if criterion == "linearised":
        return _searched(m, n, rho, f, g0, h0)
    p, d = _reference(m)
    P1, d2 = float(np.mean(p * p)), float(np.mean(d * d))
    q, spreads, phis = _mask_priors()
    G = np.linspace(0.01, 0.8, 791)
    S = m / (2.0 * f * rho)
    A_a = (n * q * (1 - q) * (1 - phis[:, None]) + (n * q * (1 - q) * spreads[None, :]) ** 2).ravel()
    left = (1.0 + (m - 1) * js_risk(m - 1, A_a[None, :], (S / G)[:, None]).mean(axis=1)) / m
    j = int(np.argmin(1.0 / (1.0 - G) + P1 * left / G))
    LD, LC = m * m // 3, m * (m - 1) // 2
    A_c = n * q * q * (1 - q) ** 2 + (n * phis * q * (1 - q)) ** 2 + 2.0 * q * q * S / G[j] * left[j]
    R_c = js_risk(LC, A_c[None, :], (LC / (2.0 * (1.0 - f) * rho) / G)[:, None]).mean(axis=1)
    return float(G[j]), float(G[int(np.argmin(1.0 / (1.0 - G) + d2 * LC / LD * R_c / G))])


@functools.lru_cache(maxsize=256)
@one_blas_thread
def _searched(m: int, n: int, rho: float, f: float, g: float, h: float) -> tuple[float, float]:
    """Coordinate search of :func:`split_error`: g, then h, twice (bounded Brent to 0.002)."""
    lo, hi = SHARE_BOUNDS
    for _ in range(2):
        g = float(optimize.minimize_scalar(lambda x: split_error(x, h, n, m, rho, f), bounds=(lo, hi),
                                           method="bounded", options={"xatol": 2e-3}).x)
        h = float(optimize.minimize_scalar(lambda x: split_error(g, x, n, m, rho, f), bounds=(lo, hi),
                                           method="bounded", options={"xatol": 2e-3}).x)
    return g, h


def candidate_scales(n_persons: int, criterion: str = "linearised"):
    """A replacement for ``McarPairsGaussian._scales`` (a classmethod) giving the candidate's
    (σ_s, σ_a, σ_D, σ_C) for data of ``n_persons`` persons (the benchmark patches it in)."""

    def _scales(cls, m: int, rho: float, totals_share: float) -> tuple[float, ...]:
        f = float(totals_share)
        g, h = mcar_shares(m, n_persons, rho, f, criterion)
        L = [m, m, m * m // 3, m * (m - 1) // 2]
        shares = [f * (1 - g), f * g, (1 - f) * (1 - h), (1 - f) * h]
        return tuple(math.sqrt(max(l, 1) / (2.0 * s * rho)) for l, s in zip(L, shares))

    return classmethod(_scales)


def shrink_co_answered_given_c(C, a, var_a, n: int, sigma_c: float):
    """:func:`privirt.private.twopl.mcar.shrink_co_answered` with the noise variance left
    reported as c²σ_C² + (1 − c)² Var T_ij (the error of T + c(C̃ − T) for a given c) instead of
    c σ_C² + (1 − c) Var T_ij, which grows with σ_C where the estimated c exceeds the oracle
    factor (``docs/private_2pl.md`` §6.2, "Why small h loses"; exploratory, not adopted)."""
    parts = co_answered_parts(C, a, var_a, n, sigma_c)
    if parts is None:
        return np.asarray(C, float), np.full_like(np.asarray(C, float), float(sigma_c) ** 2)
    T, r, c, vt = parts
    return T + c * r, c * c * float(sigma_c) ** 2 + (1.0 - c) ** 2 * vt


def shrink_co_answered_given_c_sampling(C, a, var_a, n: int, sigma_c: float):
    """:func:`shrink_co_answered_given_c` plus the shrinkage's own error (1 − c)(T − C): the noise
    variance left reported as c²σ_C² + (1 − c)²(Var T_ij + A_ij), A_ij = T_ij(1 − a′_i/n)(1 − a′_j/n)
    the spread of C about T that independent missingness gives by sampling given the margins
    (``docs/private_2pl.md`` §6.2; exploratory)."""
    parts = co_answered_parts(C, a, var_a, n, sigma_c)
    if parts is None:
        return np.asarray(C, float), np.full_like(np.asarray(C, float), float(sigma_c) ** 2)
    T, r, c, vt = parts
    i, j = pair_index(np.asarray(a).shape[-1])
    q = np.clip(np.asarray(a, float) / float(n), 0.0, 1.0)
    A = np.maximum(T, 0.0) * (1.0 - q[..., i]) * (1.0 - q[..., j])
    return T + c * r, c * c * float(sigma_c) ** 2 + (1.0 - c) ** 2 * (vt + A)
