"""Vectorised exact samplers: geometric, discrete Laplace, discrete Gaussian, Bernoulli.

All randomness is uniform 64-bit words from :class:`mechanisms.rng.SecureRNG`. Every random
decision is an exact comparison of a uniform against a probability: the common case is settled
by integer (or, for the Gaussian acceptance test, float with a proven error margin) arithmetic
on whole arrays, and the rare undecided case (probability below ``2**-38`` per decision) is
finished exactly by :class:`mechanisms._exact.LazyUniform`. The outputs therefore follow the
target pmf exactly; ``docs/mechanisms.md`` gives the argument.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ._exact import TWO64, LazyUniform, bernoulli_fixed, exp_neg_enclosure, fixed64

__all__ = ["TruncatedGeometric", "Geometric", "DiscreteLaplaceSampler", "DiscreteGaussianSampler",
           "BernoulliSampler"]

_MAX_CHUNK_BITS = 14  # largest inverse-CDF table: 2**14 + 1 uint64 (128 KiB, fits in L2)
_HIGH_TAIL = 48  # chunks cover G < 2**J with lam * 2**J >= 48, so P(G >= 2**J) <= e**-48
BLOCK = 1 << 16  # outputs per vectorised block: bounds temporaries to a few MiB


def _ceil_log2(x: Fraction) -> int:
    """Smallest integer J with 2**J >= x (x > 0)."""
    j = max(0, math.ceil(math.log2(float(x))) - 2) if x > 1 else 0
    while Fraction(1 << j) < x:
        j += 1
    return j


class TruncatedGeometric:
    """Values ``r`` in ``[0, 2**K)`` with ``P(r)`` proportional to ``exp(-lam * r)``.

    Sampled by inversion: ``r`` is the number of CDF breakpoints ``F_j = P(R < j)`` (``j = 1 ..
    2**K - 1``) at or below a uniform ``U``. The table holds ``C_j = floor(2**64 F_j)`` exactly
    (computed with 192-bit interval arithmetic); ``u > C_j`` proves ``U >= F_j`` and ``u < C_j``
    proves ``U < F_j``. A float inverse-CDF guess picks the candidate ``r`` and two table lookups
    certify it; uncertified guesses are recomputed by binary search, and ties ``u == C_j`` are
    finished exactly.
    """

    def __init__(self, lam: Fraction, K: int) -> None:
        if K < 1:
            raise ValueError("K must be >= 1")
        self.lam, self.K, self.N = Fraction(lam), int(K), 1 << int(K)
        self.C = self._table()
        self._Cext = np.concatenate([[np.uint64(0)], self.C, [np.uint64(TWO64 - 1)]]).astype(np.uint64)
        self._Cext1 = self._Cext[1:].copy()
        lamN = float(self.lam * self.N)
        self._one_minus_zN = -math.expm1(-lamN)
        self._inv_neg_lam = -1.0 / float(self.lam)

    # exact CDF breakpoint F_j = (1 - e^{-lam j}) / (1 - e^{-lam N})
    def _F_enclosure(self, j: int):
        lam, N = self.lam, self.N

        def enc(bits: int):
            a_lo, a_hi = exp_neg_enclosure(lam * j, bits + self._guard)
            b_lo, b_hi = exp_neg_enclosure(lam * N, bits + self._guard)
            return (1 - a_hi) / (1 - b_lo), (1 - a_lo) / (1 - b_hi)

        return enc

    def _table(self) -> np.ndarray:
        P = 192
        one = 1 << P
        lo, hi = exp_neg_enclosure(self.lam, P + 16)
        z_lo = (lo * one).__floor__()
        z_hi = -((-hi * one).__floor__())  # ceil
        L = [one] * (self.N + 1)  # L[j] <= 2**P e^{-lam j} <= H[j]
        H = [one] * (self.N + 1)
        for j in range(1, self.N + 1):
            L[j] = (L[j - 1] * z_lo) >> P
            H[j] = -((-H[j - 1] * z_hi) >> P)
        den_lo, den_hi = one - H[self.N], one - L[self.N]  # bounds on 2**P (1 - e^{-lam N})
        C = np.empty(self.N - 1, dtype=np.uint64)
        # extra enclosure bits for the slow path: 1 - e^{-lam j} loses ~log2(1/lam) leading bits
        self._guard = 16 + 2 * max(0, math.ceil(-math.log2(float(self.lam))))
        for j in range(1, self.N):
            a = ((one - H[j]) << 64) // den_hi  # floor of a lower bound of 2**64 F_j
            b = ((one - L[j]) << 64) // den_lo  # floor of an upper bound
            if a != b:
                a = fixed64(self._F_enclosure(j))
            C[j - 1] = a
        return C

    def sample_words(self, u: np.ndarray, word) -> np.ndarray:
        """Map uniform words ``u`` to exact draws (int64); ``word()`` supplies extra bits."""
        N = self.N
        Uf = (u >> np.uint64(11)).view(np.int64).astype(np.float64)
        Uf *= -(2.0**-53) * self._one_minus_zN
        Uf += 1.0
        r = np.log(Uf)
        r *= self._inv_neg_lam  # >= 0 since Uf <= 1
        np.floor(r, out=r)
        np.minimum(r, N - 1, out=r)
        r = r.astype(np.int64)
        # certified iff C_r < u < C_{r+1}; the sentinels Cext[0] = 0 and Cext[N] = 2**64 - 1 send
        # the two extreme words u = 0 and u = 2**64 - 1 to the binary search below.
        ok = u > np.take(self._Cext, r)
        ok &= u < np.take(self._Cext1, r)
        bad = np.flatnonzero(~ok)
        if bad.size:
            ub = u[bad]
            left = np.searchsorted(self.C, ub, side="left")
            right = np.searchsorted(self.C, ub, side="right")
            r[bad] = left
            for k in np.flatnonzero(right > left):
                U = LazyUniform(int(ub[k]), 64, word)
                val = int(left[k])
                for i in range(int(left[k]), int(right[k])):
                    if U.less_than(self._F_enclosure(i + 1)):
                        break
                    val += 1
                r[bad[k]] = val
        return r


class Geometric:
    """``P(G = k) = (1 - q) q**k`` with ``q = exp(-lam)``, ``k = 0, 1, ...``, sampled exactly.

    ``G = sum_c 2**(cK) R_c + 2**(nK) H`` where the chunks ``R_c`` (``K`` bits each) and the high
    part ``H`` are independent: ``R_c`` is truncated geometric on ``[0, 2**K)`` with ratio
    ``q**(2**(cK))`` and ``H`` is geometric with ratio ``q**(2**(nK))`` (memorylessness of the
    geometric distribution). ``P(H >= 1) <= e**-48`` and ``H`` is then drawn exactly by the slow
    path.
    """

    def __init__(self, lam: Fraction) -> None:
        self.lam = Fraction(lam)
        if self.lam <= 0:
            raise ValueError("lam must be positive")
        J = _ceil_log2(Fraction(_HIGH_TAIL) / self.lam)
        self.n_chunks = -(-J // _MAX_CHUNK_BITS)
        self.K = -(-J // self.n_chunks) if self.n_chunks else 0
        self.chunks = [TruncatedGeometric(self.lam * (1 << (c * self.K)), self.K) for c in range(self.n_chunks)]
        self.high_shift = self.n_chunks * self.K
        self.lam_high = self.lam * (1 << self.high_shift)
        self._high_enc = lambda bits: exp_neg_enclosure(self.lam_high, bits)
        self.high_threshold = fixed64(self._high_enc)

    def sample(self, n: int, rng) -> np.ndarray:
        words = rng.random_uint64(n * (self.n_chunks + 1)).reshape(self.n_chunks + 1, n)
        g = np.zeros(n, dtype=np.int64)
        for c, chunk in enumerate(self.chunks):
            r = chunk.sample_words(words[c], rng.word)
            if c:
                r <<= c * self.K
            g += r
        high = bernoulli_fixed(words[-1], self.high_threshold,
                               lambda w: LazyUniform(w, 64, rng.word).less_than(self._high_enc))
        for i in np.flatnonzero(high):  # probability <= e**-48 per draw
            h = 1
            while LazyUniform(rng.word(), 64, rng.word).less_than(self._high_enc):
                h += 1
            total = int(g[i]) + (h << self.high_shift)
            if total >= 1 << 62:
                raise OverflowError("noise draw exceeds the int64 range")  # pragma: no cover
            g[i] = total
        return g


class DiscreteLaplaceSampler:
    """``P(X = x)`` proportional to ``exp(-|x| / t)`` on the integers, exactly.

    ``X = 0`` with probability ``(1 - q)/(1 + q)`` (``q = e^{-1/t}``); otherwise
    ``X = ±(1 + G)`` with a fair sign and ``G`` geometric with ratio ``q``.
    """

    def __init__(self, scale: Fraction) -> None:
        self.scale = Fraction(scale)
        self.lam = 1 / self.scale
        self.geometric = Geometric(self.lam)
        lam = self.lam

        def zero_enc(bits: int):
            q_lo, q_hi = exp_neg_enclosure(lam, bits + 8)
            return (1 - q_hi) / (1 + q_hi), (1 - q_lo) / (1 + q_lo)

        self._zero_enc = zero_enc
        self.zero_threshold = fixed64(zero_enc)

    def sample(self, n: int, rng) -> np.ndarray:
        zero = bernoulli_fixed(rng.random_uint64(n), self.zero_threshold,
                               lambda w: LazyUniform(w, 64, rng.word).less_than(self._zero_enc))
        sign = rng.random_bits(n).astype(np.int64)
        x = self.geometric.sample(n, rng)
        x += 1
        x *= 1 - 2 * sign
        x *= ~zero
        return x


# exp(-k/64), k = 0..4095, correctly rounded to float64 (from 40-digit decimal values)
def _exp_table() -> np.ndarray:
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = 40
        return np.array([float((Decimal(-k) / 64).exp()) for k in range(4096)], dtype=np.float64)


_EXP_TABLE: np.ndarray | None = None
_MARGIN = 2.0**-40  # > 8x the proven error 2**-43 of the float acceptance probability


def _exp_neg_approx(gamma: np.ndarray) -> np.ndarray:
    """``exp(-gamma)`` for ``gamma >= 0`` with absolute error below ``2**-44`` (basic ops only).

    ``gamma = k/64 + f`` with ``0 <= f < 1/64`` (exact), ``exp(-k/64)`` from a correctly rounded
    table and ``exp(-f)`` by its degree-5 Taylor polynomial (remainder ``<= f**6/720 < 2**-45``).
    Values with ``gamma >= 64`` (and NaN-free infinities) return 0, within ``2**-92`` of the truth.
    """
    global _EXP_TABLE
    if _EXP_TABLE is None:
        _EXP_TABLE = _exp_table()
    big = ~(gamma < 64.0)
    g = np.where(big, 0.0, gamma)
    k = np.floor(g * 64.0)
    f = g - k * (1.0 / 64.0)
    p = f * (-1.0 / 120.0) + (1.0 / 24.0)
    p *= f
    p -= 1.0 / 6.0
    p *= f
    p += 0.5
    p *= f
    p -= 1.0
    p *= f
    p += 1.0
    p *= np.take(_EXP_TABLE, k.astype(np.intp))
    p[big] = 0.0
    return p


class DiscreteGaussianSampler:
    """``P(X = x)`` proportional to ``exp(-x**2 / (2 sigma**2))`` on the integers, exactly.

    Rejection sampling (Canonne, Kamath & Steinke 2020, Algorithm 3, with the real proposal scale
    ``t = sigma``): draw ``Y`` from the discrete Laplace with scale ``sigma`` and accept it with
    probability ``exp(-(|Y| - sigma)**2 / (2 sigma**2))``. Since
    ``exp(-|y|/sigma) exp(-(|y| - sigma)**2 / (2 sigma**2)) = e**{-1/2} exp(-y**2 / (2 sigma**2))``
    the accepted values have exactly the discrete Gaussian pmf. The acceptance test compares a
    uniform against a float approximation whose error is proven below ``2**-43`` and falls back to
    the exact lazy comparison inside a ``2**-40`` margin.
    """

    def __init__(self, sigma: float) -> None:
        self.sigma_f = float(sigma)
        self.sigma = Fraction(self.sigma_f)
        self.proposal = DiscreteLaplaceSampler(self.sigma)
        self._inv2s2 = float(1 / (2 * self.sigma * self.sigma))  # correctly rounded
        self.acceptance_rate = _gaussian_acceptance_rate(self.sigma_f)

    def _gamma_exact(self, y: int) -> Fraction:
        d = abs(Fraction(y)) - self.sigma
        return d * d / (2 * self.sigma * self.sigma)

    def _accept(self, y: np.ndarray, u: np.ndarray, rng) -> np.ndarray:
        a = np.abs(y).astype(np.float64)
        d = a - self.sigma_f
        gamma = np.square(d)
        gamma *= self._inv2s2
        gamma[a > 2.0**52] = np.inf
        p = _exp_neg_approx(gamma)
        Uf = (u >> np.uint64(11)).astype(np.float64)
        Uf *= 2.0**-53
        acc = Uf < p - _MARGIN
        undecided = np.flatnonzero(~acc & ~(Uf > p + _MARGIN))
        for i in undecided:  # probability about 2**-38 per proposal
            gam = self._gamma_exact(int(y[i]))
            acc[i] = LazyUniform(int(u[i]), 64, rng.word).less_than(lambda b: exp_neg_enclosure(gam, b))
        return acc

    def sample(self, n: int, rng, out: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            out = np.empty(n, dtype=np.int64)
        filled = 0
        while filled < n:
            need = n - filled
            m = min(int(need / self.acceptance_rate * 1.02) + 32, 2 * BLOCK)
            y = self.proposal.sample(m, rng)
            u = rng.random_uint64(m)
            y = y[self._accept(y, u, rng)][:need]
            out[filled:filled + y.size] = y
            filled += y.size
        return out


def _gaussian_acceptance_rate(sigma: float) -> float:
    """Probability that one proposal is accepted (used only to size batches)."""
    L = int(40 * sigma) + 50
    if L > 10**6:  # continuous limit, accurate to < 1e-6 for large sigma
        return math.exp(-0.5) * math.sqrt(math.pi / 2)
    y = np.arange(-L, L + 1, dtype=np.float64)
    q = math.exp(-1.0 / sigma)
    lap = np.exp(-np.abs(y) / sigma) * (1 - q) / (1 + q)
    return float(np.sum(lap * np.exp(-((np.abs(y) - sigma) ** 2) / (2 * sigma * sigma))))


class BernoulliSampler:
    """Exact Bernoulli(p) for an irrational ``p`` given by an enclosure function."""

    def __init__(self, enclosure) -> None:
        self._enc = enclosure
        self.threshold = fixed64(enclosure)

    def sample_words(self, u: np.ndarray, rng) -> np.ndarray:
        return bernoulli_fixed(u, self.threshold, lambda w: LazyUniform(w, 64, rng.word).less_than(self._enc))
