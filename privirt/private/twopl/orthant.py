"""Upper-orthant probabilities of the standard bivariate normal and their derivatives.

U(h, k; r) = P(Z₁ > h, Z₂ > k) for standard normals with correlation r:
U = Φ(−h)Φ(−k) + ∫₀^r φ₂(h, k; t) dt (Plackett's identity ∂U/∂r = φ₂), computed with the
substitution t = sin ψ (smooth up to |r| → 1) and 12 Gauss–Legendre nodes (8 where |r| ≤ 0.75),
vectorised over any array shape (``docs/private_2pl.md`` §3).  scipy's multivariate normal CDF is exact but is
called one point at a time; this is accurate to 6.1e-9 for |r| ≤ 0.97 and 8.1e-12 for |r| ≤ 0.9 (24 nodes gained nothing
measurable at twice the cost) (tests compare it).
"""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["upper_orthant", "orthant_gradients", "orthant_hessian"]

#: Gauss–Legendre rules in ψ: 12 nodes, and 8 where |r| ≤ :data:`FEW_NODES_UP_TO` (there 8 nodes
#: are within 8.1e-12 of the exact value over h, k ∈ [−6, 6]; the fit's correlations λ_i λ_j mostly
#: lie there)
_RULES = {n: (0.5 * (x + 1.0), w) for n, (x, w) in ((n, np.polynomial.legendre.leggauss(n)) for n in (8, 12))}
FEW_NODES_UP_TO = 0.75
_INV_2PI = 1.0 / (2.0 * np.pi)


def _integral(top: np.ndarray, hk: np.ndarray, hh: np.ndarray, nodes: int) -> np.ndarray:
    """∫₀^top exp((hk sin ψ − hh)/cos²ψ) dψ by the Gauss–Legendre rule of ``nodes`` nodes (1-d
    arrays), one node at a time into two work arrays (a (…, nodes) array of them all at once
    cost 1.3–1.5× as much at 10⁴–10⁵ pairs, from memory traffic)."""
    acc = np.zeros(top.shape)
    s, c2 = np.empty(top.shape), np.empty(top.shape)
    for x, w in zip(*_RULES[nodes]):
        np.multiply(top, x, out=s)
        np.sin(s, out=s)
        np.multiply(s, s, out=c2)
        np.subtract(1.0, c2, out=c2)
        s *= hk
        s -= hh
        s /= c2
        np.exp(s, out=s)
        s *= w
        acc += s
    return 0.5 * top * acc


def upper_orthant(h: np.ndarray, k: np.ndarray, r: np.ndarray) -> np.ndarray:
    """P(Z₁ > h, Z₂ > k) for correlation r (broadcast arrays)."""
    h, k, r = np.broadcast_arrays(np.asarray(h, float), np.asarray(k, float), np.asarray(r, float))
    shape = h.shape
    h, k, r = h.ravel(), k.ravel(), r.ravel()
    top = np.arcsin(np.clip(r, -1.0, 1.0))
    hk, hh = h * k, 0.5 * (h * h + k * k)
    few = np.abs(r) <= FEW_NODES_UP_TO
    if few.all():
        integral = _integral(top, hk, hh, 8)
    elif not few.any():
        integral = _integral(top, hk, hh, 12)
    else:
        integral = np.empty(top.shape)
        many = ~few
        integral[few] = _integral(top[few], hk[few], hh[few], 8)
        integral[many] = _integral(top[many], hk[many], hh[many], 12)
    out = special.ndtr(-h) * special.ndtr(-k) + integral * _INV_2PI
    return out.reshape(shape) if shape else out[0]  # a scalar for scalars, as numpy's ufuncs give


def orthant_gradients(h: np.ndarray, k: np.ndarray, r: np.ndarray):
    """(∂U/∂h, ∂U/∂k, ∂U/∂r) at (h, k, r).

    ∂U/∂h = −φ(h) Φ((r h − k)/√(1 − r²)), symmetrically in k, and ∂U/∂r = φ₂(h, k; r).
    """
    h, k, r = (np.asarray(v, float) for v in (h, k, r))
    q = np.sqrt(np.maximum(1.0 - r * r, 1e-300))
    phi_h = np.exp(-0.5 * h * h) / np.sqrt(2 * np.pi)
    phi_k = np.exp(-0.5 * k * k) / np.sqrt(2 * np.pi)
    dh = -phi_h * special.ndtr((r * h - k) / q)
    dk = -phi_k * special.ndtr((r * k - h) / q)
    dr = np.exp(-(h * h - 2.0 * r * h * k + k * k) / (2.0 * q * q)) * _INV_2PI / q
    return dh, dk, dr


def orthant_hessian(h: np.ndarray, k: np.ndarray, r: np.ndarray, gradients: tuple | None = None):
    """Second derivatives (U_hh, U_kk, U_hk, U_hr, U_kr, U_rr) at (h, k, r).

    All follow from the gradients (U_h, U_k, U_r = φ₂) without another transcendental function
    (``docs/private_2pl.md`` §3): with q² = 1 − r² and Q = h² − 2 r h k + k², U_hk = φ₂,
    U_hh = −h U_h − r φ₂ (as φ(h) φ((r h − k)/q) = q φ₂), U_kk = −k U_k − r φ₂,
    U_hr = −φ₂ (h − r k)/q², U_kr = −φ₂ (k − r h)/q², U_rr = φ₂ (r + h k − r Q/q²)/q².
    ``gradients``: :func:`orthant_gradients` at the same point, if the caller has them.
    """
    h, k, r = (np.asarray(v, float) for v in (h, k, r))
    uh, uk, p2 = orthant_gradients(h, k, r) if gradients is None else gradients
    q2 = np.maximum(1.0 - r * r, 1e-300)
    Q = h * h - 2.0 * r * h * k + k * k
    rp2 = r * p2
    return (-h * uh - rp2, -k * uk - rp2, p2, -p2 * (h - r * k) / q2, -p2 * (k - r * h) / q2,
            p2 * (r + h * k - r * Q / q2) / q2)
