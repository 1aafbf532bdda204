"""numba kernels of the 2PNO fit's pair terms (imported only when numba is installed, the ``fast``
extra): one pass over the pairs per row instead of numpy's dozens of whole-array passes.  The
formulas are those of :mod:`.orthant` and of the fit's normal equations (:mod:`._pairs`,
``docs/private_2pl.md`` §3); the values agree with numpy's to round-off (tested)."""

from __future__ import annotations

import math

import numpy as np

from ..._backend import import_numba

njit = import_numba().njit  # numba refusing its NUMBA_* settings: one line (_backend)
_JIT = {"cache": True, "error_model": "numpy", "nogil": True}
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_INV_2PI = 1.0 / (2.0 * math.pi)
_SQRT1_2 = math.sqrt(0.5)


@njit(**_JIT)
def disagreement(tau, lam, pt, i, j, few_up_to, x8, w8, x12, w12, out):
    """out[r, p] = P(X_i ≠ X_j) = π_i + π_j − 2 U(τ_i, τ_j; λ_i λ_j) for the pairs (i[p], j[p]) of
    each row r (π = ``pt`` = Φ(−τ)); U by :func:`.orthant.upper_orthant`'s rule (8 Gauss–Legendre
    nodes in ψ where |r| ≤ ``few_up_to``, else 12)."""
    R = tau.shape[0]
    for row in range(R):
        t, lm, p_ = tau[row], lam[row], pt[row]
        for p in range(i.size):
            a, b = i[p], j[p]
            h, k = t[a], t[b]
            r = min(max(lm[a] * lm[b], -1.0), 1.0)
            top = math.asin(r)
            hk, hh = h * k, 0.5 * (h * h + k * k)
            acc = 0.0
            if abs(r) <= few_up_to:
                for q in range(x8.size):
                    s = math.sin(top * x8[q])
                    acc += w8[q] * math.exp((s * hk - hh) / (1.0 - s * s))
            else:
                for q in range(x12.size):
                    s = math.sin(top * x12[q])
                    acc += w12[q] * math.exp((s * hk - hh) / (1.0 - s * s))
            u = p_[a] * p_[b] + 0.5 * top * acc * _INV_2PI
            out[row, p] = p_[a] + p_[b] - 2.0 * u


@njit(**_JIT)
def disagreement_one_loading(tau, lam, pt, i, j, few_up_to, x8, w8, x12, w12, out):
    """:func:`disagreement` where every item of row r has the one loading ``lam[r]`` (the fit with
    all a equal): r = λ² is the same for every pair, so the rule's arcsine, sines and 1 − s² are
    computed once a row instead of once a pair (2.4× faster at m = 1000; the same values, bit
    for bit: the same operations in the same order)."""
    R = tau.shape[0]
    for row in range(R):
        t, p_ = tau[row], pt[row]
        r = min(max(lam[row] * lam[row], -1.0), 1.0)
        top = math.asin(r)
        xs, ws = (x8, w8) if abs(r) <= few_up_to else (x12, w12)
        s, den = np.empty(xs.size), np.empty(xs.size)
        for q in range(xs.size):
            s[q] = math.sin(top * xs[q])
            den[q] = 1.0 - s[q] * s[q]
        for p in range(i.size):
            a, b = i[p], j[p]
            h, k = t[a], t[b]
            hk, hh = h * k, 0.5 * (h * h + k * k)
            acc = 0.0
            for q in range(xs.size):
                acc += ws[q] * math.exp((s[q] * hk - hh) / den[q])
            u = p_[a] * p_[b] + 0.5 * top * acc * _INV_2PI
            out[row, p] = p_[a] + p_[b] - 2.0 * u


