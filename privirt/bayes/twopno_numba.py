"""numba kernels of the fused CPU 2PNO Gibbs iteration (imported only when numba is installed).

One iteration of B chains: a sweep over fixed blocks of person rows draws Z_ij cell by cell,
θ_i from its row, and adds the row's terms to the block's item sums (:func:`sweep`, which
releases the GIL so that disjoint block ranges run on several threads); a short pass then adds
the block sums in a fixed order and draws (a_j, b_j) (:func:`items`); the orbit moves
(:mod:`privirt.bayes.moves_numba`) are drawn between the two.  Z is never stored (unless asked
for).  Random numbers are the
counter-based Philox4x32-10 stream of the GPU kernels (``privirt/bayes/gibbs_2pno.cu``): a
pure function of (key, counter), so the draws do not depend on the number of threads.  The
numpy twin of every function is in :mod:`privirt.bayes.twopno_fused`; the maths is in ``docs/gibbs.md``.
"""

from __future__ import annotations

import math

import numpy as np

from .._backend import import_numba
from . import moves as _moves
from .truncnorm import FAR_TAIL as _FAR, POINT_MASS as _POINT_MASS  # X | X > L is L from _POINT_MASS on

njit = import_numba().njit  # numba refusing its NUMBA_* settings: one line (_backend)
_JIT = {"cache": True, "error_model": "numpy", "nogil": True}

_M32 = np.uint64(0xFFFFFFFF)
_MUL0 = np.uint64(0xD2511F53)
_MUL1 = np.uint64(0xCD9E8D57)
_W0 = np.uint64(0x9E3779B9)
_W1 = np.uint64(0xBB67AE85)
_S6 = np.uint64(6)
_S26 = np.uint64(26)
_S32 = np.uint64(32)
_TWO_M52 = 2.0**-52
_SQRT1_2 = 0.7071067811865476
_TINY = 2.2250738585072014e-308
_MANT = np.uint64(0x000FFFFFFFFFFFFF)
_EXP1 = np.uint64(0x3FF0000000000000)
_S52 = np.uint64(52)
_SQRT2 = 1.4142135623730951
_LN2 = 0.6931471805599453
#: |p − ½| beyond which AS 241 switches to its far-tail polynomial (p < e^{−25}): done by
#: the scalar :func:`ndtri`, not by :func:`_neg_ndtri_block`
_DEEP = 0.5 - 1.3887943864964021e-11


@njit(inline="always", **_JIT)
def uniform2(c0, c1, c2, c3, k0, k1):
    """Two uniforms in (0, 1) (52 random bits each) from one Philox4x32-10 block.

    All arguments are uint64 holding 32-bit words."""
    for _ in range(10):
        p0 = _MUL0 * c0
        p1 = _MUL1 * c2
        n0 = (p1 >> _S32) ^ c1 ^ k0
        n2 = (p0 >> _S32) ^ c3 ^ k1
        c0, c1, c2, c3 = n0, p1 & _M32, n2, p0 & _M32
        k0 = (k0 + _W0) & _M32
        k1 = (k1 + _W1) & _M32
    u0 = (float(((c0 >> _S6) << _S26) + (c1 >> _S6)) + 0.5) * _TWO_M52
    u1 = (float(((c2 >> _S6) << _S26) + (c3 >> _S6)) + 0.5) * _TWO_M52
    return u0, u1


@njit(inline="always", **_JIT)
def ndtr(x):
    """Φ(x), standard normal CDF, by the complementary error function."""
    return 0.5 * math.erfc(-x * _SQRT1_2)


@njit(inline="always", **_JIT)
def _central(q):
    """Φ⁻¹(0.5 + q) for |q| ≤ 0.425 (AS 241's central rational function, no branches)."""
    r = 0.180625 - q * q
    num = (((((((r * 2509.0809287301226727 + 33430.575583588128105) * r
                + 67265.770927008700853) * r + 45921.953931549871457) * r
              + 13731.693765509461125) * r + 1971.5909503065514427) * r
            + 133.14166789178437745) * r + 3.387132872796366608)
    den = (((((((r * 5226.495278852545925 + 28729.085735721942674) * r
                + 39307.89580009271061) * r + 21213.794301586595867) * r
              + 5394.1960214247511077) * r + 687.1870074920579083) * r
            + 42.313330701600911252) * r + 1.0)
    return q * num / den


