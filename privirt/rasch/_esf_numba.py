"""numba kernel of the two-sided recursion of :func:`privirt.rasch._esf._chain` (imported only
when numba is installed, the ``fast`` extra): one compiled pass per group instead of a Python
loop of whole-array numpy passes per score.  Same multipliers, same arithmetic, same choice of
branch; the values agree with numpy's to round-off (tested).  The maths is in ``docs/cmle.md`` §3.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_JIT = {"cache": True, "error_model": "numpy", "nogil": True}


@njit(**_JIT)
def _mults(row, E, g, log_mode, c_max, out):
    """``out[i] = c`` of every slot ``i`` of group ``g`` at the score of ``row``."""
    W = out.size
    if log_mode:
        for i in range(W):
            out[i] = min(max(math.exp(row + E[g, i]), 1e-300), c_max)
    else:
        for i in range(W):
            out[i] = row * E[g, i]


@njit(**_JIT)
def chain(R, E, log_mode, c_max, sizes, up_last, dn_first, P):
    """``P[r, g, i] = π_{i|r}`` with multipliers ``c_r = R[g, r] E[g, i]`` (``log_mode``:
    ``clip(exp(R[g, r] + E[g, i]), 1e-300, c_max)``); upward for ``r + 1 ≤ up_last[g]``,
    downward for ``r ≥ dn_first[g]`` (as :func:`privirt.rasch._esf._chain`)."""
    K = P.shape[0] - 1
    G, W = E.shape
    p = np.empty(W)
    d = np.empty(W)
    c = np.empty(W)
    c_below = np.empty(W)
    for g in range(G):
        k = sizes[g]
        for i in range(W):
            P[0, g, i] = 0.0
            p[i] = 0.0
            d[i] = 1.0
        for r in range(up_last[g]):
            _mults(R[g, r], E, g, log_mode, c_max, c)
            for i in range(W):
                p[i] = c[i] * (1.0 - p[i])
                P[r + 1, g, i] = p[i]
        top = K - 1
        first = max(dn_first[g], 1)
        if top >= first:
            _mults(R[g, top], E, g, log_mode, c_max, c)
        for r in range(top, first - 1, -1):
            _mults(R[g, r - 1], E, g, log_mode, c_max, c_below)
            if r >= k:
                for i in range(W):
                    d[i] = 1.0
            else:
                for i in range(W):
                    d[i] = 1.0 - d[i] / c[i]
            for i in range(W):  # a select, not a branch (c_r > 1 varies with the item)
                P[r, g, i] = d[i] if c_below[i] > 1.0 else P[r, g, i]
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
def near_pairs(lg, bt, sizes, counts, gi, ia, ib, c_max, out):
    """``out[t] = Σ_r n_r π_{a|r} π'_{b|r−1}`` of each (group, item a, item b) triple: the
    arithmetic of :func:`privirt.rasch._esf._near_pair_chunk` (its two chains and the
    ``γ^{(a)}`` step) in one pass per triple, without (triples, K) temporaries."""
    K = lg.shape[1] - 1
    lr = np.empty(K)
    lga = np.empty(K)
    c = np.empty(K)
    pa = np.empty(K + 1)
    pb = np.empty(K + 1)
    for t in range(gi.size):
        g = gi[t]
        k = sizes[g]
        ba = bt[g, ia[t]]
        for r in range(K):  # log(γ_r / γ_{r+1}), 0 past the group's size
            lr[r] = lg[g, r] - lg[g, r + 1] if r < k else 0.0
        _chain_one(lr, k, -ba, c_max, c, pa)
        for r in range(k + 1, K + 1):
            pa[r] = 0.0
        for s in range(K):  # log γ^{(a)}_s, by the form whose factor is ≥ 1/2
            if pa[s] <= 0.5:
                lga[s] = lg[g, s] + math.log1p(-min(pa[s], 1.0))
            else:
                lga[s] = lg[g, s + 1] + math.log(pa[s + 1]) + ba
        for s in range(K - 1):
            lr[s] = lga[s] - lga[s + 1] if s < k - 1 else 0.0
        _chain_one(lr[: K - 1], k - 1, -bt[g, ib[t]], c_max, c, pb)
        for s in range(k, K):
            pb[s] = 0.0
        acc = 0.0
        for r in range(1, K + 1):
            acc += counts[g, r] * pa[r] * pb[r - 1]
        out[t] = acc
