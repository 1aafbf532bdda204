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
def near_pairs_a(lg, bt, sizes, gi, ia, c_max, pa):
    """``pa[t, r] = π_{a|r}`` of each (group ``gi[t]``, item ``ia[t]``) (0 past the group's
    size): the first chain of :func:`privirt.rasch._esf._near_pair_chunk`, one pass per
    triple."""
    K = lg.shape[1] - 1
    lr = np.empty(K)
    c = np.empty(K)
    p = np.empty(K + 1)
    for t in range(gi.size):
        g = gi[t]
        k = sizes[g]
        for r in range(K):  # log(γ_r / γ_{r+1}), 0 past the group's size
            lr[r] = lg[g, r] - lg[g, r + 1] if r < k else 0.0
        _chain_one(lr, k, -bt[g, ia[t]], c_max, c, p)
        for r in range(K + 1):
            pa[t, r] = p[r] if r <= k else 0.0


@njit(**_JIT)
def near_pairs_b(lga, bt, sizes, counts, gi, ib, pa, c_max, out):
    """``out[t] = Σ_r n_r π_{a|r} π'_{b|r−1}`` from ``lga[t, s] = log γ^{(a)}_s`` and ``pa``
    (:func:`near_pairs_a`): the second chain and the sum of
    :func:`privirt.rasch._esf._near_pair_chunk`, one pass per triple."""
    K = lga.shape[1]
    lr = np.empty(K - 1)
    c = np.empty(K - 1)
    p = np.empty(K)
    for t in range(gi.size):
        g = gi[t]
        k = sizes[g] - 1
        for s in range(K - 1):
            lr[s] = lga[t, s] - lga[t, s + 1] if s < k else 0.0
        _chain_one(lr, k, -bt[g, ib[t]], c_max, c, p)
        acc = 0.0
        for r in range(1, min(k + 1, K) + 1):  # p past the reduced size: 0
            acc += counts[g, r] * pa[t, r] * p[r - 1]
        out[t] = acc