@njit(**_JIT)
def pair_terms(tau, lam, rn, sn, newton, i, j, own, gn, grad, cross):
    """The pairs' parts of the normal equations of each row (``docs/private_2pl.md`` §3), added
    into ``own`` (R, 3, m: τ_iτ_i, ℓ_iℓ_i, τ_iℓ_i with the residuals' curvature on rows flagged
    in ``newton``), ``gn`` (R, 2, m: the Gauss–Newton τ_iτ_i, ℓ_iℓ_i) and ``grad`` (R, 2, m: the
    gradient's τ and log a parts), and written to ``cross`` (R, 4, P: τ_iτ_j, ℓ_iℓ_j, τ_iℓ_j,
    τ_jℓ_i), for the residuals ``rn`` = (q − P)/sd and SDs ``sn`` of the pairs (R, P)."""
    R, m = tau.shape
    ph = np.empty(m)
    for row in range(R):
        t, lm = tau[row], lam[row]
        nw = newton[row]
        for a in range(m):  # φ(τ) once an item, not twice a pair (the same operations: the same values)
            ph[a] = math.exp(-0.5 * t[a] * t[a]) * _INV_SQRT_2PI
        for p in range(i.size):
            a, b = i[p], j[p]
            h, k = t[a], t[b]
            la, lb = lm[a], lm[b]
            r = la * lb
            q2 = max(1.0 - r * r, 1e-300)
            q = math.sqrt(q2)
            pha, phb = ph[a], ph[b]
            # the orthant's gradients (U_h, U_k, U_r = φ₂)
            uh = -pha * 0.5 * math.erfc(-(r * h - k) / q * _SQRT1_2)
            uk = -phb * 0.5 * math.erfc(-(r * k - h) / q * _SQRT1_2)
            Q = h * h - 2.0 * r * h * k + k * k
            p2 = math.exp(-Q / (2.0 * q2)) * _INV_2PI / q
            dla, dlb = la * (1.0 - la * la), lb * (1.0 - lb * lb)  # dλ/d log a
            inv = 1.0 / sn[row, p]
            u0 = (-pha - 2.0 * uh) * inv
            u1 = (-phb - 2.0 * uk) * inv
            u2 = -2.0 * p2 * lb * dla * inv
            u3 = -2.0 * p2 * la * dlb * inv
            res = rn[row, p]
            tt_a, tt_b, ll_a, ll_b = u0 * u0, u1 * u1, u2 * u2, u3 * u3
            gn[row, 0, a] += tt_a
            gn[row, 0, b] += tt_b
            gn[row, 1, a] += ll_a
            gn[row, 1, b] += ll_b
            tl_a, tl_b = u0 * u2, u1 * u3
            grad[row, 0, a] += u0 * res
            grad[row, 0, b] += u1 * res
            grad[row, 1, a] += u2 * res
            grad[row, 1, b] += u3 * res
            xtt, xll, xtl, xlt = u0 * u1, u2 * u3, u0 * u3, u1 * u2
            if nw:  # the residual's curvature: w × ∂²P(X_i ≠ X_j), the orthant's second derivatives
                rp2 = r * p2
                uhh, ukk = -h * uh - rp2, -k * uk - rp2
                uhr, ukr = -p2 * (h - r * k) / q2, -p2 * (k - r * h) / q2
                urr = p2 * (r + h * k - r * Q / q2) / q2
                d2a, d2b = dla * (1.0 - 3.0 * la * la), dlb * (1.0 - 3.0 * lb * lb)
                r3, r4 = dla * lb, la * dlb
                w = -res * inv
                tt_a += w * (h * pha - 2.0 * uhh)
                tt_b += w * (k * phb - 2.0 * ukk)
                ll_a += w * -2.0 * (urr * r3 * r3 + p2 * d2a * lb)
                ll_b += w * -2.0 * (urr * r4 * r4 + p2 * la * d2b)
                tl_a += w * -2.0 * uhr * r3
                tl_b += w * -2.0 * ukr * r4
                xtt += w * -2.0 * p2
                xll += w * -2.0 * (urr * r3 * r4 + p2 * dla * dlb)
                xtl += w * -2.0 * uhr * r4
                xlt += w * -2.0 * ukr * r3
            own[row, 0, a] += tt_a
            own[row, 0, b] += tt_b
            own[row, 1, a] += ll_a
            own[row, 1, b] += ll_b
            own[row, 2, a] += tl_a
            own[row, 2, b] += tl_b
            cross[row, 0, p] = xtt
            cross[row, 1, p] = xll
            cross[row, 2, p] = xtl
            cross[row, 3, p] = xlt