@njit(**_JIT)
def ndtri(p):
    """Φ⁻¹(p) for p in (0, 1): Wichura's (1988) algorithm AS 241 (PPND16), relative error
    about 1e-16."""
    q = p - 0.5
    if abs(q) <= 0.425:
        return _central(q)
    r = math.sqrt(-math.log(p if q < 0.0 else 1.0 - p))
    if r <= 5.0:
        r -= 1.6
        num = (((((((r * 7.7454501427834140764e-4 + 0.0227238449892691845833) * r
                    + 0.24178072517745061177) * r + 1.27045825245236838258) * r
                  + 3.64784832476320460504) * r + 5.7694972214606914055) * r
                + 4.6303378461565452959) * r + 1.42343711074968357734)
        den = (((((((r * 1.05075007164441684324e-9 + 5.475938084995344946e-4) * r
                    + 0.0151986665636164571966) * r + 0.14810397642748007459) * r
                  + 0.68976733498510000455) * r + 1.6763848301838038494) * r
                + 2.05319162663775882187) * r + 1.0)
    else:
        r -= 5.0
        num = (((((((r * 2.01033439929228813265e-7 + 2.71155556874348757815e-5) * r
                    + 0.0012426609473880784386) * r + 0.026532189526576123093) * r
                  + 0.29656057182850489123) * r + 1.7848265399172913358) * r
                + 5.4637849111641143699) * r + 6.6579046435011037772)
        den = (((((((r * 2.04426310338993978564e-15 + 1.4215117583164458887e-7) * r
                    + 1.8463183175100546818e-5) * r + 7.868691311456132591e-4) * r
                  + 0.0148753612908506148525) * r + 0.13692988092273580531) * r
                + 0.59983220655588793769) * r + 1.0)
    val = num / den
    return -val if q < 0.0 else val


# W. J. Cody's rational Chebyshev approximations of Φ (ACM TOMS 715, the algorithm of R's pnorm)
_CA = (2.2352520354606839287, 161.02823106855587881, 1067.6894854603709582,
       18154.981253343561249, 0.065682337918207449113)
_CB = (47.20258190468824187, 976.09855173777669322, 10260.932208618978205,
       45507.789335026729956)
_CC = (0.39894151208813466764, 8.8831497943883759412, 93.506656132177855979,
       597.27027639480026226, 2494.5375852903726711, 6848.1904505362823326,
       11602.651437647350124, 9842.7148383839780218, 1.0765576773720192317e-8)
_CD = (22.266688044328115691, 235.38790178262499861, 1519.377599407554805,
       6485.558298266760755, 18615.571640885098091, 34900.952721145977266,
       38912.003286093271411, 19685.429676859990727)
_CP = (0.21589853405795699, 0.1274011611602473639, 0.022235277870649807,
       0.001421619193227893466, 2.9112874951168792e-5, 0.02307344176494017303)
_CQ = (1.28426009614491121, 0.468238212480865118, 0.0659881378689285515,
       0.00378239633202758244, 7.29751555083966205e-5)
_SQRT32 = 5.656854249492380195206754896838
_INV_SQRT_2PI = 0.398942280401432677939946059934
_XLOW = 37.5193  # |x| beyond which Φ(−|x|) underflows (R's pnorm: 0 and 1)
_ROUND = 6755399441055744.0  # 1.5 · 2^52: (v + _ROUND) − _ROUND rounds v to an integer
_INV_LN2 = 1.4426950408889634
_LN2_HI = 0.6931471803691238  # ln 2 to 32 bits: n · _LN2_HI is exact for |n| < 2^20
_LN2_LO = 1.9082149292705877e-10
_EXPB = np.uint64(0x4338000000000000 - 1023)  # bits of _ROUND, less the exponent bias


@njit(inline="always", **_JIT)
def _exp_poly(r):
    """e^r for |r| ≤ ln 2 / 2 (Taylor to r¹³, error below 1e-17)."""
    q = 1.0 + r * (1.0 / 13.0)
    q = 1.0 + r * (1.0 / 12.0) * q
    q = 1.0 + r * (1.0 / 11.0) * q
    q = 1.0 + r * (1.0 / 10.0) * q
    q = 1.0 + r * (1.0 / 9.0) * q
    q = 1.0 + r * (1.0 / 8.0) * q
    q = 1.0 + r * (1.0 / 7.0) * q
    q = 1.0 + r * (1.0 / 6.0) * q
    q = 1.0 + r * (1.0 / 5.0) * q
    q = 1.0 + r * (1.0 / 4.0) * q
    q = 1.0 + r * (1.0 / 3.0) * q
    q = 1.0 + r * (1.0 / 2.0) * q
    return 1.0 + r * q


