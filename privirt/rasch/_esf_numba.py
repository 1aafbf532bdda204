"""numba kernel of the two-sided recursion of :func:`privirt.rasch._esf._chain` (imported only
when numba is installed, the ``fast`` extra): one compiled pass per group instead of a Python
loop of whole-array numpy passes per score.  Same multipliers, same arithmetic, same choice of
branch; the values agree with numpy's to round-off (tested).  The maths is in ``docs/cmle.md`` §3.
"""

from __future__ import annotations

import math

import numpy as np

from .._backend import import_numba

njit = import_numba().njit  # numba refusing its NUMBA_* settings: one line (_backend)
_JIT = {"cache": True, "error_model": "numpy", "nogil": True}


@njit(**_JIT)
def lin_esf(et, start, out):
    """``out[g] = γ_0..γ_K`` of ``et[g]`` times ``start[g]``: the summation of
    :func:`privirt.rasch._esf._lin_esf` (the same products and sums, in its order), one pass
    per group."""
    G, K = et.shape
    tmp = np.empty(K)
    for g in range(G):
        out[g, 0] = start[g]
        for r in range(1, K + 1):
            out[g, r] = 0.0
        for j in range(K):
            e = et[g, j]
            for r in range(j + 1):
                tmp[r] = e * out[g, r]
            for r in range(j + 1):
                out[g, r + 1] += tmp[r]


_LOGE2 = math.log(2.0)


@njit(**_JIT)
def _logaddexp(x, y):
    """``log(e^x + e^y)`` as numpy's ``logaddexp`` computes it (``npy_logaddexp``)."""
    if x == y:  # infinities of the same sign
        return x + _LOGE2
    d = x - y
    if d > 0:
        return x + math.log1p(math.exp(-d))
    if d <= 0:
        return y + math.log1p(math.exp(d))
    return d  # NaN


@njit(**_JIT)
def log_esf(le, out):
    """``out[g] = log γ_0..γ_K`` of ``le[g]`` = log ε (−inf for empty slots): the log-space
    summation of :func:`privirt.rasch._esf._log_esf` (the same sums and ``logaddexp``, in its
    order), one pass per group."""
    G, K = le.shape
    for g in range(G):
        out[g, 0] = 0.0
        for r in range(1, K + 1):
            out[g, r] = -np.inf
        for j in range(K):
            e = le[g, j]
            for r in range(j + 1, 0, -1):  # downward: each reads γ_{r−1} of the step before
                out[g, r] = _logaddexp(out[g, r], e + out[g, r - 1])


@njit(**_JIT)
def _mult(row, e, log_mode, c_max):
    """One multiplier ``c = row · e`` (``log_mode``: ``clip(exp(row + e), 1e-300, c_max)``)."""
    if log_mode:
        return min(max(math.exp(row + e), 1e-300), c_max)
    return row * e


@njit(**_JIT)
def chain(R, E, log_mode, c_max, sizes, up_last, dn_first, P):
    """``P[r, g, i] = π_{i|r}`` with multipliers ``c_r = R[g, r] E[g, i]`` (``log_mode``:
    ``clip(exp(R[g, r] + E[g, i]), 1e-300, c_max)``) for ``dn_first[g] ≤ r ≤ up_last[g]``
    (the other entries are unspecified), as :func:`privirt.rasch._esf._chain`: upward for
    ``r + 1 ≤ up_last[g]``, downward for ``r ≥ dn_first[g]``, the downward value where
    ``c_{r−1} > 1``.  Each item runs only the pass(es) whose values it keeps in that range
    (the same arithmetic per item), and only that range of ``P`` is written."""
    K = P.shape[0] - 1
    G, W = E.shape
    p = np.empty(W)
    d = np.empty(W)
    c = np.empty(W)
    c_below = np.empty(W)
    up = np.empty(W, dtype=np.int64)
    dn = np.empty(W, dtype=np.int64)
    eu = np.empty(W)  # E of the items in up / dn, contiguous
    ed = np.empty(W)
    for g in range(G):
        k = sizes[g]
        a = dn_first[g]
        b = up_last[g]
        first = max(a, 1)
        last = min(b, K - 1)
        n_up = 0
        n_dn = 0
        for i in range(W):  # which pass each item's kept values come from
            need_up = a == 0 or b >= K
            need_dn = False
            for r in range(first, last + 1):
                if _mult(R[g, r - 1], E[g, i], log_mode, c_max) > 1.0:
                    need_dn = True
                else:
                    need_up = True
            if need_up:
                up[n_up] = i
                eu[n_up] = E[g, i]
                n_up += 1
            if need_dn:
                dn[n_dn] = i
                ed[n_dn] = E[g, i]
                n_dn += 1
        for i in range(W):
            P[0, g, i] = 0.0
        for j in range(n_up):
            p[j] = 0.0
        for r in range(b):
            row = R[g, r]
            if r + 1 >= a:
                for j in range(n_up):
                    p[j] = _mult(row, eu[j], log_mode, c_max) * (1.0 - p[j])
                for j in range(n_up):
                    P[r + 1, g, up[j]] = p[j]
            else:
                for j in range(n_up):
                    p[j] = _mult(row, eu[j], log_mode, c_max) * (1.0 - p[j])
        top = K - 1
        if n_dn and top >= first:
            for j in range(n_dn):
                d[j] = 1.0
                c[j] = _mult(R[g, top], ed[j], log_mode, c_max)
            for r in range(top, first - 1, -1):
                row = R[g, r - 1]
                for j in range(n_dn):
                    c_below[j] = _mult(row, ed[j], log_mode, c_max)
                if r >= k:
                    for j in range(n_dn):
                        d[j] = 1.0
                else:
                    for j in range(n_dn):
                        d[j] = 1.0 - d[j] / c[j]
                for j in range(n_dn):
                    if c_below[j] > 1.0:
                        P[r, g, dn[j]] = d[j]
                c, c_below = c_below, c
        if k == K:
            for i in range(W):
                P[K, g, i] = 1.0