@njit(**_JIT)
def _ndtr_block(x, out, ta, tb, nc):
    """out[c] = Φ(x[c]) for c < nc by Cody's algorithm (as R's ``pnorm``), evaluated for
    every cell without branches or library calls so that the compiler vectorises the loops;
    ``ta``, ``tb`` (float64, ≥ nc) are scratch.  Agrees with R's ``pnorm`` to 1e-15
    (relative) down to Φ ≈ 1e-300.

    Φ(−|x|) = e^{−x²/2} R(|x|) beyond |x| = 0.674, with Cody's rational R for |x| ≤ √32 and
    (1/√(2π) − R₂(1/x²)) / |x| beyond (here multiplied through by x¹⁰ so that one division
    serves both); e^{−x²/2} = 2ⁿ e^r from h₁ = −s²/2 (s = |x| rounded to 1/16, so h₁ is
    exact, as in Cody's code) and h₂ = −(|x| − s)(|x| + s)/2, reduced as
    r = ((h₁ − n ln2_hi) + h₂) − n ln2_lo; 2ⁿ is put together from the bits of
    n + 1.5 · 2⁵².
    """
    for c in range(nc):
        y = min(abs(x[c]), _XLOW)
        # 0.674 < |x| ≤ √32
        xnum = _CC[8] * y
        xden = y
        xnum = (xnum + _CC[0]) * y
        xden = (xden + _CD[0]) * y
        xnum = (xnum + _CC[1]) * y
        xden = (xden + _CD[1]) * y
        xnum = (xnum + _CC[2]) * y
        xden = (xden + _CD[2]) * y
        xnum = (xnum + _CC[3]) * y
        xden = (xden + _CD[3]) * y
        xnum = (xnum + _CC[4]) * y
        xden = (xden + _CD[4]) * y
        xnum = (xnum + _CC[5]) * y
        xden = (xden + _CD[5]) * y
        xnum = (xnum + _CC[6]) * y
        xden = (xden + _CD[6]) * y
        nm = xnum + _CC[7]
        dm = xden + _CD[7]
        # |x| > √32, in w = x²: R₂(1/w) = P(w) / (w Q(w))
        w = y * y
        pw = ((((_CP[4] * w + _CP[3]) * w + _CP[2]) * w + _CP[1]) * w + _CP[0]) * w + _CP[5]
        qw = ((((_CQ[4] * w + _CQ[3]) * w + _CQ[2]) * w + _CQ[1]) * w + _CQ[0]) * w + 1.0
        wq = w * qw
        big = y > _SQRT32
        ratio = ((_INV_SQRT_2PI * wq - pw) if big else nm) / ((wq * y) if big else dm)
        # e^{−x²/2}
        s = ((y * 16.0 + _ROUND) - _ROUND) * 0.0625
        h1 = -0.5 * (s * s)
        h2 = -0.5 * ((y - s) * (y + s))
        t = (h1 + h2) * _INV_LN2 + _ROUND
        n = t - _ROUND
        r = ((h1 - n * _LN2_HI) + h2) - n * _LN2_LO
        ta[c] = _exp_poly(r) * ratio
        tb[c] = t
    tbb = tb.view(np.uint64)
    for c in range(nc):  # 2ⁿ from the bits (n ≥ −1016: a normal double)
        tbb[c] = (tbb[c] - _EXPB) << _S52
    scale = tb
    for c in range(nc):
        xv = x[c]
        y = abs(xv)
        small = ta[c] * scale[c]  # Φ(−|x|)
        small = small if y < _XLOW else 0.0
        tail = 1.0 - small if xv > 0.0 else small
        # |x| ≤ 0.674: 1/2 + x R(x²)
        xsq = xv * xv
        xnum = _CA[4] * xsq
        xden = xsq
        xnum = (xnum + _CA[0]) * xsq
        xden = (xden + _CB[0]) * xsq
        xnum = (xnum + _CA[1]) * xsq
        xden = (xden + _CB[1]) * xsq
        xnum = (xnum + _CA[2]) * xsq
        xden = (xden + _CB[2]) * xsq
        cen = 0.5 + xv * (xnum + _CA[3]) / (xden + _CB[3])
        v = cen if y <= 0.67448975 else tail
        out[c] = v if xv == xv else xv  # NaN stays NaN


@njit(**_JIT)
def ndtr_array(x):
    """:func:`_ndtr_block` over a 1-D array (for tests)."""
    out = np.empty_like(x)
    _ndtr_block(x, out, np.empty_like(x), np.empty_like(x), x.shape[0])
    return out


@njit(**_JIT)
def _robert_tail(L, u0, u1, c0, stream, c2, c3, k0, k1):
    """X ~ N(0, 1) | X > L for L > 5: Robert's (1995) exponential rejection, retry t using
    the counter's stream word ``stream + (t << 8)``.  L ≥ 1e150 (or inf/NaN, a diverged
    state) returns L: X − L is about 1/L, below half an ulp of L from L > 2²⁷ on, so every
    draw rounds to L; once L·L overflowed (L > 1.3e154) the loop never accepted (a hang)."""
    if not L < _POINT_MASS:
        return L
    alpha = 0.5 * (L + math.sqrt(L * L + 4.0))
    t = np.uint64(0)
    while True:
        x = L - math.log(u0) / alpha
        d = x - alpha
        if math.log(u1) <= -0.5 * d * d:
            return x
        t += np.uint64(1)
        u0, u1 = uniform2(c0, stream + (t << np.uint64(8)), c2, c3, k0, k1)


@njit(inline="always", **_JIT)
def std_tn_lower(L, c0, stream, c2, c3, k0, k1):
    """X ~ N(0, 1) | X > L: upper-tail inverse CDF for L ≤ 5, Robert (1995) beyond."""
    u0, u1 = uniform2(c0, stream, c2, c3, k0, k1)
    if L <= _FAR:
        return -ndtri(u0 * ndtr(-L))
    return _robert_tail(L, u0, u1, c0, stream, c2, c3, k0, k1)


@njit(**_JIT)
def _neg_ndtri_block(p, x, w, mb, nc):
    """x[c] = −Φ⁻¹(p[c]) for c < nc, for normal doubles p in (0, 1) with |p − ½| ≤ _DEEP
    (others get a finite placeholder); ``w`` (float64) and ``mb`` (uint64) are scratch.

    AS 241's central and first tail rational functions, evaluated for every cell without
    branches or library calls so that the compiler vectorises the loops: the tail's
    log(min(p, 1 − p)) is taken from the exponent bits and a mantissa m ∈ [√½, √2) as
    e ln 2 + 2 atanh((m − 1)/(m + 1)) (odd series to s²³, error below 1e-17).
    """
    for c in range(nc):
        w[c] = p[c] if p[c] < 0.5 else 1.0 - p[c]
    wb = w.view(np.uint64)
    for c in range(nc):
        mb[c] = (wb[c] & _MANT) | _EXP1
    m = mb.view(np.float64)
    for c in range(nc):
        e = float(np.int64(wb[c] >> _S52) - 1023)
        mm = m[c]
        big = mm > _SQRT2
        mm = mm * 0.5 if big else mm
        e = e + 1.0 if big else e
        s = (mm - 1.0) / (mm + 1.0)
        s2 = s * s
        t = 1.0 / 23.0
        t = t * s2 + 1.0 / 21.0
        t = t * s2 + 1.0 / 19.0
        t = t * s2 + 1.0 / 17.0
        t = t * s2 + 1.0 / 15.0
        t = t * s2 + 1.0 / 13.0
        t = t * s2 + 1.0 / 11.0
        t = t * s2 + 1.0 / 9.0
        t = t * s2 + 1.0 / 7.0
        t = t * s2 + 1.0 / 5.0
        t = t * s2 + 1.0 / 3.0
        t = t * s2 + 1.0
        r = math.sqrt(-(e * _LN2 + 2.0 * s * t)) - 1.6
        num_t = (((((((r * 7.7454501427834140764e-4 + 0.0227238449892691845833) * r
                      + 0.24178072517745061177) * r + 1.27045825245236838258) * r
                    + 3.64784832476320460504) * r + 5.7694972214606914055) * r
                  + 4.6303378461565452959) * r + 1.42343711074968357734)
        den_t = (((((((r * 1.05075007164441684324e-9 + 5.475938084995344946e-4) * r
                      + 0.0151986665636164571966) * r + 0.14810397642748007459) * r
                    + 0.68976733498510000455) * r + 1.6763848301838038494) * r
                  + 2.05319162663775882187) * r + 1.0)
        q = p[c] - 0.5
        u = 0.180625 - q * q
        num_c = (((((((u * 2509.0809287301226727 + 33430.575583588128105) * u
                      + 67265.770927008700853) * u + 45921.953931549871457) * u
                    + 13731.693765509461125) * u + 1971.5909503065514427) * u
                  + 133.14166789178437745) * u + 3.387132872796366608)
        den_c = (((((((u * 5226.495278852545925 + 28729.085735721942674) * u
                      + 39307.89580009271061) * u + 21213.794301586595867) * u
                    + 5394.1960214247511077) * u + 687.1870074920579083) * u
                  + 42.313330701600911252) * u + 1.0)
        central = abs(q) <= 0.425
        num = q * num_c if central else (num_t if q >= 0.0 else -num_t)
        x[c] = -num / (den_c if central else den_t)