@njit(**_JIT)
def _chain_one(lr, k, e, c_max, c, p):
    """One item's log-mode chain (:func:`chain` with ``W = 1``, no score limits): ``p[r] =
    π_{r}``, r = 0..K, for multipliers ``c_r = clip(exp(lr[r] + e), 1e-300, c_max)``, r < K =
    ``lr.size``, on a set of ``k`` items; each ``exp`` is taken once (``c`` is scratch)."""
    K = lr.size
    for r in range(K):
        c[r] = min(max(math.exp(lr[r] + e), 1e-300), c_max)
    p[0] = 0.0
    for r in range(K):
        p[r + 1] = c[r] * (1.0 - p[r])
    d = 1.0
    for r in range(K - 1, 0, -1):
        d = 1.0 if r >= k else 1.0 - d / c[r]
        if c[r - 1] > 1.0:
            p[r] = d
    if k == K:
        p[K] = 1.0


@njit(**_JIT)
def near_pairs_a(lg, bt, sizes, gi, ia, c_max, pa, x1, x2):
    """``pa[t, r] = π_{a|r}`` of each (group ``gi[t]``, item ``ia[t]``) (0 past the group's
    size): the first chain of :func:`privirt.rasch._esf._near_pair_chunk`, one pass per
    triple.  Also lists, in (triple, score) order, the arguments of the ``γ^{(a)}`` step's
    logarithms: ``x1`` those of ``log1p`` (``−π_{a|s}`` where ``π_{a|s} ≤ 1/2``), ``x2``
    those of ``log`` (``π_{a|s+1}`` elsewhere); returns their counts."""
    K = lg.shape[1] - 1
    lr = np.empty(K)
    c = np.empty(K)
    p = np.empty(K + 1)
    n1 = 0
    n2 = 0
    for t in range(gi.size):
        g = gi[t]
        k = sizes[g]
        for r in range(K):  # log(γ_r / γ_{r+1}), 0 past the group's size
            lr[r] = lg[g, r] - lg[g, r + 1] if r < k else 0.0
        _chain_one(lr, k, -bt[g, ia[t]], c_max, c, p)
        for r in range(K + 1):
            pa[t, r] = p[r] if r <= k else 0.0
        for s in range(K):
            if pa[t, s] <= 0.5:
                x1[n1] = -pa[t, s]
                n1 += 1
            else:
                x2[n2] = pa[t, s + 1]
                n2 += 1
    return n1, n2


@njit(**_JIT)
def near_pairs_b(lg, bt, sizes, counts, gi, ia, ib, pa, l1, l2, c_max, out):
    """``out[t] = Σ_r n_r π_{a|r} π'_{b|r−1}`` from ``pa`` and the logarithms ``l1 =
    log1p(x1)``, ``l2 = log(x2)`` of :func:`near_pairs_a`: the ``γ^{(a)}`` step, the second
    chain and the sum of :func:`privirt.rasch._esf._near_pair_chunk`, one pass per triple."""
    K = lg.shape[1] - 1
    lga = np.empty(K)
    lr = np.empty(K - 1)
    c = np.empty(K - 1)
    p = np.empty(K)
    n1 = 0
    n2 = 0
    for t in range(gi.size):
        g = gi[t]
        ba = bt[g, ia[t]]
        for s in range(K):  # log γ^{(a)}_s, by the form whose factor is ≥ 1/2
            if pa[t, s] <= 0.5:
                lga[s] = lg[g, s] + l1[n1]
                n1 += 1
            else:
                lga[s] = lg[g, s + 1] + l2[n2] + ba
                n2 += 1
        k = sizes[g] - 1
        for s in range(K - 1):
            lr[s] = lga[s] - lga[s + 1] if s < k else 0.0
        _chain_one(lr, k, -bt[g, ib[t]], c_max, c, p)
        acc = 0.0
        for r in range(1, min(k + 1, K) + 1):  # p past the reduced size: 0
            acc += counts[g, r] * pa[t, r] * p[r - 1]
        out[t] = acc