_log_scale_mh = njit(**_JIT)(_moves.log_scale_mh)
_S_LATENT = np.uint64(_moves.MOVE_STREAMS[2])

#: Cells per pass of :func:`_block` (rows of a block are taken a few at a time so that the
#: scratch arrays of a pass stay in the L1/L2 cache whatever the number of items).
CHUNK_CELLS = 2048


@njit(**_JIT)
def _block(task, codes, data_of, theta, a, b, keys, it, rows, th_con, th_fix, partial, z_out,
           keep_z, store_theta, slot):
    """Z, θ and the item-sum terms of one block of person rows of one chain (``task`` =
    chain × blocks + block).

    The rows are taken a few at a time (about ``CHUNK_CELLS`` cells, at least one row) through
    branch-free passes that the compiler vectorises (the Philox uniforms; Φ by
    :func:`_ndtr_block`; Φ⁻¹'s rational functions; Z and the item sums) and scalar passes (the
    running sums of θ's conditional; Φ⁻¹'s deep tail and Robert's far-tail sampler for the
    rare cells that need them).  Every cell's value and every sum's order are those of a plain cell-by-cell loop.
    """
    n = theta.shape[1]
    k = a.shape[1]
    blocks = partial.shape[1]
    c_it = np.uint64(it)
    zero = np.uint64(0)
    bb = task // blocks
    blk = task - bb * blocks
    r0 = blk * rows
    r1 = min(r0 + rows, n)
    d = data_of[bb]
    k0 = keys[bb, 0]
    k1 = keys[bb, 1]
    acc = partial[bb, blk]
    acc[:, :] = 0.0
    step = min(max(1, CHUNK_CELLS // k), r1 - r0)
    cap = step * k
    u0 = np.empty(cap)
    u1 = np.empty(cap)
    mu = np.empty(cap)
    p = np.empty(cap)
    x = np.empty(cap)
    w = np.empty(cap)
    sv = np.empty(cap)
    mb = np.empty(cap, dtype=np.uint64)
    zrow = np.empty(k)
    obs = np.empty(k)
    a_r = a[bb]
    b_r = b[bb]
    acc0 = acc[0]
    acc1 = acc[1]
    acc2 = acc[2]
    acc3 = acc[3]
    acc4 = acc[4]
    acc5 = acc[5]
    for s0 in range(r0, r1, step):
        s1 = min(s0 + step, r1)
        nc = (s1 - s0) * k
        # 1. uniforms of every cell: counter (it, 0, cell)
        base = s0 * k
        for c in range(nc):
            cell = np.uint64(base + c)
            u0[c], u1[c] = uniform2(c_it, zero, cell & _M32, cell >> _S32, k0, k1)
        # 2. μ and the probability V Φ(−L) to invert, L = −s μ the standardised bound
        for i in range(s0, s1):
            th = theta[bb, i]
            o = (i - s0) * k
            y_r = codes[d, i]
            for j in range(k):
                m = th * a_r[j] - b_r[j]
                mu[o + j] = m
                sv[o + j] = m if y_r[j] == 1 else -m
        _ndtr_block(sv, p, x, w, nc)
        for c in range(nc):
            p[c] *= u0[c]
        # 3. X = −Φ⁻¹(p) for every cell (the deepest tails redone below)
        _neg_ndtri_block(p, x, w, mb, nc)
        # 4. per row: Z (the rare far / deep cells redone), θ_i, the row's item-sum terms
        for i in range(s0, s1):
            o = (i - s0) * k
            y_r = codes[d, i]
            rare = 0
            for j in range(k):
                y = y_r[j]
                m = mu[o + j]
                L = -m if y == 1 else m
                xx = x[o + j]
                z = m + xx if y == 1 else m - xx
                ok = y >= 0
                zrow[j] = z if ok else 0.0
                obs[j] = 1.0 if ok else 0.0
                far = (L > _FAR) | (abs(p[o + j] - 0.5) > _DEEP)
                rare += 1 if (ok and far) else 0
            if rare:
                for j in range(k):
                    y = y_r[j]
                    if y < 0:
                        continue
                    m = mu[o + j]
                    L = -m if y == 1 else m
                    if L > _FAR:
                        cell = np.uint64(base + o + j)
                        xx = _robert_tail(L, u0[o + j], u1[o + j], c_it, zero, cell & _M32,
                                          cell >> _S32, k0, k1)
                    elif abs(p[o + j] - 0.5) > _DEEP:
                        xx = -ndtri(p[o + j])
                    else:
                        continue
                    zrow[j] = m + xx if y == 1 else m - xx
            za = 0.0
            aa = 0.0
            ab = 0.0
            for j in range(k):  # in item order, the observed cells only (obs = 0 adds +0)
                aj = a_r[j] * obs[j]
                za += zrow[j] * aj
                aa += aj * aj
                ab += aj * b_r[j]
            prec = 1.0 + aa
            con = th_con[i]
            if con == 0:
                v0, _ = uniform2(c_it, np.uint64(1), np.uint64(i), zero, k0, k1)
                tn = (za + ab) / prec + ndtri(v0) / math.sqrt(prec)
            elif con == 2:  # fixed by an anchor
                tn = th_fix[i]
            else:  # θ_i > 0 (con = 1) or θ_i < 0 (con = −1): truncated, same counter
                m = (za + ab) / prec
                sd = 1.0 / math.sqrt(prec)
                sg = float(con)
                tn = m + sg * sd * std_tn_lower(-sg * m / sd, c_it, np.uint64(1), np.uint64(i),
                                                zero, k0, k1)
            theta[bb, i] = tn
            if slot >= 0:
                store_theta[bb, slot, i] = tn
            if keep_z:
                for j in range(k):
                    z_out[bb, i, j] = zrow[j]
            t2 = tn * tn
            for j in range(k):  # a missing cell has z = 0 and obs = 0: it adds ±0
                acc0[j] += tn * zrow[j]
                acc1[j] += zrow[j]
                acc2[j] += t2 * obs[j]
                acc3[j] += tn * obs[j]
                acc4[j] += obs[j]
                r = (zrow[j] - (tn * a_r[j] - b_r[j])) * obs[j]
                acc5[j] += r * r


@njit(**_JIT)
def _items(theta, a, b, keys, it, pa_prec, pa_lin, pb_prec, pb_lin, free, partial, store_a,
           store_b, slot, cd, store_theta, latent):
    """(a_j, b_j) | Z, θ for every chain and item from the block sums (a unrestricted when
    ``free``, else a > 0), after the orbit moves θ -> c θ + d of each chain (``cd`` (B, 2) holds
    (c, d), from :func:`privirt.bayes.moves_numba.moves`; (1, 0) changes nothing) and, with
    ``latent``, each item's latent scale Z_·j -> g_j Z_·j (:func:`privirt.bayes.moves.
    latent_scale`, counter (it, 6, item)): θ and its draw at ``slot`` are moved and the sums
    follow (:func:`privirt.bayes.moves.shift_sums`)."""
    n_chains = theta.shape[0]
    n = theta.shape[1]
    k = a.shape[1]
    blocks = partial.shape[1]
    c_it = np.uint64(it)
    zero = np.uint64(0)
    # (a_j, b_j) | Z, θ: block sums added in a fixed order, then the exact restricted draw
    for bb in range(n_chains):
        k0 = keys[bb, 0]
        k1 = keys[bb, 1]
        c = cd[bb, 0]
        d = cd[bb, 1]
        moved = c != 1.0 or d != 0.0
        if moved:  # θ -> cθ + d
            for i in range(n):
                tn = c * theta[bb, i] + d
                theta[bb, i] = tn
                if slot >= 0:
                    store_theta[bb, slot, i] = tn
        for j in range(k):
            tz = 0.0
            sz = 0.0
            tt = 0.0
            st = 0.0
            s1 = 0.0
            for blk in range(blocks):
                tz += partial[bb, blk, 0, j]
                sz += partial[bb, blk, 1, j]
                tt += partial[bb, blk, 2, j]
                st += partial[bb, blk, 3, j]
                s1 += partial[bb, blk, 4, j]
            g = 1.0
            if latent:  # R_j = Σ (Z − aθ + b)², unchanged by the moves of θ
                rj = 0.0
                for blk in range(blocks):
                    rj += partial[bb, blk, 5, j]
                aj = a[bb, j] / c
                bj = b[bb, j] + aj * d
                w0, w1 = uniform2(c_it, _S_LATENT, np.uint64(j), zero, k0, k1)
                g = math.exp(_log_scale_mh(s1 + 2.0, 0.5 * (rj + pa_prec * aj * aj
                                                             + pb_prec * bj * bj),
                                           0.0, 0.0, pa_lin * aj + pb_lin * bj, ndtri(w0), w1))
            if moved or g != 1.0:  # and Z_·j -> g Z_·j
                tz, sz, tt, st = g * (c * tz + d * sz), g * sz, \
                    c * c * tt + 2.0 * c * d * st + d * d * s1, c * st + d * s1
            paa = tt + pa_prec
            pab = -st
            pbb = s1 + pb_prec
            ra = tz + pa_lin
            rb = -sz + pb_lin
            det = paa * pbb - pab * pab
            ma = (pbb * ra - pab * rb) / det
            mb = (paa * rb - pab * ra) / det
            sda = math.sqrt(pbb / det)
            cj = np.uint64(j)
            if free:
                ua, _ = uniform2(c_it, np.uint64(2), cj, zero, k0, k1)
                av = ma - sda * ndtri(ua)
            else:
                av = ma + sda * std_tn_lower(-ma / sda, c_it, np.uint64(2), cj, zero, k0, k1)
                av = max(av, _TINY)
            u0, _ = uniform2(c_it, np.uint64(3), cj, zero, k0, k1)
            bv = mb - (pab / pbb) * (av - ma) + ndtri(u0) / math.sqrt(pbb)
            a[bb, j] = av
            b[bb, j] = bv
            if slot >= 0:
                store_a[bb, slot, j] = av
                store_b[bb, slot, j] = bv


@njit(**_JIT)
def sweep(t0, t1, codes, data_of, theta, a, b, keys, it, rows, th_con, th_fix, partial, z_out,
          keep_z, store_theta, slot):
    """:func:`_block` for tasks t0 … t1 − 1 (releases the GIL: callers run disjoint ranges on
    several threads)."""
    for task in range(t0, t1):
        _block(task, codes, data_of, theta, a, b, keys, it, rows, th_con, th_fix, partial,
               z_out, keep_z, store_theta, slot)


@njit(**_JIT)
def items(theta, a, b, keys, it, pa_prec, pa_lin, pb_prec, pb_lin, free, partial, store_a,
          store_b, slot, cd, store_theta, latent):
    """:func:`_items` (the orbit moves and the (a, b) draws once every block is done)."""
    _items(theta, a, b, keys, it, pa_prec, pa_lin, pb_prec, pb_lin, free, partial, store_a,
           store_b, slot, cd, store_theta, latent)


@njit(**_JIT)
def ndtri_array(p):
    """:func:`ndtri` over a 1-D array (for tests)."""
    out = np.empty_like(p)
    for i in range(p.shape[0]):
        out[i] = ndtri(p[i])
    return out


@njit(**_JIT)
def neg_ndtri_array(p):
    """:func:`_neg_ndtri_block` over a 1-D array (for tests)."""
    x = np.empty_like(p)
    _neg_ndtri_block(p, x, np.empty_like(p), np.empty(p.shape[0], dtype=np.uint64), p.shape[0])
    return x


@njit(**_JIT)
def uniform2_array(c0, c1, c2, c3, k0, k1):
    """:func:`uniform2` over 1-D uint64 counter arrays (for tests)."""
    u = np.empty((2, c0.shape[0]))
    for i in range(c0.shape[0]):
        u[0, i], u[1, i] = uniform2(c0[i], c1[i], c2[i], c3[i], k0[i], k1[i])
    return u
